package node

import (
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles/tlstest"
)

func TestValidateTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	a, b := ca.Issue(t, "a"), ca.Issue(t, "b")
	ok := defaultConfig()
	ok.WorkerID = 1
	tests := []validateCase{
		{"HTTPS", func(c *Config) { c.TLSCert, c.TLSKey = a.CertFile, a.KeyFile }, nil},
		{"mutual TLS with allow-lists", func(c *Config) {
			c.TLSCert, c.TLSKey, c.TLSClientCA, c.TLSCA = a.CertFile, a.KeyFile, ca.File, ca.File
			c.TLSClientAllow, c.TLSAdminAllow = "app,node-1", "ops"
		}, nil},
		{"cert without key", func(c *Config) { c.TLSCert = a.CertFile }, []string{"--tls-cert and --tls-key go together"}},
		{"key without cert", func(c *Config) { c.TLSKey = a.KeyFile }, []string{"--tls-cert and --tls-key go together"}},
		{"mismatched pair", func(c *Config) { c.TLSCert, c.TLSKey = a.CertFile, b.KeyFile }, []string{"--tls-cert " + a.CertFile, "key " + b.KeyFile + ": does not go with"}},
		{"unreadable cert", func(c *Config) { c.TLSCert, c.TLSKey = a.CertFile+".missing", a.KeyFile }, []string{"certificate " + a.CertFile + ".missing"}},
		{"client CA not PEM", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSClientCA = a.CertFile, a.KeyFile, "/dev/null" }, []string{"--tls-client-ca /dev/null", "no PEM certificate"}},
		{"peer CA unreadable", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSCA = a.CertFile, a.KeyFile, ca.File+".missing" }, []string{"--tls-ca " + ca.File + ".missing"}},
		{"client CA without cert", func(c *Config) { c.TLSClientCA = ca.File }, []string{"--tls-client-ca: only with --tls-cert"}},
		{"allow-list without client CA", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSClientAllow = a.CertFile, a.KeyFile, "app" }, []string{"--tls-client-allow: only with --tls-client-ca"}},
		{"allow-list with a hole", func(c *Config) {
			c.TLSCert, c.TLSKey, c.TLSClientCA, c.TLSAdminAllow = a.CertFile, a.KeyFile, ca.File, "ops,,x"
		}, []string{"--tls-admin-allow: empty name"}},
	}
	checkValidate(t, ok, tests)
}

// The admin allow-list guards the node's state, not its IDs.
func TestAdminPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/status": true, "/metrics": true, "/clock": true, "/debug/chaos/clock": true,
		"/id": false, "/ids": false, "/time": false, "/readyz": false, "/statusx": false, "/segment/x": false,
	} {
		if got := adminPath([]byte(path)); got != want {
			t.Errorf("adminPath(%q) = %v, want %v", path, got, want)
		}
	}
}
