package node

import (
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/certgen"
	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles/tlstest"
)

// A ZooKeeper-mode node refuses at start a --tls-cert its peers would
// reject: without clientAuth when peers require client certificates
// (--tls-client-ca; such a node used to start, serve, and see every peer
// clock check fail with GET /time: EOF), without serverAuth, or without a
// SAN for the host it advertises. Each error names the fix. A standalone
// node has no peers: nothing of this is checked there.
func TestValidatePeerCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	issue := func(server, client bool, hosts ...string) tlstest.Leaf {
		return ca.IssueFor(t, certgen.Request{CommonName: "node", Hosts: hosts, Server: server, Client: client, Lifetime: time.Hour})
	}
	both := issue(true, true, "127.0.0.1", "node-1")
	serverOnly := issue(true, false, "127.0.0.1")
	clientOnly := issue(false, true, "127.0.0.1")
	ok := defaultConfig()
	ok.WorkerID, ok.ZK, ok.Listen = -1, "127.0.0.1:2181", "127.0.0.1:8080"
	ok.TLSCert, ok.TLSKey, ok.TLSClientCA = both.CertFile, both.KeyFile, ca.File
	with := func(l tlstest.Leaf, change func(*Config)) func(*Config) {
		return func(c *Config) {
			c.TLSCert, c.TLSKey = l.CertFile, l.KeyFile
			if change != nil {
				change(c)
			}
		}
	}
	fix := "snowflakectl cert create-node"
	checkValidate(t, ok, []validateCase{
		{"both usages, IP SAN of --listen", with(both, nil), nil},
		{"DNS SAN of --advertise", with(both, func(c *Config) { c.Listen, c.Advertise = "0.0.0.0:8080", "node-1:8080" }), nil},
		{"no clientAuth, peers require client certificates", with(serverOnly, nil),
			[]string{"--tls-cert " + serverOnly.CertFile, "no clientAuth extended key usage", "--tls-client-ca", "GET /time: EOF", fix}},
		{"no clientAuth, no client certificates asked", with(serverOnly, func(c *Config) { c.TLSClientCA = "" }), nil},
		{"no serverAuth", with(clientOnly, nil), []string{"no serverAuth extended key usage", fix}},
		{"no SAN for --listen's host", with(serverOnly, func(c *Config) { c.TLSClientCA, c.Listen = "", "127.0.0.2:8080" }),
			[]string{"does not name 127.0.0.2, the host the node advertises (--listen 127.0.0.2:8080)", "it names IP:127.0.0.1", fix}},
		{"no SAN for --advertise", with(both, func(c *Config) { c.Advertise = "10.0.0.5:8080" }),
			[]string{"does not name 10.0.0.5", "(--advertise 10.0.0.5:8080)", "DNS:node-1, IP:127.0.0.1", fix}},
		{"standalone: no peers", with(clientOnly, func(c *Config) { c.ZK, c.WorkerID, c.Listen = "", 1, "127.0.0.2:8080" }), nil},
	})
}
