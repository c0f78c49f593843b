package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	sfclient "codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/client/zkdiscovery"
	"codeberg.org/snowflaked/snowflaked/client/zktls"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/tests/testpki"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// ZooKeeper over mutual TLS (ssl.clientAuth=need) together with digest
// ACLs, against Debian's ZooKeeper: snowflakectl creates the cluster and
// reads its status through the TLS port, a node (TLS files from the
// environment) claims a worker ID and serves, the client's zkdiscovery
// finds it over TLS; the digest ACL still guards the znodes of a client that
// passed TLS; a node without a client certificate, and one trusting
// another CA, never get a session and say why.
func TestIntegration_ZooKeeperOverTLS(t *testing.T) {
	pki := testpki.New(t)
	zkc := zkharness.StartStandaloneTLS(t, zkharness.TLS{PKI: pki, ClientAuth: "need"})
	secure := zkc.SecureConnectString()
	const cluster, auth = "tls", "ops:secret"
	tlsFlags := []string{"--zk-tls-ca", pki.CA, "--zk-tls-cert", pki.ClientCert, "--zk-tls-key", pki.ClientKey}

	ctlArgs := func(args ...string) []string {
		return append(append(args, "--zk", secure, "--zk-auth", auth), tlsFlags...)
	}
	if code, out, errOut := ctl(t, ctlArgs("cluster", "create", cluster)...); code != 0 || !strings.Contains(out, "created cluster") {
		t.Fatalf("cluster create over TLS: exit %d\n%s%s", code, out, errOut)
	}

	dir := t.TempDir()
	p := startNode(t, binSnowflaked, clusterArgs(dir, secure, cluster, "node-tls", "--zk-auth", auth),
		"SNOWFLAKED_ZK_TLS_CA="+pki.CA, "SNOWFLAKED_ZK_TLS_CERT="+pki.ClientCert, "SNOWFLAKED_ZK_TLS_KEY="+pki.ClientKey)
	p.waitReadyz(http.StatusOK, readyTimeout)
	if code, body := p.get("/id"); code != http.StatusOK {
		t.Fatalf("/id over a TLS-coordinated node: %d %s", code, body)
	}
	worker := workerOf(t, p.ids(100))

	checkZKTLSStatus(t, worker, ctlArgs("status", "--cluster", cluster)...)
	t.Run("zkdiscovery over TLS finds the node", func(t *testing.T) {
		checkZKTLSDiscovery(t, pki, secure, cluster, p.addr, worker)
	})
	t.Run("the digest ACL still guards the znodes of a TLS client without --zk-auth", func(t *testing.T) {
		checkZKTLSDigestACL(t, pki, secure, cluster)
	})
	checkZKTLSRefused(t, pki, secure, cluster, auth)

	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// checkZKTLSStatus runs snowflakectl status --json with args and checks
// that it lists node-tls alone, in service with worker.
func checkZKTLSStatus(t *testing.T, worker int64, args ...string) {
	t.Helper()
	code, out, errOut := ctl(t, append(args, "--json")...)
	var st struct {
		Workers []struct {
			NodeKey   string `json:"node_key"`
			WorkerID  int64  `json:"worker_id"`
			InService bool   `json:"in_service"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st.Workers) != 1 ||
		st.Workers[0].NodeKey != "node-tls" || st.Workers[0].WorkerID != worker || !st.Workers[0].InService {
		t.Fatalf("status over TLS: exit %d (%v), want node-tls in service with worker %d\n%s%s", code, err, worker, out, errOut)
	}
}

// checkZKTLSDiscovery checks that zkdiscovery over TLS (at secure) finds
// exactly the node at addr, and that a client through it gets an ID of
// worker.
func checkZKTLSDiscovery(t *testing.T, pki testpki.PKI, secure, cluster, addr string, worker int64) {
	t.Helper()
	cfg, err := zktls.Load(zktls.Files{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := zkdiscovery.New(ctx, zkdiscovery.Config{Servers: []string{secure}, Cluster: cluster, TLS: cfg})
	if err != nil {
		t.Fatalf("zkdiscovery.New over TLS: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if nodes, _ := d.Nodes(); !slices.Equal(nodes, []string{addr}) {
		t.Fatalf("Nodes() = %q, want [%s]", nodes, addr)
	}
	c, err := sfclient.New(ctx, sfclient.Config{Discovery: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	id, err := c.Next(ctx)
	if err != nil || workerOf(t, []int64{id}) != worker {
		t.Fatalf("client Next through TLS discovery = %d, %v; want an ID of worker %d", id, err, worker)
	}
}

// checkZKTLSDigestACL checks that a client that passed TLS but gives no
// digest credentials may not create a znode under the cluster's alive/.
func checkZKTLSDigestACL(t *testing.T, pki testpki.PKI, secure, cluster string) {
	t.Helper()
	cfg, err := zktls.Load(zktls.Files{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	z, err := zkclient.Dial(context.Background(), zkclient.Config{Servers: []string{secure}, Cluster: cluster, Timeout: 10 * time.Second, Dial: zkconn.TLSDial(cfg)})
	if err != nil {
		t.Fatalf("session over TLS: %v", err)
	}
	t.Cleanup(z.Conn.Close)
	_, err = z.Conn.Create(wire.AlivePath(cluster)+"/999", []byte("127.0.0.1:1"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != zk.ErrNoAuth {
		t.Fatalf("create under alive/ without the digest credentials: %v, want %v", err, zk.ErrNoAuth)
	}
}

// checkZKTLSRefused checks that a node and snowflakectl without a client
// certificate, or trusting another CA, get no session at secure: exit 1,
// saying why.
func checkZKTLSRefused(t *testing.T, pki testpki.PKI, secure, cluster, auth string) {
	t.Helper()
	refused := []struct {
		name  string
		flags []string
		want  []string
	}{
		{"no client certificate", []string{"--zk-tls-ca", pki.CA}, []string{"TLS handshake with ZooKeeper " + secure, "bad certificate"}},
		{"another CA", []string{"--zk-tls-ca", pki.OtherCA, "--zk-tls-cert", pki.ClientCert, "--zk-tls-key", pki.ClientKey},
			[]string{"TLS handshake with ZooKeeper " + secure, "certificate signed by unknown authority"}},
	}
	for _, tc := range refused {
		t.Run("node refused: "+tc.name, func(t *testing.T) {
			q := start(t, binSnowflaked, clusterArgs(t.TempDir(), secure, cluster, "node-"+strings.ReplaceAll(tc.name, " ", "-"),
				append([]string{"--zk-auth", auth}, tc.flags...)...))
			if code := q.exitCode(); code != 1 {
				t.Fatalf("exit %d, want 1; output:\n%s", code, q.Output())
			}
			for _, s := range tc.want {
				if !strings.Contains(q.Output(), s) {
					t.Errorf("output lacks %q:\n%s", s, q.Output())
				}
			}
		})
		t.Run("snowflakectl refused: "+tc.name, func(t *testing.T) {
			code, out, errOut := ctl(t, append([]string{"status", "--zk", secure, "--cluster", cluster, "--timeout", "3s"}, tc.flags...)...)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
			}
			for _, s := range tc.want {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
}

// Bad --zk-tls-* files stop the node before it dials: exit 2 naming the
// flag (no ZooKeeper needed: the address has none).
func TestZooKeeperTLSFlagsRefused(t *testing.T) {
	pki := testpki.New(t)
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"cert without key", []string{"--zk-tls-ca", pki.CA, "--zk-tls-cert", pki.ClientCert}, "--zk-tls-cert"},
		{"key without cert", []string{"--zk-tls-ca", pki.CA, "--zk-tls-key", pki.ClientKey}, "--zk-tls-key"},
		{"unreadable CA", []string{"--zk-tls-ca", pki.Dir + "/absent.pem"}, "--zk-tls-ca"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := start(t, binSnowflaked, clusterArgs(t.TempDir(), "127.0.0.1:1", "c", "k", tc.flags...))
			if code := q.exitCode(); code != 2 {
				t.Fatalf("exit %d, want 2; output:\n%s", code, q.Output())
			}
			if !strings.Contains(q.Output(), tc.want) {
				t.Errorf("output does not name %s:\n%s", tc.want, q.Output())
			}
		})
	}
}
