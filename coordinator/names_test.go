package coordinator

import (
	"testing"

	"codeberg.org/snowflaked/snowflaked/client/wire"
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

// The alive znode a node registers under is the one clients read.
func TestAliveNodeIsTheWires(t *testing.T) {
	for _, tt := range []struct {
		cluster string
		id      int64
	}{{"default", 0}, {"prod", 7}, {"eu-west", 1023}} {
		p := newPaths(tt.cluster)
		if got, want := p.aliveNode(tt.id), wire.AliveNode(tt.cluster, tt.id); got != want {
			t.Errorf("aliveNode(%d) in %s = %s, clients read %s", tt.id, tt.cluster, got, want)
		}
		if got, want := p.cluster, wire.ClusterPath(tt.cluster); got != want {
			t.Errorf("cluster znode of %s = %s, clients check %s", tt.cluster, got, want)
		}
	}
}
