package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// chunkedProxy is a reverse proxy in front of node that streams each
// answer chunked, as L7 proxies and sidecars do: no Content-Length, the
// body copied a few bytes a chunk, flushed after each.
func chunkedProxy(t *testing.T, node string) *httptest.Server {
	t.Helper()
	fwd := &http.Transport{}
	t.Cleanup(fwd.CloseIdleConnections)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+node+r.URL.RequestURI(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := fwd.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		f := w.(http.Flusher)
		f.Flush() // the headers go out before the body: chunked
		buf := make([]byte, 3)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				f.Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Behind a reverse proxy that answers chunked, every kind of call gets its
// IDs, without a failover.
func TestThroughAChunkedReverseProxy(t *testing.T) {
	node := startFake(t, 1, nil)
	proxy := chunkedProxy(t, node.addr)
	// The proxy really answers chunked.
	resp, err := http.Get(proxy.URL + "/ids?count=3")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !slices.Equal(resp.TransferEncoding, []string{"chunked"}) || resp.ContentLength != -1 {
		t.Fatalf("the proxy answered Transfer-Encoding %q, Content-Length %d: want chunked", resp.TransferEncoding, resp.ContentLength)
	}
	if strings.Count(string(body), "\n") != 3 {
		t.Fatalf("the proxy answered %q, want 3 IDs", body)
	}

	c := newClient(t, Config{Servers: []string{strings.TrimPrefix(proxy.URL, "http://")}, Attempts: 1})
	ctx := context.Background()
	var last int64
	for i := range 3 {
		id, err := c.Next(ctx)
		if err != nil || id <= last {
			t.Fatalf("Next #%d through the proxy: %d, %v (last %d)", i, id, err, last)
		}
		last = id
	}
	if ids, err := c.NextN(ctx, 50); err != nil || len(ids) != 50 || ids[0] <= last {
		t.Fatalf("NextN(50) through the proxy: %v, %v", ids, err)
	}
	if id, err := c.NextSegment(ctx, "orders"); err != nil || id <= 0 {
		t.Fatalf("NextSegment through the proxy: %d, %v", id, err)
	}
	if ids, err := c.NextSegmentN(ctx, "orders", 20); err != nil || len(ids) != 20 {
		t.Fatalf("NextSegmentN(20) through the proxy: %v, %v", ids, err)
	}
	if st := c.Stats(); st.Failovers != 0 || st.Errors != 0 {
		t.Fatalf("stats %+v: want no failover and no error", st)
	}
}

// forwardProxy is a forward proxy (absolute-form requests, and CONNECT
// tunnels) that reaches any host name at 127.0.0.1 on the same port, and
// records what it was asked ("GET http://host:port/path?query", "CONNECT
// host:port").
type forwardProxy struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func startForwardProxy(t *testing.T) *forwardProxy {
	t.Helper()
	p := &forwardProxy{}
	fwd := &http.Transport{}
	t.Cleanup(fwd.CloseIdleConnections)
	loopback := func(hostport string) string {
		_, port, _ := net.SplitHostPort(hostport)
		return net.JoinHostPort("127.0.0.1", port)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			p.record("CONNECT " + r.Host)
			p.tunnel(w, loopback(r.Host))
			return
		}
		p.record(r.Method + " " + r.RequestURI)
		if a := r.Header.Get("Proxy-Authorization"); a != "" {
			p.record("Proxy-Authorization: " + a)
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+loopback(r.URL.Host)+r.URL.RequestURI(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := fwd.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *forwardProxy) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, s)
}

func (p *forwardProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// tunnel answers a CONNECT: 200, then the bytes both ways with target.
func (p *forwardProxy) tunnel(w http.ResponseWriter, target string) {
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	down, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, rw) // rw holds what the client sent after its CONNECT
		close(done)
	}()
	_, _ = io.Copy(down, up)
	_ = down.Close()
	<-done
}

// The environment variable that makes a test binary the child of
// TestProxyFromEnvironment.
const proxyChildEnv = "SNOWFLAKED_CLIENT_PROXY_TEST_NODES"

// The client takes its proxies from the environment as net/http does:
// HTTP_PROXY for an http:// node (requests in absolute form), HTTPS_PROXY
// for an https:// one (a CONNECT tunnel, the node verified as itself), and
// none for a host in NO_PROXY; Bootstrap takes the same.
//
// net/http reads the environment once per process and never proxies
// loopback addresses: so the calls run in a child process (this test
// binary, run again with the variables set), and name the nodes by host
// names that do not resolve (node.test, example.com, direct.test); the
// proxy reaches each at 127.0.0.1 on the same port. Only through the proxy
// can a call to node.test or example.com succeed, and a call to
// direct.test, listed in NO_PROXY, must fail (it is dialled directly)
// though the proxy would have served it.
func TestProxyFromEnvironment(t *testing.T) {
	if nodes := os.Getenv(proxyChildEnv); nodes != "" {
		proxyChild(t, strings.Fields(nodes))
		return
	}
	plain := startFake(t, 1, nil)
	f := &fakeNode{}
	f.next.Store(2 << 40)
	secure := httptest.NewUnstartedServer(http.HandlerFunc(f.handle))
	secure.Config.ErrorLog = log.New(io.Discard, "", 0)
	secure.StartTLS()
	t.Cleanup(secure.Close)
	proxy := startForwardProxy(t)
	_, plainPort, _ := net.SplitHostPort(plain.addr)
	list := `{"nodes":[{"worker_id":1,"addr":"node.test:` + plainPort + `"}]}`
	plain.list.Store(&list)
	_, securePort, _ := net.SplitHostPort(strings.TrimPrefix(secure.URL, "https://"))
	ca := t.TempDir() + "/ca.der"
	if err := os.WriteFile(ca, secure.Certificate().Raw, 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestProxyFromEnvironment$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(),
		"HTTP_PROXY="+proxy.url, "HTTPS_PROXY="+proxy.url, "NO_PROXY=direct.test",
		"http_proxy=", "https_proxy=", "no_proxy=", "REQUEST_METHOD=",
		proxyChildEnv+"=node.test:"+plainPort+" example.com:"+securePort+" direct.test:"+plainPort+" "+ca)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the calls under HTTP_PROXY, HTTPS_PROXY and NO_PROXY: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
	seen := proxy.requests()
	for _, want := range []string{"GET http://node.test:" + plainPort + "/ids?count=1", "CONNECT example.com:" + securePort,
		"GET http://node.test:" + plainPort + "/cluster/nodes"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the proxy saw %q, want %q among them", seen, want)
		}
	}
	for _, s := range seen {
		if strings.Contains(s, "direct.test") {
			t.Errorf("the proxy saw %q: NO_PROXY not honoured", s)
		}
	}
}

// proxyChild makes the calls of TestProxyFromEnvironment in the child:
// nodes holds the plain node, the HTTPS node, the NO_PROXY node and the
// HTTPS node's certificate file.
func proxyChild(t *testing.T, nodes []string) {
	t.Helper()
	if len(nodes) != 4 {
		t.Fatalf("%s=%q: want 4 fields", proxyChildEnv, nodes)
	}
	der, err := os.ReadFile(nodes[3])
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		node string
		tls  *tls.Config
	}{{nodes[0], nil}, {nodes[1], &tls.Config{RootCAs: roots}}} {
		c := newClient(t, Config{Servers: []string{tc.node}, TLS: tc.tls, Attempts: 1, Timeout: 5 * time.Second})
		for i := range 2 { // the second on the kept connection
			if id, err := c.Next(ctx); err != nil || id <= 0 {
				t.Fatalf("Next #%d from %s through the proxy: %d, %v", i, tc.node, id, err)
			}
		}
	}
	d, err := NewBootstrap(ctx, BootstrapConfig{Seeds: []string{nodes[0]}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("bootstrap from %s through the proxy: %v", nodes[0], err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if id, err := newClient(t, Config{Discovery: d, Attempts: 1}).Next(ctx); err != nil || id <= 0 {
		t.Fatalf("Next from the bootstrap's nodes through the proxy: %d, %v", id, err)
	}
	c := newClient(t, Config{Servers: []string{nodes[2]}, Attempts: 1, Timeout: 2 * time.Second})
	id, err := c.Next(ctx)
	if err == nil {
		t.Fatalf("Next from %s, in NO_PROXY: %d through the proxy, want a failed direct dial", nodes[2], id)
	}
	t.Logf("%s, in NO_PROXY, dialled directly: %v", nodes[2], err)
}

// withProxy makes c's new connections go through proxy, whatever the
// environment says.
func withProxy(c *Client, proxy string) {
	p := c.pool.(*pool)
	d := dialer{ctx: p.ctx, tls: c.cfg.TLS, proxy: func(*http.Request) (*url.URL, error) { return url.Parse(proxy) }}
	p.dial = d.dial
}

// What the proxy's URL says is taken or refused in words: its credentials
// go as Proxy-Authorization, a SOCKS proxy is refused naming its scheme, a
// tunnel the proxy refuses names the proxy's status.
func TestProxyURL(t *testing.T) {
	node := startFake(t, 1, nil)
	_, port, _ := net.SplitHostPort(node.addr)
	ctx := context.Background()
	t.Run("credentials", func(t *testing.T) {
		proxy := startForwardProxy(t)
		c := newClient(t, Config{Servers: []string{"node.test:" + port}, Attempts: 1})
		withProxy(c, strings.Replace(proxy.url, "http://", "http://ann:s%20cret@", 1))
		if _, err := c.Next(ctx); err != nil {
			t.Fatalf("Next through the proxy: %v", err)
		}
		want := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("ann:s cret"))
		if seen := proxy.requests(); !slices.Contains(seen, want) {
			t.Fatalf("the proxy saw %q, want %q among them", seen, want)
		}
	})
	t.Run("socks", func(t *testing.T) {
		c := newClient(t, Config{Servers: []string{"node.test:" + port}, Attempts: 1})
		withProxy(c, "socks5://127.0.0.1:1080")
		if _, err := c.Next(ctx); err == nil || !strings.Contains(err.Error(), `scheme "socks5" not supported`) {
			t.Fatalf("Next through a SOCKS proxy: %v, want the scheme refused", err)
		}
	})
	t.Run("tunnel refused", func(t *testing.T) {
		refuse := startRaw(t, func(w io.Writer) error {
			_, err := io.WriteString(w, "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
			return err
		})
		c := newClient(t, Config{Servers: []string{"node.test:" + port}, Attempts: 1, TLS: &tls.Config{MinVersion: tls.VersionTLS12}})
		withProxy(c, "http://"+refuse.addr)
		if _, err := c.Next(ctx); err == nil || !strings.Contains(err.Error(), "CONNECT node.test:"+port+": the proxy answered status 407") {
			t.Fatalf("Next through a proxy that refuses the tunnel: %v", err)
		}
	})
}
