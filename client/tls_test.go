package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Config.TLS makes the client's connections HTTPS, verified with its
// roots and kept alive across calls; without it, or with roots that do not
// know the node, no ID comes back.
func TestConfigTLS(t *testing.T) {
	f := &fakeNode{}
	f.next.Store(1 << 40)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.handle))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tests := []struct {
		name    string
		tls     *tls.Config
		wantErr string // "": IDs come back
	}{
		{"roots that know the node", &tls.Config{RootCAs: roots}, ""},
		{"plain HTTP to an HTTPS node", nil, "malformed"},
		{"roots that do not know it", &tls.Config{RootCAs: x509.NewCertPool()}, "certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conns.Store(0)
			c := newClient(t, Config{Servers: []string{addr}, TLS: tc.tls, Attempts: 1, Timeout: 2 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var last int64
			for i := range 3 {
				id, err := c.Next(ctx)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("Next: %d, %v; want an error saying %q", id, err, tc.wantErr)
					}
					return
				}
				if err != nil || id <= last {
					t.Fatalf("Next #%d: %d, %v (last %d)", i, id, err, last)
				}
				last = id
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("%d TLS connections for 3 calls, want 1 (kept alive)", n)
			}
		})
	}
}

// Bootstrap asks nodes that serve HTTPS with BootstrapConfig.TLS, and a
// client fed by it reaches them with Config.TLS; without TLS the bootstrap
// finds no node.
func TestBootstrapTLS(t *testing.T) {
	f := &fakeNode{}
	f.next.Store(1 << 40)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.handle))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	list := fmt.Sprintf(`{"nodes":[{"worker_id":1,"addr":%q}]}`, addr)
	f.list.Store(&list)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cfg := &tls.Config{RootCAs: roots}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := NewBootstrap(ctx, BootstrapConfig{Seeds: []string{addr}, Timeout: time.Second}); err == nil {
		t.Fatal("a plain-HTTP bootstrap found an HTTPS node")
	}
	d, err := NewBootstrap(ctx, BootstrapConfig{Seeds: []string{addr}, TLS: cfg})
	if err != nil {
		t.Fatalf("bootstrap over HTTPS: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	c := newClient(t, Config{Discovery: d, TLS: cfg})
	if id, err := c.Next(ctx); err != nil || id <= 1<<40 {
		t.Fatalf("Next through an HTTPS bootstrap: %d, %v", id, err)
	}
}
