package ctl

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles"
)

// runCtl runs snowflakectl with args and returns its exit status and
// output.
func runCtl(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func mustCtl(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCtl(args...)
	if code != 0 {
		t.Fatalf("snowflakectl %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// makeCerts runs the four commands into a new directory.
func makeCerts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	mustCtl(t, "cert", "create-ca", "--dir", dir)
	mustCtl(t, "cert", "create-node", "--dir", dir, "--hosts", "127.0.0.1,node-1,localhost")
	mustCtl(t, "cert", "create-client", "--dir", dir, "ops")
	return dir
}

// The certificates verify against the CA with crypto/x509: the node's for
// serverAuth on each of its hosts (DNS and IP SANs) and for clientAuth (it
// presents it to its peers); the client's for clientAuth only, named for
// the allow-lists; ZooKeeper's key store is its PKCS #8 key then its
// certificate; keys are 0600.
func TestCertCreateVerifies(t *testing.T) {
	dir := makeCerts(t)
	out := mustCtl(t, "cert", "create-zk", "--dir", dir, "--hosts", "127.0.0.1", "--secure-port", "2999")
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if !ca.IsCA || ca.Subject.CommonName != "snowflaked-ca" {
		t.Errorf("ca.crt: IsCA %v, CN %q", ca.IsCA, ca.Subject.CommonName)
	}
	verify := func(c *x509.Certificate, host string, usage x509.ExtKeyUsage) error {
		_, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	t.Run("node", func(t *testing.T) { checkNodeCert(t, readCert(t, filepath.Join(dir, "node.crt")), verify) })
	t.Run("client", func(t *testing.T) { checkClientCert(t, readCert(t, filepath.Join(dir, "ops.crt")), verify) })
	t.Run("zookeeper", func(t *testing.T) { checkZooKeeperFiles(t, dir, out, verify) })
	t.Run("files", func(t *testing.T) { checkCertFiles(t, dir) })
}

// certVerifier verifies a certificate against the test's CA for host and
// usage.
type certVerifier func(c *x509.Certificate, host string, usage x509.ExtKeyUsage) error

// checkNodeCert: a node's certificate serves each of its hosts and is a
// client to its peers, and names nothing else.
func checkNodeCert(t *testing.T, node *x509.Certificate, verify certVerifier) {
	t.Helper()
	for _, host := range []string{"127.0.0.1", "node-1", "localhost"} {
		if err := verify(node, host, x509.ExtKeyUsageServerAuth); err != nil {
			t.Errorf("node.crt as server %s: %v", host, err)
		}
	}
	if err := verify(node, "", x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("node.crt as client: %v", err)
	}
	if err := verify(node, "10.0.0.1", x509.ExtKeyUsageServerAuth); err == nil {
		t.Errorf("node.crt verifies for a host it does not name")
	}
	if len(node.IPAddresses) != 1 || !node.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || strings.Join(node.DNSNames, ",") != "node-1,localhost" {
		t.Errorf("node.crt SANs: IP %v, DNS %v", node.IPAddresses, node.DNSNames)
	}
	if node.Subject.CommonName != "node" {
		t.Errorf("node.crt CN %q, want node", node.Subject.CommonName)
	}
}

// checkClientCert: a client's certificate is a client only, named for the
// allow-lists.
func checkClientCert(t *testing.T, ops *x509.Certificate, verify certVerifier) {
	t.Helper()
	if err := verify(ops, "", x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("ops.crt as client: %v", err)
	}
	if err := verify(ops, "", x509.ExtKeyUsageServerAuth); err == nil {
		t.Errorf("ops.crt (a client's) verifies as a server")
	}
	if ops.Subject.CommonName != "ops" || strings.Join(ops.DNSNames, ",") != "ops" {
		t.Errorf("ops.crt CN %q, DNS %v; want ops", ops.Subject.CommonName, ops.DNSNames)
	}
	list, _ := tlsfiles.ParseAllowList("ops")
	if !list.Allows(ops) {
		t.Errorf("--tls-client-allow ops does not allow ops.crt")
	}
}

// checkZooKeeperFiles: ZooKeeper's certificate serves, its PEM key store
// is the PKCS #8 key then the certificate, and the settings create-zk
// printed (out) are zookeeper-tls.cfg's.
func checkZooKeeperFiles(t *testing.T, dir, out string, verify certVerifier) {
	t.Helper()
	zk := readCert(t, filepath.Join(dir, "zookeeper.crt"))
	if err := verify(zk, "127.0.0.1", x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("zookeeper.crt as server: %v", err)
	}
	store, err := os.ReadFile(filepath.Join(dir, "zookeeper-keystore.pem"))
	if err != nil {
		t.Fatal(err)
	}
	blk, rest := pem.Decode(store)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		t.Fatalf("key store: first block %v, want PRIVATE KEY", blk)
	}
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatalf("key store: not PKCS #8: %v", err)
	}
	blk, _ = pem.Decode(rest)
	if blk == nil || blk.Type != "CERTIFICATE" || !bytes.Equal(blk.Bytes, zk.Raw) {
		t.Fatalf("key store: second block is not zookeeper.crt")
	}
	if k, ok := key.(*ecdsa.PrivateKey); !ok || !k.PublicKey.Equal(zk.PublicKey) {
		t.Errorf("key store: the key is not zookeeper.crt's")
	}
	for _, want := range []string{"secureClientPort=2999\n", "ssl.keyStore.type=PEM\n", "ssl.keyStore.location=" + filepath.Join(dir, "zookeeper-keystore.pem") + "\n",
		"ssl.trustStore.location=" + filepath.Join(dir, "ca.crt") + "\n", "ssl.clientAuth=need\n", "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("create-zk prints no %q:\n%s", want, out)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "zookeeper-tls.cfg"))
	if err != nil || !strings.Contains(out, string(cfg)) {
		t.Errorf("zookeeper-tls.cfg (%v) is not what create-zk printed:\n%s", err, cfg)
	}
}

// checkCertFiles: keys are 0600 and no temporary file is left.
func checkCertFiles(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{"ca.key", "node.key", "ops.key", "zookeeper.key", "zookeeper-keystore.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, st.Mode(), err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// Files that exist are never replaced without --overwrite, and then none of
// a command's files is written; bad command lines exit 2 and a missing CA
// names the command that makes one.
func TestCertCreateRefuses(t *testing.T) {
	dir := makeCerts(t)
	before, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	code, _, errOut := runCtl("cert", "create-ca", "--dir", dir)
	if code != 1 || !strings.Contains(errOut, "ca.crt: exists: nothing was written (--overwrite replaces the files)") {
		t.Errorf("create-ca over a CA: exit %d, %q", code, errOut)
	}
	// node.key is gone, node.crt is there: still nothing written.
	if err := os.Remove(filepath.Join(dir, "node.key")); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCtl("cert", "create-node", "--dir", dir, "--hosts", "127.0.0.1"); code != 1 || !strings.Contains(errOut, "node.crt: exists") {
		t.Errorf("create-node over node.crt: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "node.key")); err == nil {
		t.Errorf("a refused create-node wrote node.key")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(before, after) {
		t.Errorf("a refused create-ca changed ca.key")
	}
	mustCtl(t, "cert", "create-ca", "--dir", dir, "--overwrite")
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.key")); bytes.Equal(before, after) {
		t.Errorf("create-ca --overwrite left ca.key as it was")
	}

	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"create-node", "--dir", empty, "--hosts", "127.0.0.1"}, 1, "make one with: snowflakectl cert create-ca --dir " + empty},
		{[]string{"create-node", "--dir", dir}, 2, "--hosts is required"},
		{[]string{"create-node", "--dir", dir, "--hosts", "127.0.0.1:8080"}, 2, `"127.0.0.1:8080" has a port`},
		{[]string{"create-node", "--dir", dir, "--hosts", "a b"}, 2, "neither an IP address nor a DNS name"},
		{[]string{"create-client", "--dir", dir}, 2, "want one client NAME"},
		{[]string{"create-client", "--dir", dir, "../x"}, 2, "want a plain name"},
		{[]string{"create-ca"}, 2, "--dir is required"},
		{[]string{"create-key", "--dir", dir}, 2, `unknown subcommand "create-key"`},
	} {
		code, _, errOut := runCtl(append([]string{"cert"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("cert %s: exit %d, %q; want %d and %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.want)
		}
	}
}

// A node's certificate and a client's, made by the commands, talk mutual
// TLS with the node's own TLS configurations (tlsfiles, as a node builds
// them from --tls-cert, --tls-key and --tls-client-ca): snowflakectl with
// the client's certificate reaches the node, and the node's peer request
// (the clock check's client side, presenting node.crt) reaches a node too.
func TestCertCreateTalksMutualTLS(t *testing.T) {
	dir := makeCerts(t)
	pair, err := tlsfiles.NewPair(filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tlsfiles.LoadCA(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	// httptest's StartTLS would put its own certificate first: serve the
	// node's configuration as it is.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"state":"in_service","client":"`+r.TLS.PeerCertificates[0].Subject.CommonName+`"}`)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(tls.NewListener(ln, tlsfiles.ServerConfig(pair, pool)))
	t.Cleanup(func() { srv.Close() })
	url := "https://" + ln.Addr().String()

	out := mustCtl(t, "probe", url+"/readyz", "--tls-ca", filepath.Join(dir, "ca.crt"),
		"--tls-cert", filepath.Join(dir, "ops.crt"), "--tls-key", filepath.Join(dir, "ops.key"))
	if !strings.Contains(out, `"client":"ops"`) {
		t.Errorf("probe with ops.crt: %s", out)
	}
	peer := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsfiles.ClientConfig(pool, pair)}}
	resp, err := peer.Get(url + "/time")
	if err != nil {
		t.Fatalf("a peer's request with node.crt: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"client":"node"`) {
		t.Errorf("a peer's request with node.crt: %s", body)
	}
	if code, _, errOut := runCtl("probe", url+"/readyz", "--tls-ca", filepath.Join(dir, "ca.crt")); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Errorf("probe without a client certificate: exit %d, %q", code, errOut)
	}
}
