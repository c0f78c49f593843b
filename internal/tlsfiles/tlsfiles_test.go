package tlsfiles

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles/tlstest"
)

func TestLoadPairNamesTheFileAndProblem(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	a, b := ca.Issue(t, "node-a"), ca.Issue(t, "node-b")
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a PEM file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name, cert, key string
		want            []string
	}{
		{"missing certificate", missing, a.KeyFile, []string{"certificate " + missing, "no such file"}},
		{"missing key", a.CertFile, missing, []string{"key " + missing, "no such file"}},
		{"certificate not PEM", garbage, a.KeyFile, []string{"certificate " + garbage}},
		{"key not PEM", a.CertFile, garbage, []string{"key " + garbage}},
		{"key of another certificate", a.CertFile, b.KeyFile, []string{"key " + b.KeyFile, "does not go with certificate " + a.CertFile}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadPair(tc.cert, tc.key)
			if !errors.Is(err, ErrFile) {
				t.Fatalf("LoadPair: %v, want ErrFile", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LoadPair: %v: does not say %q", err, w)
				}
			}
		})
	}
	if _, err := LoadPair(a.CertFile, a.KeyFile); err != nil {
		t.Fatalf("good pair: %v", err)
	}
	if _, err := LoadCA(garbage); !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), garbage) {
		t.Errorf("LoadCA(garbage): %v", err)
	}
	if _, err := LoadCA(ca.File); err != nil {
		t.Errorf("LoadCA: %v", err)
	}
}

// A Pair serves new files after they change, once its second has passed,
// and keeps the old pair when the new files do not load.
func TestPairReloadsChangedFilesAndKeepsTheOldOnBadOnes(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	first := ca.Issue(t, "first")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	tlstest.Install(t, first, certFile, keyFile)
	var logs bytes.Buffer
	p, err := NewPair(certFile, keyFile, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p.now = func() time.Time { return now }
	cn := func() string {
		t.Helper()
		leaf, err := x509.ParseCertificate(p.Certificate().Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	steps := []struct {
		name    string
		install func()
		advance time.Duration
		want    string
		log     string
	}{
		{"unchanged", func() {}, 2 * time.Second, "first", ""},
		{"changed, within the second", func() { tlstest.Install(t, ca.Issue(t, "second-cert"), certFile, keyFile) }, 0, "first", ""},
		{"changed, a second later", func() {}, 1100 * time.Millisecond, "second-cert", "TLS certificate reloaded"},
		{"a key of another certificate", func() {
			tlstest.Install(t, ca.Issue(t, "third-certificate"), certFile, keyFile)
			other := ca.Issue(t, "other")
			if err := os.WriteFile(keyFile, other.KeyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
		}, 1100 * time.Millisecond, "second-cert", "do not load"},
		{"fixed", func() { tlstest.Install(t, ca.Issue(t, "fourth"), certFile, keyFile) }, 1100 * time.Millisecond, "fourth", "TLS certificate reloaded"},
	}
	for _, s := range steps {
		logs.Reset()
		s.install()
		now = now.Add(s.advance)
		if got := cn(); got != s.want {
			t.Errorf("%s: serves %q, want %q", s.name, got, s.want)
		}
		if !strings.Contains(logs.String(), s.log) || (s.log == "" && logs.Len() > 0) {
			t.Errorf("%s: logged %q, want %q", s.name, logs.String(), s.log)
		}
	}
	if got := p.Reloads(); got != 2 {
		t.Errorf("Reloads() = %d, want 2", got)
	}
}

func TestAllowList(t *testing.T) {
	cert := &x509.Certificate{DNSNames: []string{"app.example", "localhost"}}
	cert.Subject.CommonName = "app-1"
	tests := []struct {
		list string
		cert *x509.Certificate
		want bool
	}{
		{"", cert, true},
		{"", nil, true},
		{"app-1", cert, true},
		{"other, app.example", cert, true},
		{"other", cert, false},
		{"app", cert, false},
		{"app-1", nil, false},
	}
	for _, tc := range tests {
		l, err := ParseAllowList(tc.list)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Allows(tc.cert); got != tc.want {
			t.Errorf("%q allows %v: %v, want %v", tc.list, tc.cert != nil, got, tc.want)
		}
	}
	if _, err := ParseAllowList("a,,b"); err == nil {
		t.Error(`ParseAllowList("a,,b"): no error`)
	}
}

// Each failed handshake is counted under its reason; a good client is
// served and counts nothing.
func TestListenerCountsFailedHandshakesByReason(t *testing.T) {
	ca, other := tlstest.NewCA(t, "ca"), tlstest.NewCA(t, "other-ca")
	server := ca.Issue(t, "server")
	pair, err := NewPair(server.CertFile, server.KeyFile, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var fails Failures
	ln := NewListener(raw, ServerConfig(pair, ca.Pool()), &fails)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for range 100 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = io.WriteString(c, "echo "+line)
				}
			}()
		}
	}()
	addr := raw.Addr().String()
	client := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: ca.Pool(), Certificates: certs, ServerName: "127.0.0.1"}
	}
	tests := []struct {
		name   string
		talk   func(net.Conn) error
		reason string // "" : served
	}{
		{"plain HTTP", func(c net.Conn) error {
			_, _ = io.WriteString(c, "GET /id HTTP/1.1\r\nHost: x\r\n\r\n")
			b, _ := io.ReadAll(c)
			if bytes.Contains(b, []byte("200")) {
				return errors.New("answered: " + string(b))
			}
			return nil
		}, ReasonNotTLS},
		{"no client certificate", tlsTalk(client()), ReasonNoClientCert},
		{"another CA's certificate", tlsTalk(forced(client(), other.Issue(t, "stranger").TLS(t))), ReasonBadClientCert},
		{"good client", tlsTalk(client(ca.Issue(t, "app").TLS(t))), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fails.Counts()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			err = tc.talk(c)
			if tc.reason == "" && err != nil {
				t.Fatalf("good client: %v", err)
			}
			if tc.reason != "" && err == nil && tc.reason != ReasonNotTLS {
				t.Fatalf("served; want the handshake to fail (%s)", tc.reason)
			}
			want := -1
			for i, r := range Reasons {
				if r == tc.reason {
					want = i
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				after := fails.Counts()
				ok := true
				for i := range after {
					d := after[i] - before[i]
					if (i == want && d != 1) || (i != want && d != 0) {
						ok = false
					}
				}
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("failures %v -> %v, want one more %q only", before, after, tc.reason)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// forced presents cert whatever CAs the server names (a Go client would
// otherwise send none).
func forced(cfg *tls.Config, cert tls.Certificate) *tls.Config {
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return cfg
}

// tlsTalk runs a TLS client with cfg over the connection and checks the
// server echoes a line.
func tlsTalk(cfg *tls.Config) func(net.Conn) error {
	return func(c net.Conn) error {
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			return err
		}
		if _, err := io.WriteString(tc, "hello\n"); err != nil {
			return err
		}
		line, err := bufio.NewReader(tc).ReadString('\n')
		if err != nil {
			return err
		}
		if line != "echo hello\n" {
			return errors.New("got " + line)
		}
		return nil
	}
}
