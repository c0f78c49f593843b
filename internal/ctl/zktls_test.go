package ctl

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/tests/testpki"
)

// Every command that takes --zk takes --zk-tls-*, and refuses files that do
// not load with exit 2 naming the flag, before it dials anything (the
// address below has no ZooKeeper: a dial would fail with exit 1).
func TestZKTLSFlags(t *testing.T) {
	pki := testpki.New(t)
	missing := filepath.Join(t.TempDir(), "absent.pem")
	const zk = "127.0.0.1:1"
	commands := [][]string{
		{"status", "--zk", zk},
		{"cluster", "create", "c1", "--zk", zk},
		{"cluster", "set", "c1", "--recycle-after", "1h", "--zk", zk},
		{"cluster", "list", "--zk", zk},
		{"cluster", "delete", "c1", "--yes", "--zk", zk},
		{"node", "retire", "k1", "--zk", zk},
		{"segment", "list", "--zk", zk},
		{"segment", "status", "t1", "--zk", zk},
		{"get", "--zk", zk},
		{"bench", "--zk", zk},
	}
	bad := []struct {
		name string
		tls  []string
		want string
	}{
		{"cert without key", []string{"--zk-tls-ca", pki.CA, "--zk-tls-cert", pki.ClientCert}, "--zk-tls-cert"},
		{"key without cert", []string{"--zk-tls-ca", pki.CA, "--zk-tls-key", pki.ClientKey}, "--zk-tls-key"},
		{"unreadable CA", []string{"--zk-tls-ca", missing}, "--zk-tls-ca"},
		{"unreadable key", []string{"--zk-tls-ca", pki.CA, "--zk-tls-cert", pki.ClientCert, "--zk-tls-key", missing}, "--zk-tls-key"},
	}
	for _, cmd := range commands {
		for _, b := range bad {
			t.Run(strings.Join(cmd[:min(2, len(cmd))], " ")+"/"+b.name, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				args := append(append([]string{}, cmd...), b.tls...)
				if code := Main(args, &stdout, &stderr); code != exitUsage {
					t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, stderr.String())
				}
				if !strings.Contains(stderr.String(), b.want) {
					t.Errorf("stderr %q does not name %s", stderr.String(), b.want)
				}
			})
		}
	}
}

// The variables the node reads its TLS flags from set snowflakectl's too.
func TestZKTLSFlagsFromEnvironment(t *testing.T) {
	t.Setenv("SNOWFLAKED_ZK_TLS_CA", filepath.Join(t.TempDir(), "absent.pem"))
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"status", "--zk", "127.0.0.1:1"}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, stderr.String())
	}
	if !strings.Contains(stderr.String(), "--zk-tls-ca") || !strings.Contains(stderr.String(), "absent.pem") {
		t.Errorf("stderr %q does not name --zk-tls-ca and the file", stderr.String())
	}
}
