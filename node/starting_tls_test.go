package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles/tlstest"
)

// While the claim waits (for a ZooKeeper that never answers), the start
// phase's server applies the node's allow-lists as its server does: a
// client not on the list of a path gets 403 client_not_allowed there (and
// nothing of what the node waits for), an allowed client 503 starting
// without the detail, and only a client that may read the admin paths
// (--tls-admin-allow, else --tls-client-allow, else every client) gets the
// detail, which names ZooKeeper's addresses and the lease holder.
func TestStartPhaseAppliesTheTLSAllowLists(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	nodeCert := ca.Issue(t, "node-s")
	leaves := map[string]tlstest.Leaf{}
	for _, name := range []string{"app", "ops", "stranger"} {
		leaves[name] = ca.Issue(t, name)
	}
	type request struct {
		client, path string
		want         int
		code         string // of an error body; "" for /healthz and /readyz
		detail       bool   // the body names what the node waits for
	}
	configs := []struct {
		name                    string
		clientAllow, adminAllow string
		requests                []request
	}{
		{"client and admin lists", "app,ops", "ops", []request{
			{"stranger", "/healthz", 403, "client_not_allowed", false},
			{"stranger", "/readyz", 403, "client_not_allowed", false},
			{"stranger", "/id", 403, "client_not_allowed", false},
			{"stranger", "/status", 403, "client_not_allowed", false},
			{"stranger", "/no-such-path", 403, "client_not_allowed", false},
			{"app", "/healthz", 200, "", false},
			{"app", "/readyz", 503, "", false},
			{"app", "/id", 503, "out_of_service", false},
			{"app", "/status", 403, "client_not_allowed", false},
			{"app", "/metrics", 403, "client_not_allowed", false},
			{"app", "/clock", 403, "client_not_allowed", false},
			{"ops", "/healthz", 200, "", false},
			{"ops", "/readyz", 503, "", true},
			{"ops", "/id", 503, "out_of_service", true},
			{"ops", "/status", 503, "out_of_service", true},
		}},
		{"admin list alone", "", "ops", []request{
			{"stranger", "/readyz", 503, "", false},
			{"stranger", "/id", 503, "out_of_service", false},
			{"stranger", "/metrics", 403, "client_not_allowed", false},
			{"ops", "/readyz", 503, "", true},
		}},
		{"client list alone: the admins are its clients", "app", "", []request{
			{"stranger", "/readyz", 403, "client_not_allowed", false},
			{"stranger", "/status", 403, "client_not_allowed", false},
			{"app", "/readyz", 503, "", true},
			{"app", "/status", 503, "out_of_service", true},
		}},
		{"no lists: every client is an admin", "", "", []request{
			{"stranger", "/healthz", 200, "", false},
			{"stranger", "/readyz", 503, "", true},
			{"stranger", "/status", 503, "out_of_service", true},
		}},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			dead := loopbackListener(t) // accepts and never speaks ZooKeeper
			waits := "connecting to ZooKeeper " + dead.Addr().String()
			cfg := defaultConfig()
			cfg.ZK, cfg.Cluster, cfg.NodeKey = dead.Addr().String(), "starting", "node-s"
			cfg.Listen = "127.0.0.1:0"
			cfg.CacheFile = filepath.Join(t.TempDir(), "cache.json")
			cfg.ZKSessionTimeout = time.Minute
			cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = nodeCert.CertFile, nodeCert.KeyFile, ca.File
			cfg.TLSClientAllow, cfg.TLSAdminAllow = c.clientAllow, c.adminAllow
			ln := loopbackListener(t)
			url := "https://" + ln.Addr().String()
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- Run(ctx, withSeams(cfg, withListener(ln)), zerolog.Nop()) }()
			defer func() {
				cancel()
				select {
				case err := <-errc:
					if err != nil {
						t.Errorf("Run stopped while claiming: %v, want nil", err)
					}
				case <-time.After(30 * time.Second):
					t.Error("Run did not return after cancel")
				}
			}()

			clients := map[string]*http.Client{}
			for name, leaf := range leaves {
				clients[name] = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
					TLSClientConfig:   &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{leaf.TLS(t)}},
					DisableKeepAlives: true,
				}}
			}
			admin := "ops"
			if c.adminAllow == "" && c.clientAllow != "" {
				admin = "app"
			}
			// The claim starts a moment after the port opens: wait until an
			// admin sees what it waits for.
			deadline := time.Now().Add(10 * time.Second)
			for {
				code, body := httpsGet(t, clients[admin], url+"/readyz")
				if code == http.StatusServiceUnavailable && strings.Contains(body, waits) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("GET /readyz as %s: %d %s, want 503 with %q within 10s", admin, code, body, waits)
				}
				time.Sleep(10 * time.Millisecond)
			}

			for _, r := range c.requests {
				code, body := httpsGet(t, clients[r.client], url+r.path)
				what := "GET " + r.path + " as " + r.client
				if code != r.want {
					t.Errorf("%s: %d %s, want %d", what, code, body, r.want)
					continue
				}
				if got := strings.Contains(body, waits); got != r.detail {
					t.Errorf("%s: %s, want the detail %q: %v", what, body, waits, r.detail)
				}
				checkStartingBody(t, what, body, r.client, r.path, r.code, r.detail)
			}
		})
	}
}

// checkStartingBody checks the body of what (a GET of path as client)
// answered while the node starts: an error body with code (naming the
// client and the path when it is client_not_allowed), or /readyz's state,
// with the detail of what it waits for when detail.
func checkStartingBody(t *testing.T, what, body, client, path, code string, detail bool) {
	t.Helper()
	switch {
	case code != "":
		var e struct {
			Error struct {
				Code, Message, State, Reason string
			}
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != code {
			t.Errorf("%s: %s (%v), want code %s", what, body, err, code)
		}
		if code == "client_not_allowed" && !strings.Contains(e.Error.Message, `client certificate "`+client+`" is not allowed on `+path) {
			t.Errorf("%s: message %q does not name the client and the path", what, e.Error.Message)
		}
		if code == "out_of_service" && (e.Error.State != "starting" || e.Error.Reason != "starting") {
			t.Errorf("%s: %s, want state and reason starting", what, body)
		}
	case path == "/readyz":
		var b struct{ State, Reason, Detail string }
		if err := json.Unmarshal([]byte(body), &b); err != nil || b.State != "starting" || b.Reason != "starting" || (b.Detail != "") != detail {
			t.Errorf("%s: %s (%v), want state and reason starting, a detail: %v", what, body, err, detail)
		}
	}
}

// httpsGet returns the status and body of GET url through c.
func httpsGet(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}
