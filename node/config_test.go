package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles/tlstest"
	"codeberg.org/snowflaked/snowflaked/server"
	"codeberg.org/snowflaked/snowflaked/tests/testpki"
)

func TestDefaultConfigMatchesSpec(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"listen": ":8080", "advertise": "", "cluster": "default", "node-key": "", "zk": "", "zk-auth": "",
		"zk-session-timeout": "10s", "worker-id": "-1", "cache-file": "./data/snowflaked-cache.json",
		"layout": "41/10/12", "gene-bits": "0", "worker-id-range": "", "epoch": "2024-01-01T00:00:00Z", "time-unit": "1ms", "max-batch": "10000",
		"rollback-tolerance": "5ms", "rollback-policy": "leave", "fence-ahead": "3s", "report-interval": "3s", "max-start-wait": "10s",
		"zk-fence-ahead": "30s", "recycle-after": "0s", "token-stale-limit": "10s", "accept-new-incarnation": "false", "create-cluster": "false", "ntp": "", "ntp-interval": "1m0s",
		"ntp-max-offset": "500ms", "ntp-required": "false", "peer-interval": "30s", "peer-max-offset": "1s", "peer-sample": "12",
		"log-level": "info", "log-format": "json", "shutdown-timeout": "10s",
		"zk-tls-ca": "", "zk-tls-cert": "", "zk-tls-key": "",
		"tls-cert": "", "tls-key": "", "tls-client-ca": "", "tls-ca": "", "tls-client-allow": "", "tls-admin-allow": "",
		"api-tokens-file": "",
	}
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		w, ok := want[f.Name]
		if !ok {
			t.Errorf("flag --%s is not in the spec list of this test", f.Name)
			return
		}
		if f.DefValue != w {
			t.Errorf("--%s default = %q, want %q", f.Name, f.DefValue, w)
		}
	})
	if n != len(want) {
		t.Errorf("%d flags registered, want %d", n, len(want))
	}
	if c != defaultConfig() {
		t.Errorf("parsed defaults %+v differ from DefaultConfig %+v", c, defaultConfig())
	}
}

func TestRegisterFlagsParses(t *testing.T) {
	c := Config{MaxBatch: 99} // RegisterFlags ignores what c held
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	err := fs.Parse([]string{"--worker-id", "7", "--layout", "js53", "--fence-ahead", "1s", "--ntp-required", "--zk", "a:1,b:2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerID != 7 || c.Layout != "js53" || c.FenceAhead != time.Second || !c.NTPRequired || c.ZK != "a:1,b:2" || c.MaxBatch != 10000 {
		t.Errorf("parsed %+v", c)
	}
}

// EnvVars names one variable per flag, as envflag reads them.
func TestEnvVars(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var c Config
	c.RegisterFlags(fs)
	flags := 0
	fs.VisitAll(func(*flag.Flag) { flags++ })
	vars := EnvVars()
	if len(vars) != flags || flags < 10 {
		t.Fatalf("%d variables for %d flags: %v", len(vars), flags, vars)
	}
	for _, v := range []string{"SNOWFLAKED_MAX_BATCH", "SNOWFLAKED_ZK_FENCE_AHEAD", "SNOWFLAKED_CACHE_FILE", "SNOWFLAKED_NODE_KEY"} {
		if !vars[v] {
			t.Errorf("no %s among %v", v, vars)
		}
	}
	if vars["SNOWFLAKED_VERSION"] || vars["MAX_BATCH"] {
		t.Errorf("variables that set no flag of the server: %v", vars)
	}
}

func TestValidate(t *testing.T) {
	ok := defaultConfig()
	ok.WorkerID = 1
	tests := []validateCase{
		{"standalone with worker id", func(c *Config) {}, nil},
		{"zk without worker id", func(c *Config) { c.WorkerID = -1; c.ZK = "127.0.0.1:2181"; c.Listen = "127.0.0.1:8080" }, nil},
		{"js53 largest worker", func(c *Config) { c.Layout = "js53"; c.WorkerID = 31 }, nil},
		{"zero rollback tolerance", func(c *Config) { c.RollbackTolerance = 0 }, nil},
		{"smallest fence-ahead", func(c *Config) { c.FenceAhead = 3 * time.Millisecond }, nil},
		{"standalone needs worker id", func(c *Config) { c.WorkerID = -1 }, []string{"--worker-id is required"}},
		{"worker id below -1", func(c *Config) { c.WorkerID = -2 }, []string{"--worker-id -2"}},
		{"worker id beyond layout", func(c *Config) { c.WorkerID = 1024 }, []string{"--worker-id 1024", "0..1023"}},
		{"worker id beyond js53", func(c *Config) { c.Layout = "js53"; c.WorkerID = 32 }, []string{"--worker-id 32", "0..31"}},
		{"bad layout", func(c *Config) { c.Layout = "40/40/40" }, []string{"--layout 40/40/40"}},
		{"future epoch", func(c *Config) { c.Epoch = "2999-01-01T00:00:00Z" }, []string{"future"}},
		{"bad time unit", func(c *Config) { c.TimeUnit = "1us" }, []string{"below 1ms"}},
		{"max batch zero", func(c *Config) { c.MaxBatch = 0 }, []string{"--max-batch 0"}},
		{"max batch huge", func(c *Config) { c.MaxBatch = 10_000_000 }, []string{"--max-batch 10000000"}},
		// --max-batch and the server it configures have one limit.
		{"max batch at the server's limit", func(c *Config) { c.MaxBatch = server.MaxBatchLimit }, nil},
		{"max batch above the server's limit", func(c *Config) { c.MaxBatch = server.MaxBatchLimit + 1 }, []string{fmt.Sprintf("--max-batch %d: want 1..%d", server.MaxBatchLimit+1, server.MaxBatchLimit)}},
		{"fence-ahead too small", func(c *Config) { c.FenceAhead = 2 * time.Millisecond }, []string{"--fence-ahead 2ms", "at least 3ms"}},
		{"negative tolerance", func(c *Config) { c.RollbackTolerance = -time.Millisecond }, []string{"--rollback-tolerance"}},
		{"unknown rollback policy", func(c *Config) { c.RollbackPolicy = "lend" }, []string{`--rollback-policy "lend": want leave or borrow`}},
		{"zk fence ahead not positive", func(c *Config) { c.ZKFenceAhead = 0 }, []string{"--zk-fence-ahead 0s: must be positive"}},
		{"recycle-after unset: the cluster's", func(c *Config) { c.RecycleAfter = 0 }, nil},
		{"recycle-after set", func(c *Config) { c.RecycleAfter = time.Millisecond }, nil},
		{"negative recycle-after", func(c *Config) { c.RecycleAfter = -time.Second }, []string{"--recycle-after -1s: must not be negative"}},
		{"recycle-after below 1ms", func(c *Config) { c.RecycleAfter = time.Microsecond }, []string{"--recycle-after 1µs: want 1ms or more"}},
		{"token stale limit, shortest", func(c *Config) { c.TokenStaleLimit = time.Second }, nil},
		{"token stale limit, longest", func(c *Config) { c.TokenStaleLimit = 10 * time.Minute }, nil},
		{"token stale limit zero", func(c *Config) { c.TokenStaleLimit = 0 }, []string{"--token-stale-limit 0s: must be positive"}},
		{"token stale limit negative", func(c *Config) { c.TokenStaleLimit = -time.Second }, []string{"--token-stale-limit -1s: must be positive"}},
		{"token stale limit below two polls", func(c *Config) { c.TokenStaleLimit = 999 * time.Millisecond }, []string{"--token-stale-limit 999ms: want 1s..10m0s"}},
		{"token stale limit absurd", func(c *Config) { c.TokenStaleLimit = 24 * time.Hour }, []string{"--token-stale-limit 24h0m0s: want 1s..10m0s"}},
		{"report interval above G/6", func(c *Config) { c.ZKFenceAhead = 12 * time.Second }, []string{"--report-interval 3s: must be at most a sixth of --zk-fence-ahead 12s"}},
		{"zk with concrete listen host", func(c *Config) { c.WorkerID = -1; c.ZK = "a:1,b:2"; c.Listen = "10.0.0.5:8080" }, nil},
		{"worker id in zk mode", func(c *Config) { c.ZK = "a:1"; c.Advertise = "h:1" }, []string{"--worker-id 1: only for standalone mode"}},
		{"zk with advertise", func(c *Config) { c.WorkerID = -1; c.ZK = "a:1"; c.Advertise = "h:8080" }, nil},
		{"create cluster with zk", func(c *Config) { c.WorkerID = -1; c.ZK = "a:1"; c.Advertise = "h:8080"; c.CreateCluster = true }, nil},
		{"create cluster standalone", func(c *Config) { c.CreateCluster = true }, []string{"--create-cluster: only with --zk"}},
		{"zk without advertisable host", func(c *Config) { c.WorkerID = -1; c.ZK = "a:1" }, []string{"--advertise is required in ZooKeeper mode", `--listen ":8080"`}},
		{"zk with wildcard listen", func(c *Config) { c.WorkerID = -1; c.ZK = "a:1"; c.Listen = "0.0.0.0:8080" }, []string{"--advertise is required"}},
		{"zk list with a hole", func(c *Config) { c.ZK = "a:1,,b:2"; c.Advertise = "h:1" }, []string{`--zk "a:1,,b:2"`}},
		{"advertise port zero", func(c *Config) { c.Advertise = "h:0" }, []string{`--advertise "h:0"`}},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, []string{`--log-format "xml"`}},
		{"log level", func(c *Config) { c.LogLevel = "loud" }, []string{`--log-level "loud"`}},
		{"empty log level", func(c *Config) { c.LogLevel = "" }, []string{`--log-level ""`}},
		{"listen", func(c *Config) { c.Listen = "8080" }, []string{`--listen "8080"`}},
		{"advertise", func(c *Config) { c.Advertise = ":8080" }, []string{`--advertise ":8080"`}},
		{"cluster", func(c *Config) { c.Cluster = "a/b" }, []string{`--cluster "a/b"`}},
		{"node key", func(c *Config) { c.NodeKey = "a/b" }, []string{`--node-key "a/b"`}},
		{"zk auth", func(c *Config) { c.ZKAuth = "nocolon" }, []string{"--zk-auth"}},
		{"ntp list", func(c *Config) { c.NTP = "a,,b" }, []string{"--ntp"}},
		{"empty cache file", func(c *Config) { c.CacheFile = "" }, []string{"--cache-file"}},
		{"intervals", func(c *Config) {
			c.NTPInterval, c.PeerInterval, c.ShutdownTimeout, c.ZKSessionTimeout = 0, 0, 0, 0
		}, []string{"--ntp-interval", "--peer-interval", "--shutdown-timeout", "--zk-session-timeout"}},
		{"peer sample of 2", func(c *Config) { c.PeerSample = 2 }, []string{"--peer-sample 2: want at least 3"}},
		{"peer sample of 0", func(c *Config) { c.PeerSample = 0 }, []string{"--peer-sample 0: want at least 3"}},
		{"peer sample of 3", func(c *Config) { c.PeerSample = 3 }, nil},
		{"several problems at once", func(c *Config) { c.MaxBatch = 0; c.LogFormat = "xml" }, []string{"--max-batch", "--log-format"}},
	}
	checkValidate(t, ok, tests)
}

// validateCase is one row of a Validate table: a change to a valid
// config, and the substrings of the error it must give (nil: valid).
type validateCase struct {
	name   string
	change func(*Config)
	want   []string
}

// checkValidate runs a Validate table against changes of ok.
func checkValidate(t *testing.T, ok Config, tests []validateCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			err := c.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want an ErrInvalidConfig", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// --zk-tls-*: only with --zk, the CA required, certificate and key
// together, every file readable PEM; each error names its flag.
func TestValidateZKTLS(t *testing.T) {
	pki := testpki.New(t)
	missing := filepath.Join(t.TempDir(), "absent.pem")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := defaultConfig()
	ok.WorkerID = 1
	// zkTLS makes the config a ZooKeeper-mode one with the given files.
	zkTLS := func(ca, cert, key string) func(*Config) {
		return func(c *Config) {
			c.WorkerID, c.ZK, c.Listen = -1, "127.0.0.1:2182", "127.0.0.1:8080"
			c.ZKTLSCA, c.ZKTLSCert, c.ZKTLSKey = ca, cert, key
		}
	}
	tests := []validateCase{
		{"CA only: server-verified TLS", zkTLS(pki.CA, "", ""), nil},
		{"mutual TLS", zkTLS(pki.CA, pki.ClientCert, pki.ClientKey), nil},
		{"standalone", func(c *Config) { c.ZKTLSCA = pki.CA }, []string{"--zk-tls-ca", "only with --zk"}},
		{"cert without key", zkTLS(pki.CA, pki.ClientCert, ""), []string{"--zk-tls-cert", "has no key"}},
		{"key without cert", zkTLS(pki.CA, "", pki.ClientKey), []string{"--zk-tls-key", "has no certificate"}},
		{"cert and key without CA", zkTLS("", pki.ClientCert, pki.ClientKey), []string{"--zk-tls-ca", "CA file is required"}},
		{"unreadable CA", zkTLS(missing, "", ""), []string{"--zk-tls-ca", "absent.pem"}},
		{"CA not PEM", zkTLS(notPEM, "", ""), []string{"--zk-tls-ca", "no PEM certificate"}},
		{"unreadable cert", zkTLS(pki.CA, missing, pki.ClientKey), []string{"--zk-tls-cert", "absent.pem"}},
		{"unreadable key", zkTLS(pki.CA, pki.ClientCert, missing), []string{"--zk-tls-key", "absent.pem"}},
		{"key of another certificate", zkTLS(pki.CA, pki.ClientCert, pki.ServerKey), []string{"--zk-tls-key", "does not go with certificate", "private key does not match"}},
	}
	checkValidate(t, ok, tests)
	for _, tc := range tests {
		if tc.want != nil {
			continue
		}
		c := ok
		tc.change(&c)
		if c.dialer(zerolog.Nop()) == nil {
			t.Errorf("%s: dialer() is nil with --zk-tls-ca: the node would dial plain TCP", tc.name)
		}
	}
}

func TestAdvertiseAddrAndNodeKey(t *testing.T) {
	listening := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40123}
	tests := []struct {
		name, listen, advertise, nodeKey string
		wantAdv, wantKey                 string
		wantErr                          string
	}{
		{name: "advertise given", listen: ":8080", advertise: "node-1.example:8080", wantAdv: "node-1.example:8080", wantKey: "node-1.example:8080"},
		{name: "from listen host and real port", listen: "127.0.0.1:0", wantAdv: "127.0.0.1:40123", wantKey: "127.0.0.1:40123"},
		{name: "hostname kept", listen: "myhost:0", wantAdv: "myhost:40123", wantKey: "myhost:40123"},
		{name: "node key given", listen: "127.0.0.1:0", nodeKey: "pod-7", wantAdv: "127.0.0.1:40123", wantKey: "pod-7"},
		{name: "no host", listen: ":8080", wantErr: "no concrete host"},
		{name: "wildcard v4", listen: "0.0.0.0:8080", wantErr: "no concrete host"},
		{name: "wildcard v6", listen: "[::]:8080", wantErr: "no concrete host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultConfig()
			c.Listen, c.Advertise, c.NodeKey = tc.listen, tc.advertise, tc.nodeKey
			adv, err := c.advertiseAddr(listening)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("AdvertiseAddr = %q, %v; want an ErrInvalidConfig with %q", adv, err, tc.wantErr)
				}
				return
			}
			if err != nil || adv != tc.wantAdv {
				t.Fatalf("AdvertiseAddr = %q, %v; want %q", adv, err, tc.wantAdv)
			}
			if key := c.nodeKeyFor(adv); key != tc.wantKey {
				t.Errorf("NodeKeyFor = %q, want %q", key, tc.wantKey)
			}
		})
	}
}

func TestServerLists(t *testing.T) {
	c := defaultConfig()
	c.ZK, c.NTP = " a:1 , b:2,c", ""
	if got := c.zkServers(); strings.Join(got, "|") != "a:1|b:2|c" {
		t.Errorf("ZKServers = %q", got)
	}
	if got := c.ntpServers(); got != nil {
		t.Errorf("NTPServers of empty --ntp = %q, want nil", got)
	}
	c.ZK = ""
	if got := c.zkServers(); got != nil {
		t.Errorf("ZKServers in standalone mode = %q", got)
	}
}

// The ZooKeeper client certificate of --zk-tls-cert follows its files, as
// the API's does (one tlsfiles.Pair): a session that reconnects after a
// rotation presents the new certificate, not an expired one.
func TestZKTLSClientCertificateFollowsItsFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "zk-ca")
	first, rotated := ca.Issue(t, "node-before"), ca.Issue(t, "node-after")
	c := defaultConfig()
	c.ZKTLSCA, c.ZKTLSCert, c.ZKTLSKey = ca.File, first.CertFile, first.KeyFile
	cfg, err := c.zkTLSConfig(zerolog.Nop())
	if err != nil || cfg == nil || cfg.GetClientCertificate == nil || len(cfg.Certificates) != 0 {
		t.Fatalf("zkTLSConfig = %+v, %v: want a client certificate read through a Pair", cfg, err)
	}
	cn := func() string {
		t.Helper()
		cert, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil || cert == nil || len(cert.Certificate) == 0 {
			t.Fatalf("GetClientCertificate: %v, %v", cert, err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	if got := cn(); got != "node-before" {
		t.Fatalf("first certificate %q, want node-before", got)
	}
	tlstest.Install(t, rotated, first.CertFile, first.KeyFile)
	deadline := time.Now().Add(5 * time.Second) // a Pair looks at its files at most once a second
	for cn() != "node-after" {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not presented within 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
