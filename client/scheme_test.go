package client

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serveEach accepts connections on a loopback listener and hands each to
// handle on a goroutine of its own, until the test ends.
func serveEach(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// A client that speaks the other protocol than the node says so: a plain
// client meeting an HTTPS node (which, as Go's TLS server does, closes a
// plain request without a word) reads "the node serves HTTPS: use
// https://", not EOF; an HTTPS client meeting a plain node (which answers
// the ClientHello in HTTP, as fasthttp does) reads "the node serves plain
// HTTP: use http://", not a TLS record header error.
func TestWrongSchemeSaysWhich(t *testing.T) {
	hs := httptest.NewUnstartedServer(http.NotFoundHandler())
	hs.StartTLS()
	cert := hs.TLS.Certificates[0]
	hs.Close()
	tlsNode := serveEach(t, func(c net.Conn) {
		_ = tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}}).Handshake() // fails on plain HTTP: closed
	})
	plainNode := serveEach(t, func(c net.Conn) {
		buf := make([]byte, 512)
		_, _ = c.Read(buf)
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
	})
	for _, tc := range []struct {
		name string
		addr string
		tls  *tls.Config
		want string
	}{
		{"plain client, HTTPS node", tlsNode, nil, "the node serves HTTPS: use https://"},
		{"HTTPS client, plain node", plainNode, &tls.Config{MinVersion: tls.VersionTLS12}, "the node serves plain HTTP: use http://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, Config{Servers: []string{tc.addr}, TLS: tc.tls, Attempts: 1, Timeout: 2 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := c.Next(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Next: %v; want an error saying %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}
