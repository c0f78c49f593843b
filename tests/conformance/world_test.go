package conformance

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/tests/testpki"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// The suite's cluster: its name, gene bits and the nodes' --max-batch (below
// the clients' default of 1000, so that every client must clamp).
const (
	clusterName = "conformance"
	geneBits    = 2
	nodeMax     = 100
)

// world is what every client is run against: one ZooKeeper, a cluster of
// three nodes each behind a recording proxy, two segment tags (one with a
// token) and a standalone node under mutual TLS with API tokens.
type world struct {
	zk      *zkharness.Cluster
	nodes   []*node           // a, b, c
	proxies []*recordingProxy // one in front of each node
	log     []recorded        // what the proxies recorded, for recordedAll
	layout  client.Layout
	// secretToken is the token of the tag "secret" (--require-token).
	secretToken string
	// tlsNode serves HTTPS, requires a client certificate and an API token.
	tlsNode  *node
	pki      testpki.PKI
	apiToken string
}

// nodeArgs are the flags of a node of the suite's cluster with node key key.
func (w *world) nodeArgs(key string) []string {
	return []string{"--zk", w.zk.ConnectString(), "--cluster", clusterName, "--node-key", key,
		"--max-batch", "100", "--gene-bits", "2", "--peer-interval", "1s", "--report-interval", "500ms", "--fence-ahead", "1s",
		"--zk-session-timeout", "4s"}
}

// startClusterNode starts one more node of the cluster.
func (w *world) startClusterNode(t *testing.T, key string) *node {
	t.Helper()
	return startNode(t, nil, w.nodeArgs(key)...)
}

func startWorld(t *testing.T) *world {
	t.Helper()
	w := &world{zk: startZK(t)}
	ctl(t, "cluster", "create", clusterName, "--zk", w.zk.ConnectString(), "--gene-bits", "2")
	for _, key := range []string{"a", "b", "c"} {
		n := w.startClusterNode(t, key)
		w.nodes = append(w.nodes, n)
		w.proxies = append(w.proxies, startProxy(t, n.addr))
	}
	zkArgs := []string{"--zk", w.zk.ConnectString(), "--cluster", clusterName}
	ctl(t, append([]string{"segment", "create", "plain"}, zkArgs...)...)
	out := strings.TrimSpace(ctl(t, append([]string{"segment", "create", "secret", "--require-token"}, zkArgs...)...))
	w.secretToken = out[strings.LastIndexByte(out, '\n')+1:]
	if len(w.secretToken) != 43 {
		t.Fatalf("segment create --require-token printed %q last, want a token", w.secretToken)
	}
	w.layout = readLayout(t, w.nodes[0].addr)

	w.pki = testpki.New(t)
	w.apiToken = "conformance-api-token-0123456789abcdefghijk"
	tokens := filepath.Join(t.TempDir(), "api-tokens")
	if err := os.WriteFile(tokens, []byte(w.apiToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.tlsNode = startNode(t, w.httpsClient(t), "--worker-id", "900", "--tls-cert", w.pki.ServerCert, "--tls-key", w.pki.ServerKey,
		"--tls-client-ca", w.pki.CA, "--api-tokens-file", tokens)
	return w
}

// httpsClient is the suite's own HTTPS client for the TLS node, with the
// client certificate.
func (w *world) httpsClient(t *testing.T) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(w.pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	pair, err := tls.LoadX509KeyPair(w.pki.ClientCert, w.pki.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}}
}

// readLayout reads the cluster's layout from a node's /clock.
func readLayout(t *testing.T, addr string) client.Layout {
	t.Helper()
	code, body := get(plainHTTP, "http://"+addr+"/clock", "")
	if code != http.StatusOK {
		t.Fatalf("/clock: %d %s", code, body)
	}
	var c struct {
		Layout   string `json:"layout"`
		Epoch    string `json:"epoch"`
		TimeUnit string `json:"time_unit"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatalf("/clock: %v: %s", err, body)
	}
	// "41/10/12", or "41/10/12 gene 2" with gene bits.
	l := client.Layout{}
	bitsText, gene, hasGene := strings.Cut(c.Layout, " gene ")
	if hasGene {
		g, err := strconv.ParseUint(gene, 10, 8)
		if err != nil {
			t.Fatalf("/clock layout %q: %v", c.Layout, err)
		}
		l.GeneBits = uint(g)
	}
	var err error
	if l.Epoch, err = time.Parse(time.RFC3339Nano, c.Epoch); err != nil {
		t.Fatalf("/clock epoch %q: %v", c.Epoch, err)
	}
	if l.Unit, err = time.ParseDuration(c.TimeUnit); err != nil {
		t.Fatalf("/clock time_unit %q: %v", c.TimeUnit, err)
	}
	var bits [3]uint
	fields := strings.Split(bitsText, "/")
	for i := range bits {
		if len(fields) != 3 {
			break
		}
		v, err := strconv.ParseUint(fields[i], 10, 8)
		if err != nil {
			t.Fatalf("/clock layout %q: %v", c.Layout, err)
		}
		bits[i] = uint(v)
	}
	l.TimeBits, l.WorkerBits, l.SequenceBits = bits[0], bits[1], bits[2]
	if l.GeneBits != geneBits {
		t.Fatalf("/clock layout %q: want %d gene bits", c.Layout, geneBits)
	}
	if _, err := l.Decode(1); err != nil {
		t.Fatalf("/clock layout %+v: %v", c, err)
	}
	return l
}

// layoutJSON is the layout as the protocol's decode op takes it.
func (w *world) layoutJSON() map[string]any {
	return map[string]any{"time_bits": w.layout.TimeBits, "worker_bits": w.layout.WorkerBits,
		"sequence_bits": w.layout.SequenceBits, "gene_bits": w.layout.GeneBits,
		"epoch_ms": w.layout.Epoch.UnixMilli(), "unit_ms": w.layout.Unit.Milliseconds()}
}

// proxied is the cluster's nodes as the clients see them: the proxies.
func (w *world) proxied() []string {
	out := make([]string, len(w.proxies))
	for i, p := range w.proxies {
		out[i] = p.addr
	}
	return out
}

// recordedNew takes what every proxy recorded since the last call, and
// keeps it for recordedAll too.
func (w *world) recordedNew() []recorded {
	var out []recorded
	for _, p := range w.proxies {
		out = append(out, p.take()...)
	}
	w.log = append(w.log, out...)
	return out
}

// recordedAll returns every request recorded since the last call and
// forgets them.
func (w *world) recordedAll() []recorded {
	w.recordedNew()
	out := w.log
	w.log = nil
	return out
}
