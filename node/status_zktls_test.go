package node

import (
	"net/http"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/tests/testpki"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// GET /status of a node that talks to ZooKeeper over mutual TLS lists the
// cluster's workers: the listing goes over the node's own TLS session, not
// a plain connection to the TLS port that would wait out the page's 3 s
// and show "The cluster's worker list is unavailable … context deadline
// exceeded".
func TestIntegration_StatusPageOverZooKeeperTLS(t *testing.T) {
	pki := testpki.New(t)
	zk := zkharness.StartStandaloneTLS(t, zkharness.TLS{PKI: pki, ClientAuth: "need"})
	cfg := zkTestConfig(t, zk, "statustls", "node-tls")
	cfg.ZK = zk.SecureConnectString()
	cfg.ZKTLSCA, cfg.ZKTLSCert, cfg.ZKTLSKey = pki.CA, pki.ClientCert, pki.ClientKey
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	startRunOn(t, cfg, ln)
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })

	code, body := httpGet(t, addr, "/status")
	if code != http.StatusOK {
		t.Fatalf("/status: %d\n%s", code, body)
	}
	if strings.Contains(body, "worker list is unavailable") {
		i := strings.Index(body, "worker list is unavailable")
		t.Fatalf("/status over ZooKeeper TLS: %q", body[max(0, i-40):min(len(body), i+200)])
	}
	if strings.Contains(body, "not in the cluster's worker list") || !strings.Contains(body, "node-tls") {
		t.Errorf("/status does not list node-tls from the worker list:\n%s", body)
	}
}
