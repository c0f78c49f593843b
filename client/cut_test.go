package client

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCutAnswersAreRefused: an answer cut inside its last ID is refused,
// never taken as a shorter ID. A tag's IDs are not checked for order, so
// "100\n101\n10" cut from "100\n101\n102\n" would hand the caller 10, an ID
// the tag issued long ago to someone else. Every node ends each ID with a
// newline; the client refuses a last line without one, whether the answer
// came with a Content-Length (a proxy that rewrote it), chunked, or through
// a reverse proxy that ended its chunked stream when the node hung up.
func TestCutAnswersAreRefused(t *testing.T) {
	cases := []struct {
		name  string
		raw   string
		proxy bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n100\n101\n10", false},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n100\n101\n\r\n2\r\n10\r\n0\r\n\r\n", false},
		{"node hangs up behind a chunking proxy", "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n100\n101\n10", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := startRaw(t, func(w io.Writer) error {
				if _, err := io.WriteString(w, tc.raw); err != nil {
					return err
				}
				if tc.proxy {
					return io.EOF // hang up, two bytes short of the Content-Length
				}
				return nil
			})
			addr := node.addr
			if tc.proxy {
				addr = strings.TrimPrefix(chunkedProxy(t, node.addr).URL, "http://")
			}
			c := newClient(t, Config{Servers: []string{addr}, Attempts: 1, Timeout: 5 * time.Second})
			ids, err := c.NextSegmentN(context.Background(), "orders", 3)
			if err == nil {
				t.Fatalf("an answer cut inside its last ID was taken whole: %v (the node issued 100, 101, 102)", ids)
			}
			if !strings.Contains(err.Error(), "does not end") && !tc.proxy {
				t.Fatalf("error %q does not say the last line does not end", err)
			}
		})
	}
}

// TestCloseEndsAHangingConnect: Close fails a call in flight at once, also
// one waiting for a proxy's answer to CONNECT (a tunnel to an HTTPS node).
func TestCloseEndsAHangingConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 1)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	const timeout = time.Minute
	c, err := New(context.Background(), Config{Servers: []string{"node.test:443"}, Attempts: 1, Timeout: timeout,
		TLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	withProxy(c, "http://"+ln.Addr().String())
	done := make(chan error, 1)
	go func() { _, err := c.Next(context.Background()); done <- err }()
	select {
	case <-accepted: // the call waits for the CONNECT answer
	case <-time.After(timeout):
		t.Fatal("the client never reached the proxy")
	}
	closed := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the call got an ID through a proxy that never answered")
		}
		if d := time.Since(closed); d >= timeout/2 {
			t.Fatalf("the call ended %v after Close, at its deadline (%v), not at Close", d, timeout)
		}
	case <-time.After(timeout):
		t.Fatalf("the call did not end within its %v deadline after Close", timeout)
	}
}
