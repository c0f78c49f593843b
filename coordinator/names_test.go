package coordinator

import (
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

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

// A forever znode's name carries its node key escaped, whatever the key.
func TestForeverNameRoundTrip(t *testing.T) {
	for _, key := range []string{"node-1", "a/b", "10.0.0.5:8080", "ключ", "%41", ".hidden", "[::1]:80"} {
		name := zkclient.EscapeName(key) + "-0000000042"
		k, seq, err := parseForeverName(name)
		if err != nil || k != key || seq != 42 {
			t.Fatalf("parseForeverName(%q) = %q, %d, %v; want %q, 42", name, k, seq, err, key)
		}
	}
}
