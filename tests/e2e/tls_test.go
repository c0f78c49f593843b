package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sfclient "codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles/tlstest"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// httpsClient returns an HTTP client that trusts ca and presents leaf
// (none when leaf is nil), keeping no connection: each request is a new
// handshake.
func httpsClient(ca *tlstest.CA, leaf *tlstest.Leaf, t *testing.T) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool()}
	if leaf != nil {
		cfg.Certificates = []tls.Certificate{leaf.TLS(t)}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

// tlsFiles installs leaf as the node's certificate files in dir and
// returns the flags that serve it, requiring client certificates of ca.
func tlsFiles(t *testing.T, dir string, ca *tlstest.CA, leaf tlstest.Leaf) (certFile, keyFile string, flags []string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	tlstest.Install(t, leaf, certFile, keyFile)
	return certFile, keyFile, []string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", ca.File}
}

// servedName is the common name of the certificate a handshake with addr
// presents now.
func servedName(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// A node with --tls-cert, --tls-key and --tls-client-ca serves IDs over
// HTTPS to clients with a certificate of that CA only; plain HTTP on its
// port gets no ID; snowflakectl and the Go client speak it; a new
// certificate in the files is served without a restart.
func TestIntegration_TLSStandaloneMutualTLS(t *testing.T) {
	ca, stranger := tlstest.NewCA(t, "snowflaked-test-ca"), tlstest.NewCA(t, "stranger-ca")
	dir := t.TempDir()
	certFile, keyFile, flags := tlsFiles(t, dir, ca, ca.Issue(t, "node-first"))
	app := ca.Issue(t, "app")
	p := start(t, binSnowflaked, nodeArgs(dir, 5, flags...))
	p.waitStarted()
	p.https = httpsClient(ca, &app, t)
	p.waitReadyz(http.StatusOK, readyTimeout)

	code, body := p.get("/id")
	if _, err := strconv.ParseInt(strings.TrimSpace(body), 10, 64); code != http.StatusOK || err != nil {
		t.Fatalf("GET https://…/id with a client certificate: %d %q", code, body)
	}

	checkTLSRefused(t, p, ca, stranger)

	t.Run("snowflakectl", func(t *testing.T) { checkTLSCtl(t, p, ca, app) })
	t.Run("Go client", func(t *testing.T) { checkTLSGoClient(t, p, ca, app) })

	checkTLSRotation(t, p, ca, app, certFile, keyFile)
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// checkTLSRefused checks that a client without a certificate, one with
// another CA's certificate and plain HTTP get no ID from the node, and
// that the node counts each kind of failed handshake.
func checkTLSRefused(t *testing.T, p *proc, ca, stranger *tlstest.CA) {
	t.Helper()
	refused := []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"no client certificate", httpsClient(ca, nil, t), "https://" + p.addr + "/id"},
		{"another CA's client certificate", func() *http.Client {
			leaf := stranger.Issue(t, "stranger")
			c := httpsClient(ca, nil, t)
			cert := leaf.TLS(t)
			c.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
			return c
		}(), "https://" + p.addr + "/id"},
		{"plain HTTP", &http.Client{Timeout: 10 * time.Second}, "http://" + p.addr + "/id"},
	}
	for _, r := range refused {
		resp, err := r.client.Get(r.url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if _, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); perr == nil || resp.StatusCode == http.StatusOK {
				t.Errorf("%s: got %d %q, want no ID", r.name, resp.StatusCode, b)
			}
		}
		t.Logf("%s: %v", r.name, err)
	}
	for _, reason := range []string{"not_tls", "no_client_cert", "bad_client_cert"} {
		if v := metricValue(t, p, `snowflaked_tls_handshake_failures_total{reason="`+reason+`"}`); v < 1 {
			t.Errorf("snowflaked_tls_handshake_failures_total{reason=%q} = %v, want at least 1", reason, v)
		}
	}
}

// checkTLSCtl checks snowflakectl probe and get over HTTPS, with and
// without a client certificate, and that --tls-cert wants --tls-key.
func checkTLSCtl(t *testing.T, p *proc, ca *tlstest.CA, app tlstest.Leaf) {
	t.Helper()
	tlsArgs := []string{"--tls-ca", ca.File, "--tls-cert", app.CertFile, "--tls-key", app.KeyFile}
	if code, out, errOut := ctl(t, append([]string{"probe", "https://" + p.addr + "/readyz"}, tlsArgs...)...); code != 0 {
		t.Errorf("probe https with a client certificate: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := ctl(t, "probe", "https://"+p.addr+"/readyz", "--tls-ca", ca.File); code != 1 {
		t.Errorf("probe https without a client certificate: exit %d, want 1\n%s%s", code, out, errOut)
	}
	code, out, errOut := ctl(t, append([]string{"get", "--servers", p.addr, "--count", "3"}, tlsArgs...)...)
	if ids := strings.Fields(out); code != 0 || len(ids) != 3 {
		t.Errorf("get --count 3 over HTTPS: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := ctl(t, "get", "--servers", p.addr, "--tls-ca", ca.File, "--tls-cert", app.CertFile); code != 2 || !strings.Contains(errOut, "--tls-key") {
		t.Errorf("get --tls-cert without --tls-key: exit %d %s, want 2 naming --tls-key", code, errOut)
	}
}

// checkTLSGoClient checks that the Go client gets an ID with a client
// certificate, and none without one or over plain HTTP.
func checkTLSGoClient(t *testing.T, p *proc, ca *tlstest.CA, app tlstest.Leaf) {
	t.Helper()
	tests := []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{
		{"Config.TLS with a client certificate", &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{app.TLS(t)}}, true},
		{"Config.TLS without one", &tls.Config{RootCAs: ca.Pool()}, false},
		{"plain HTTP", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sfclient.New(context.Background(), sfclient.Config{Servers: []string{p.addr}, TLS: tc.tls, Timeout: 2 * time.Second, Attempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			id, err := c.Next(ctx)
			if (err == nil) != tc.ok || (tc.ok && id <= 0) {
				t.Errorf("Next: %d, %v (want success %v)", id, err, tc.ok)
			}
		})
	}
}

// checkTLSRotation replaces the node's certificate files: within a few
// seconds the next handshake presents the new certificate, from the same
// process.
func checkTLSRotation(t *testing.T, p *proc, ca *tlstest.CA, app tlstest.Leaf, certFile, keyFile string) {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{app.TLS(t)}}
	if got := servedName(t, p.addr, cfg); got != "node-first" {
		t.Fatalf("served certificate %q, want node-first", got)
	}
	tlstest.Install(t, ca.Issue(t, "node-rotated"), certFile, keyFile)
	deadline := time.Now().Add(10 * time.Second)
	for servedName(t, p.addr, cfg) != "node-rotated" {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was not served within 10s of replacing the files")
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.waitLog("TLS certificate reloaded", 5*time.Second)
	if code, body := p.get("/id"); code != http.StatusOK || p.Exited() {
		t.Errorf("after the rotation: /id %d %q, exited %v (want the same process serving)", code, body, p.Exited())
	}
}

// --tls-client-allow and --tls-admin-allow let named client certificates
// through, the API and the admin paths each their own; others get 403
// client_not_allowed.
func TestIntegration_TLSAllowLists(t *testing.T) {
	ca := tlstest.NewCA(t, "snowflaked-test-ca")
	dir := t.TempDir()
	_, _, flags := tlsFiles(t, dir, ca, ca.Issue(t, "node"))
	p := startNode(t, binSnowflaked, nodeArgs(dir, 6, append(flags, "--tls-client-allow", "app", "--tls-admin-allow", "ops")...))
	app, ops := ca.Issue(t, "app"), ca.Issue(t, "ops")
	p.https = httpsClient(ca, &app, t)
	p.waitReadyz(http.StatusOK, readyTimeout)
	tests := []struct {
		client string
		leaf   tlstest.Leaf
		path   string
		want   int
	}{
		{"app", app, "/id", http.StatusOK},
		{"app", app, "/metrics", http.StatusForbidden},
		{"app", app, "/status", http.StatusForbidden},
		{"ops", ops, "/metrics", http.StatusOK},
		{"ops", ops, "/clock", http.StatusOK},
		{"ops", ops, "/id", http.StatusForbidden},
	}
	for _, tc := range tests {
		p.https = httpsClient(ca, &tc.leaf, t)
		code, body := p.get(tc.path)
		if code != tc.want || (code == http.StatusForbidden && !strings.Contains(body, `"client_not_allowed"`)) {
			t.Errorf("%s GET %s: %d %s, want %d", tc.client, tc.path, code, body, tc.want)
		}
	}
}

// Bad TLS flags stop the start with exit 2, naming the flag or the file.
func TestIntegration_TLSBadFlagsExit2(t *testing.T) {
	ca := tlstest.NewCA(t, "snowflaked-test-ca")
	a, b := ca.Issue(t, "a"), ca.Issue(t, "b")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"cert without key", []string{"--tls-cert", a.CertFile}, "--tls-cert and --tls-key go together"},
		{"key of another certificate", []string{"--tls-cert", a.CertFile, "--tls-key", b.KeyFile}, "key " + b.KeyFile + ": does not go with certificate " + a.CertFile},
		{"missing certificate", []string{"--tls-cert", missing, "--tls-key", a.KeyFile}, missing},
		{"client CA not a CA file", []string{"--tls-cert", a.CertFile, "--tls-key", a.KeyFile, "--tls-client-ca", a.KeyFile}, "--tls-client-ca " + a.KeyFile},
		{"allow-list without client CA", []string{"--tls-cert", a.CertFile, "--tls-key", a.KeyFile, "--tls-client-allow", "app"}, "--tls-client-allow: only with --tls-client-ca"},
		{"client CA without cert", []string{"--tls-client-ca", ca.File}, "--tls-client-ca: only with --tls-cert"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, binSnowflaked, nodeArgs(t.TempDir(), 1, tc.flags...))
			if code := p.exitCode(); code != 2 || !strings.Contains(p.Output(), tc.want) {
				t.Errorf("exit %d, want 2 with %q; output:\n%s", code, tc.want, p.Output())
			}
		})
	}
}

// Three ZooKeeper-mode nodes with mutual TLS: each one's peer clock check
// reaches the two others over HTTPS (presenting its own certificate) and
// their clocks agree; the status page reads the peers' /clock over HTTPS;
// snowflakectl status asks /readyz over HTTPS.
func TestIntegration_TLSClusterPeersAgree(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	ca := tlstest.NewCA(t, "snowflaked-test-ca")
	admin := ca.Issue(t, "ops")
	var nodes []*proc
	for i := 1; i <= 3; i++ {
		dir := t.TempDir()
		_, _, flags := tlsFiles(t, dir, ca, ca.Issue(t, fmt.Sprintf("node-%d", i)))
		flags = append(flags, "--tls-client-allow", "node-1,node-2,node-3,ops")
		p := startNode(t, binSnowflaked, clusterArgs(dir, zk.ConnectString(), "tls", fmt.Sprintf("node-%d", i), flags...))
		p.https = httpsClient(ca, &admin, t)
		nodes = append(nodes, p)
	}
	lists, _ := distinctWorkerIDs(t, nodes)
	checkIDs(t, lists...)
	checkPeersReachEachOther(t, nodes)
	code, page := nodes[0].get("/status")
	if code != http.StatusOK {
		t.Fatalf("/status: %d", code)
	}
	for _, p := range nodes[1:] {
		if !strings.Contains(page, p.addr) {
			t.Errorf("/status does not show %s", p.addr)
		}
	}
	if strings.Contains(page, "unreachable") {
		t.Errorf("/status shows a peer unreachable over HTTPS:\n%s", page)
	}
	code, out, errOut := ctl(t, "status", "--zk", zk.ConnectString(), "--cluster", "tls", "--tls-ca", ca.File, "--tls-cert", admin.CertFile, "--tls-key", admin.KeyFile)
	if code != 0 || !strings.Contains(out, "3 in service") {
		t.Errorf("snowflakectl status: exit %d\n%s%s", code, out, errOut)
	}
}

// A node whose ZooKeeper never answers stays in its start phase, and its
// port applies the allow-lists there as the running node does: a client
// not on the list of a path gets 403 client_not_allowed, an allowed client
// sees that the node is starting, and only an admin (--tls-admin-allow)
// reads what it waits for, which names ZooKeeper's addresses.
func TestIntegration_TLSAllowListsWhileStarting(t *testing.T) {
	ca := tlstest.NewCA(t, "snowflaked-test-ca")
	dir := t.TempDir()
	_, _, flags := tlsFiles(t, dir, ca, ca.Issue(t, "node"))
	// A ZooKeeper address that takes connections into its backlog and
	// never answers: the claim waits for it.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	waits := "connecting to ZooKeeper " + dead.Addr().String()
	p := start(t, binSnowflaked, clusterArgs(dir, dead.Addr().String(), "starting", "node-s",
		append(flags, "--tls-client-allow", "app,ops", "--tls-admin-allow", "ops")...))
	m := p.waitLog("listening: /healthz answers while the node starts, /readyz says what it waits for", startTimeout)
	p.addr, _ = m["listen"].(string)
	if !strings.HasPrefix(p.addr, "127.0.0.1:") {
		t.Fatalf("listening line has listen %q: %v", p.addr, m)
	}
	leaves := map[string]tlstest.Leaf{"app": ca.Issue(t, "app"), "ops": ca.Issue(t, "ops"), "stranger": ca.Issue(t, "stranger")}
	as := func(client string) { l := leaves[client]; p.https = httpsClient(ca, &l, t) }

	as("ops")
	deadline := time.Now().Add(startTimeout)
	for {
		code, body := p.get("/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, waits) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz as ops: %d %s, want 503 naming %q", code, body, waits)
		}
		time.Sleep(pollEvery)
	}
	tests := []struct {
		client, path string
		want         int
		contains     string
		detail       bool
	}{
		{"stranger", "/healthz", http.StatusForbidden, `"client_not_allowed"`, false},
		{"stranger", "/readyz", http.StatusForbidden, `"client_not_allowed"`, false},
		{"stranger", "/id", http.StatusForbidden, `"client_not_allowed"`, false},
		{"app", "/healthz", http.StatusOK, `"status":"ok"`, false},
		{"app", "/readyz", http.StatusServiceUnavailable, `"state":"starting","reason":"starting","detail":""`, false},
		{"app", "/id", http.StatusServiceUnavailable, `"code":"out_of_service"`, false},
		{"app", "/status", http.StatusForbidden, `"client_not_allowed"`, false},
		{"ops", "/readyz", http.StatusServiceUnavailable, `"state":"starting"`, true},
		{"ops", "/status", http.StatusServiceUnavailable, `"code":"out_of_service"`, true},
	}
	for _, tc := range tests {
		as(tc.client)
		code, body := p.get(tc.path)
		if code != tc.want || !strings.Contains(body, tc.contains) || strings.Contains(body, waits) != tc.detail {
			t.Errorf("%s GET %s while starting: %d %s, want %d with %s, the detail %q: %v", tc.client, tc.path, code, body, tc.want, tc.contains, waits, tc.detail)
		}
	}
	if p.Exited() {
		t.Fatalf("the node exited while starting:\n%s", p.Output())
	}
}
