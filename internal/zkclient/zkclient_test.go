package zkclient

import (
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
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
			got := EscapeName(tc.key)
			if got != tc.want {
				t.Fatalf("escape(%q) = %q, want %q", tc.key, got, tc.want)
			}
			back, err := UnescapeName(got)
			if err != nil || back != tc.key {
				t.Fatalf("unescape(%q) = %q, %v; want %q", got, back, err, tc.key)
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
			got, err := UnescapeName(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("unescape(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.wantErr)
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
			if err := ValidateCluster(tc.cluster); (err == nil) != tc.ok {
				t.Fatalf("ValidateCluster(%q) = %v, want ok=%v", tc.cluster, err, tc.ok)
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
			if err := ValidateNodeKey(tc.key); (err == nil) != tc.ok {
				t.Fatalf("ValidateNodeKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
			}
		})
	}
}

func TestACLs(t *testing.T) {
	open, root := ACLs("")
	if len(open) != 1 || open[0].Scheme != "world" || open[0].Perms != 0x1f || len(root) != 1 {
		t.Fatalf("open ACLs %v %v", open, root)
	}
	acl, root := ACLs("u:p")
	if len(acl) != 2 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "u:") || acl[0].Perms != 0x1f ||
		acl[1].Scheme != "world" || acl[1].Perms != 1 {
		t.Fatalf("digest ACL %v", acl)
	}
	// World read, create and delete: each cluster's credentials create
	// and delete its own znode under a root another cluster created.
	if root[1].Perms != zk.PermRead|zk.PermCreate|zk.PermDelete || root[1].Perms&(zk.PermWrite|zk.PermAdmin) != 0 {
		t.Fatalf("root ACL %v: world should read, create and delete, and neither write nor administer", root)
	}
}
