package coordinator

import (
	"strings"
	"testing"
)

func TestEscapeNodeKeyRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		key, want string
	}{
		{"10.0.0.1:8080", "10.0.0.1:8080"},
		{"pod-7", "pod-7"},
		{"a/b", "a%2Fb"},
		{"100%", "100%25"},
		{".hidden", "%2Ehidden"},
		{"..", "%2E."},
		{"a.b", "a.b"},
		{"with space", "with%20space"},
		{"ünï", "%C3%BCn%C3%AF"},
		{"-", "-"},
		{"a-0000000001", "a-0000000001"},
		{"_c_0123", "_c_0123"},
		{"[::1]:80", "%5B::1%5D:80"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			got := escapeNodeKey(tc.key)
			if got != tc.want {
				t.Fatalf("escape(%q) = %q, want %q", tc.key, got, tc.want)
			}
			back, err := unescapeNodeKey(got)
			if err != nil || back != tc.key {
				t.Fatalf("unescape(%q) = %q, %v; want %q", got, back, err, tc.key)
			}
			name := got + "-0000000042"
			k, seq, err := parseForeverName(name)
			if err != nil || k != tc.key || seq != 42 {
				t.Fatalf("parseForeverName(%q) = %q, %d, %v", name, k, seq, err)
			}
		})
	}
}

func TestUnescapeNodeKeyRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, wantErr string }{
		{"truncated escape", "a%2", "truncated"},
		{"bad hex", "a%zz", "bad %-escape"},
		{"lower-case hex", "a%2f", "bad %-escape"},
		{"needless escape", "%41", "canonical"},
		{"raw slash is not canonical", "a b", "canonical"},
		{"leading dot unescaped", ".x", "canonical"},
		{"control char", "a%0A", "control"},
		{"invalid utf-8", "%FF", "UTF-8"},
		{"empty", "", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := unescapeNodeKey(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("unescape(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
		})
	}
}

func TestParseForeverNameRejects(t *testing.T) {
	for _, tc := range []string{
		"", "nodash", "-0000000001", "key-123", "key-00000000012", "key-00000000x1",
		"key-", "key-+000000001", "key-9999999999", "k%zz-0000000001", "_c_garbage",
	} {
		t.Run(tc, func(t *testing.T) {
			if k, seq, err := parseForeverName(tc); err == nil {
				t.Fatalf("parseForeverName(%q) = %q, %d; want an error", tc, k, seq)
			}
		})
	}
}

func TestParseWorkerName(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  int64
		valid bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"1023", 1023, true},
		{"1024", 0, false},
		{"-1", 0, false},
		{"07", 0, false},
		{"+7", 0, false},
		{"x", 0, false},
		{"", 0, false},
		{" 7", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseWorkerName(tc.in, 1023)
			if tc.valid != (err == nil) || got != tc.want {
				t.Fatalf("parseWorkerName(%q) = %d, %v; want %d valid=%v", tc.in, got, err, tc.want, tc.valid)
			}
		})
	}
}

func TestValidateClusterAndKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster string
		ok      bool
	}{
		{"plain", "default", true},
		{"dashes", "prod-eu_1.a", true},
		{"empty", "", false},
		{"slash", "a/b", false},
		{"dot start", ".x", false},
		{"space", "a b", false},
		{"long", strings.Repeat("a", 101), false},
	} {
		t.Run("cluster "+tc.name, func(t *testing.T) {
			if err := validateCluster(tc.cluster); (err == nil) != tc.ok {
				t.Fatalf("validateCluster(%q) = %v, want ok=%v", tc.cluster, err, tc.ok)
			}
		})
	}
	for _, tc := range []struct {
		name, key string
		ok        bool
	}{
		{"addr", "10.0.0.1:8080", true},
		{"unicode", "nœud/1", true},
		{"empty", "", false},
		{"newline", "a\nb", false},
		{"bad utf8", "a\xffb", false},
		{"too long", strings.Repeat("k", 256), false},
	} {
		t.Run("key "+tc.name, func(t *testing.T) {
			if err := validateNodeKey(tc.key); (err == nil) != tc.ok {
				t.Fatalf("validateNodeKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
			}
		})
	}
}
