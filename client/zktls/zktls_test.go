package zktls

import (
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/internal/pemtest"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	cert, key := pemtest.SelfSigned(t, dir, "a")
	_, otherKey := pemtest.SelfSigned(t, dir, "b")
	missing := filepath.Join(dir, "absent.pem")
	tests := []struct {
		name      string
		f         Files
		wantErr   error // nil: loads
		wantText  string
		wantNil   bool // no TLS at all
		wantCerts int
	}{
		{name: "no files: plain TCP", wantNil: true},
		{name: "CA only", f: Files{CA: cert}},
		{name: "mutual", f: Files{CA: cert, Cert: cert, Key: key}, wantCerts: 1},
		{name: "no CA", f: Files{Cert: cert, Key: key}, wantErr: ErrCA, wantText: "CA file is required"},
		{name: "cert without key", f: Files{CA: cert, Cert: cert}, wantErr: ErrCert, wantText: "has no key"},
		{name: "key without cert", f: Files{CA: cert, Key: key}, wantErr: ErrKey, wantText: "has no certificate"},
		{name: "CA missing", f: Files{CA: missing}, wantErr: ErrCA, wantText: "absent.pem"},
		{name: "CA not PEM", f: Files{CA: key}, wantErr: ErrCA, wantText: "no PEM certificate"},
		{name: "cert missing", f: Files{CA: cert, Cert: missing, Key: key}, wantErr: ErrCert, wantText: "absent.pem"},
		{name: "key missing", f: Files{CA: cert, Cert: cert, Key: missing}, wantErr: ErrKey, wantText: "absent.pem"},
		{name: "key of another cert", f: Files{CA: cert, Cert: cert, Key: otherKey}, wantErr: ErrKey, wantText: "does not go with certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(tc.f)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
					t.Fatalf("Load = %v, want %v containing %q", err, tc.wantErr, tc.wantText)
				}
				return
			}
			switch {
			case err != nil:
				t.Fatalf("Load: %v", err)
			case tc.wantNil != (cfg == nil):
				t.Fatalf("Load = %v, want nil %v", cfg, tc.wantNil)
			case cfg != nil && (cfg.RootCAs == nil || len(cfg.Certificates) != tc.wantCerts || cfg.MinVersion < tls.VersionTLS12):
				t.Fatalf("Load = %+v", cfg)
			}
		})
	}
}

// Dialer verifies the server against the CA and the host dialed, and says
// that a failed handshake was TLS's; a refused TCP connection is left as
// it is.
func TestDialer(t *testing.T) {
	dir := t.TempDir()
	cert, key := pemtest.SelfSigned(t, dir, "srv")
	other, _ := pemtest.SelfSigned(t, dir, "other")
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
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
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	_ = closed.Close()
	tests := []struct {
		name, ca, addr string
		want           string // "" = handshake succeeds
	}{
		{"trusted", cert, ln.Addr().String(), ""},
		{"untrusted", other, ln.Addr().String(), "TLS handshake with ZooKeeper " + ln.Addr().String()},
		{"nobody listens", cert, closedAddr, "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(Files{CA: tc.ca})
			if err != nil {
				t.Fatal(err)
			}
			c, err := Dialer(cfg)("tcp", tc.addr, 5*time.Second)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				_ = c.Close()
				return
			}
			if err == nil {
				_ = c.Close()
				t.Fatal("dial: no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("dial: %v, want %q", err, tc.want)
			}
			if tc.name == "nobody listens" && strings.Contains(err.Error(), "TLS") {
				t.Fatalf("dial: %v: a refused TCP connection is not TLS's doing", err)
			}
		})
	}
}
