package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// segment create refuses --zk-auth credentials that are not the cluster's
// (exit 2, the mismatch named, nothing created): with credentials on a
// cluster created without them, the tag's token znode (and record) would
// be guarded by credentials no node uses, and every node would answer 503
// "zk: not authenticated" for the tag; on a cluster with credentials, other
// ones (or none) could not write its tags anyway.
func TestIntegration_SegmentCreateRefusesCredentialsNotTheCluster(t *testing.T) {
	zkc := zkharness.StartStandalone(t)
	z := zkc.ConnectString()
	for _, args := range [][]string{
		{"cluster", "create", "open", "--zk", z},
		{"cluster", "create", "guarded", "--zk", z, "--zk-auth", "ops:s3cret"},
	} {
		var out, errOut bytes.Buffer
		if code := Main(args, &out, &errOut); code != 0 {
			t.Fatalf("%q: exit %d\n%s%s", args, code, out.String(), errOut.String())
		}
	}
	conn, _, err := zk.Connect([]string{z}, 5*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)

	for _, tc := range []struct {
		name, cluster string
		auth          []string
		want          []string
	}{
		{"credentials on a cluster created without", "open", []string{"--zk-auth", "ops:s3cret"},
			[]string{`cluster "open" was created without --zk-auth`, `--zk-auth of user "ops"`, "run segment create without --zk-auth"}},
		{"no credentials on a cluster created with them", "guarded", nil,
			[]string{`cluster "guarded" is guarded by the --zk-auth credentials of user "ops"`, "give them with --zk-auth"}},
		{"another password", "guarded", []string{"--zk-auth", "ops:wrong"},
			[]string{`the password of --zk-auth user "ops" is not the cluster's`}},
		{"another user", "guarded", []string{"--zk-auth", "dev:s3cret"},
			[]string{`--zk-auth user "dev" is not the cluster's: cluster "guarded" is guarded by the credentials of user "ops"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"create", "tok", "--require-token", "--zk", z, "--cluster", tc.cluster}, tc.auth...)
			code, out, errOut := runSegment(args...)
			if code != 2 || out != "" {
				t.Errorf("exit %d, stdout %q; want exit 2 and nothing printed (no token)", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if ok, _, err := conn.Exists("/snowflaked/" + tc.cluster + "/segments/tok"); err != nil || ok {
				t.Errorf("tag znode exists: %v, %v; want nothing created", ok, err)
			}
			if ok, _, err := conn.Exists("/snowflaked/" + tc.cluster + "/segments"); tc.cluster == "open" && (err != nil || ok) {
				t.Errorf("segments znode exists: %v, %v; want nothing created (with the wrong ACL)", ok, err)
			}
		})
	}

	for _, tc := range []struct{ cluster, auth string }{{"open", ""}, {"guarded", "ops:s3cret"}} {
		args := []string{"create", "tok", "--require-token", "--zk", z, "--cluster", tc.cluster}
		if tc.auth != "" {
			args = append(args, "--zk-auth", tc.auth)
		}
		if code, out, errOut := runSegment(args...); code != 0 || !strings.Contains(out, "shown once") {
			t.Errorf("cluster %s, the cluster's own credentials: exit %d\n%s%s", tc.cluster, code, out, errOut)
		}
	}
}
