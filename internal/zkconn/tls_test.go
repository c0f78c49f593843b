package zkconn_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/client/zktls"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/tests/testpki"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// load is zktls.Load that fails the test on error.
func load(t *testing.T, f zktls.Files) *tls.Config {
	t.Helper()
	cfg, err := zktls.Load(f)
	if err != nil {
		t.Fatalf("zktls.Load(%+v): %v", f, err)
	}
	return cfg
}

// The dial function against a Go TLS listener: the server verified
// against the CA and the host dialed, the client certificate presented,
// and a failed handshake's error saying it was TLS. No ZooKeeper needed.
func TestTLSDialerHandshake(t *testing.T) {
	pki := testpki.New(t)
	srvPair, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &tls.Config{Certificates: []tls.Certificate{srvPair}, ClientCAs: load(t, zktls.Files{CA: pki.CA}).RootCAs, ClientAuth: tls.RequireAndVerifyClientCert}
	at := serveTLS(t, "127.0.0.1:0", srv)
	_, port, _ := net.SplitHostPort(at)
	// The same certificate (IP SAN 127.0.0.1) served at another loopback
	// address: the client must refuse it there.
	other := serveTLS(t, "127.0.0.2:0", srv)
	mutual := zktls.Files{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}
	tests := []struct {
		name  string
		files zktls.Files
		addr  string
		want  string // substring of the error; "" = the handshake succeeds
	}{
		{"mutual TLS by IP", mutual, "127.0.0.1:" + port, ""},
		{"mutual TLS by name", mutual, "localhost:" + port, ""},
		{"wrong CA", zktls.Files{CA: pki.OtherCA, Cert: pki.ClientCert, Key: pki.ClientKey}, "127.0.0.1:" + port, "certificate signed by unknown authority"},
		{"host not in the certificate", mutual, other, "127.0.0.2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := zktls.Dialer(load(t, tc.files))("tcp", tc.addr, 5*time.Second)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("dial %s: %v", tc.addr, err)
				}
				st := c.(*tls.Conn).ConnectionState()
				if !st.HandshakeComplete || len(st.PeerCertificates) == 0 {
					t.Fatalf("handshake state %+v", st)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("dial %s: no error, want one containing %q", tc.addr, tc.want)
			}
			for _, s := range []string{"TLS handshake with ZooKeeper " + tc.addr, tc.want} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// serveTLS accepts TLS connections at addr with cfg, completes each
// handshake and holds the connection until the client closes it (or 5 s);
// it returns the address listened on.
func serveTLS(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", addr, cfg)
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
				_ = c.(*tls.Conn).Handshake()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Read(make([]byte, 1))
			}()
		}
	}()
	return ln.Addr().String()
}

// dialErr opens a session through zkclient with dial and returns its error
// (closing a session that did come).
func dialErr(t *testing.T, addr string, dial zkconn.Dialer) error {
	t.Helper()
	z, err := zkclient.Dial(context.Background(), zkclient.Config{Servers: []string{addr}, Cluster: "default", Timeout: 3 * time.Second, Dial: dial})
	if err == nil {
		z.Conn.Close()
	}
	return err
}

// TLSDial against Debian's ZooKeeper with a secureClientPort: mutual TLS
// gets a session that reads and writes; a client without a certificate,
// one trusting another CA and a plain client are refused, each with an
// error that says why.
func TestIntegration_TLSDialZooKeeper(t *testing.T) {
	pki := testpki.New(t)
	need := zkharness.StartStandaloneTLS(t, zkharness.TLS{PKI: pki, ClientAuth: "need"})
	secure := need.SecureConnectString()
	mutual := load(t, zktls.Files{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey})

	t.Run("mutual TLS", func(t *testing.T) {
		z, err := zkclient.Dial(context.Background(), zkclient.Config{Servers: []string{secure}, Cluster: "default", Timeout: 10 * time.Second, Dial: zkconn.TLSDial(mutual)})
		if err != nil {
			t.Fatalf("Dial over mutual TLS: %v", err)
		}
		t.Cleanup(z.Conn.Close)
		if _, err := z.Conn.Create("/tls", []byte("over TLS"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("Create: %v", err)
		}
		if b, _, err := z.Conn.Get("/tls"); err != nil || string(b) != "over TLS" {
			t.Fatalf("Get = %q, %v", b, err)
		}
	})
	refused := []struct {
		name string
		dial zkconn.Dialer
		want []string
	}{
		{"no client certificate", zkconn.TLSDial(load(t, zktls.Files{CA: pki.CA})), []string{"TLS handshake with ZooKeeper " + secure, "bad certificate"}},
		{"wrong CA", zkconn.TLSDial(load(t, zktls.Files{CA: pki.OtherCA, Cert: pki.ClientCert, Key: pki.ClientKey})), []string{"TLS handshake with ZooKeeper " + secure, "certificate signed by unknown authority"}},
		{"plain TCP to the TLS port", zkconn.Dial, []string{"no session with " + secure}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := dialErr(t, secure, tc.dial)
			if err == nil {
				t.Fatal("got a session, want none")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}

	t.Run("server-verified TLS", func(t *testing.T) {
		none := zkharness.StartStandaloneTLS(t, zkharness.TLS{PKI: pki, ClientAuth: "none"})
		if err := dialErr(t, none.SecureConnectString(), zkconn.TLSDial(load(t, zktls.Files{CA: pki.CA}))); err != nil {
			t.Fatalf("CA only against ssl.clientAuth=none: %v", err)
		}
	})
}
