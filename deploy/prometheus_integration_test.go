package deploy_test

import (
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/ntpharness"
	"codeberg.org/snowflaked/snowflaked/tests/proc"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"

	"gopkg.in/yaml.v3"
)

const (
	promCluster = "deploytest"
	waitLong    = 60 * time.Second
	poll        = 200 * time.Millisecond
)

// freePort returns a free port on 127.0.0.1.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// promQuery runs an instant query and returns its result vector.
func promQuery(t *testing.T, base, q string) ([]json.RawMessage, error) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("query %q: %v: %s", q, err, b)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s %s", q, r.Status, r.Error)
	}
	return r.Data.Result, nil
}

// waitFor polls cond every poll until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for range int(timeout/poll) + 1 {
		ok, seen := cond()
		if ok {
			return
		}
		last = seen
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(poll)
	}
	t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
}

// promWorld starts three chaos-build nodes of cluster promCluster and a
// Prometheus with the shipped rules and scrape configs that scrapes them
// every second, and waits until it does: the Prometheus's base URL, the
// nodes' addresses and processes.
func promWorld(t *testing.T) (base string, addrs []string, nodes []*proc.Proc) {
	t.Helper()
	prom := testsupport.NeedTool(t, "prometheus", "prometheus")
	zk := zkharness.StartStandalone(t)
	ntp := ntpharness.StartFake(t)
	bin, err := proc.Build(t.TempDir(), "snowflaked-chaos", "codeberg.org/snowflaked/snowflaked/cmd/snowflaked", "-tags", "chaos")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		addr := "127.0.0.1:" + freePort(t)
		p := proc.Start(t, fmt.Sprintf("node %d", i), bin, []string{
			"--listen", addr, "--zk", zk.ConnectString(), "--cluster", promCluster, "--create-cluster", "--node-key", fmt.Sprintf("n%d", i),
			"--cache-file", filepath.Join(t.TempDir(), "cache.json"), "--zk-session-timeout", "2s",
			"--report-interval", "500ms", "--fence-ahead", "1s", "--peer-interval", "1s", "--ntp", ntp.Addr(), "--ntp-interval", "1s",
		}, proc.Env())
		nodes, addrs = append(nodes, p), append(addrs, addr)
	}
	for _, a := range addrs {
		waitFor(t, waitLong, a+" in service", func() (bool, string) {
			resp, err := http.Get("http://" + a + "/readyz")
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == 200, resp.Status
		})
	}

	// Prometheus with the shipped rules and scrape configs, scraping every
	// second: nodes 1 and 2 as static targets, node 3 as a Kubernetes pod, so
	// the cluster spans two jobs and the alerts must not care which.
	dir := t.TempDir()
	rules, err := filepath.Abs("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     []string{rules},
		"scrape_configs": scrapeConfigs(t, promCluster, addrs[:2], addrs[2:]),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	web := "127.0.0.1:" + freePort(t)
	base = "http://" + web
	p := proc.Start(t, "prometheus", prom, []string{
		"--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", web, "--log.level", "warn",
	}, proc.Env())
	defer func() {
		if t.Failed() {
			t.Logf("prometheus output:\n%s", p.Tail(40))
		}
	}()
	waitFor(t, waitLong, "prometheus scraping all three nodes", func() (bool, string) {
		r, err := promQuery(t, base, `count(snowflaked_state{cluster="`+promCluster+`", state="in_service"} == 1)`)
		if err != nil {
			return false, err.Error()
		}
		return len(r) == 1 && strings.Contains(string(r[0]), `"3"`), fmt.Sprint(r)
	})
	// The shipped scrape configs label every node, and only those: three up
	// series with app and cluster (the pods of other applications, or not to
	// be scraped, are dropped), the pod scraped at its annotated port.
	for _, c := range []struct{ q, want string }{
		{`count(up{app="snowflaked", cluster="` + promCluster + `"} == 1)`, `"3"`},
		{`count(up)`, `"3"`},
		{`up{job="kubernetes-pods", app="snowflaked", cluster="` + promCluster + `", pod="snowflaked-0", namespace="default", instance="` + addrs[2] + `"}`, `"1"`},
	} {
		r, err := promQuery(t, base, c.q)
		if err != nil || len(r) != 1 || !strings.Contains(string(r[0]), c.want) {
			all, _ := promQuery(t, base, `up`)
			t.Fatalf("%s = %s (%v), want %s; up: %s", c.q, r, err, c.want, all)
		}
	}
	return base, addrs, nodes
}

func TestIntegration_PrometheusAlertsAndDashboard(t *testing.T) {
	base, addrs, nodes := promWorld(t)

	// A healthy cluster pages nobody: no critical alert is pending or firing
	// (SnowflakedClusterDown, SnowflakedZooKeeperUnreachable, ...), for
	// longer than their for: of 10s and 15s.
	for until := time.Now().Add(16 * time.Second); time.Now().Before(until); time.Sleep(500 * time.Millisecond) {
		if r, err := promQuery(t, base, `ALERTS{severity="critical"}`); err != nil || len(r) != 0 {
			t.Fatalf("critical alerts on a healthy cluster: %s (%v)", r, err)
		}
	}

	// Roll node 1 back 5s: the out-of-service alert must be pending (or
	// firing) for it while it waits the rollback out.
	victim := addrs[0]
	resp, err := http.Post("http://"+victim+"/debug/chaos/clock?offset=-5s", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("chaos rollback: %v %v", resp, err)
	}
	resp.Body.Close()
	// (The reason is whichever check sees it first: clock_rollback,
	// ntp_offset or peer_offset, as the node is 5s off NTP and its peers.)
	var alert string
	waitFor(t, 10*time.Second, "SnowflakedNodeOutOfService pending or firing for "+victim, func() (bool, string) {
		r, err := promQuery(t, base, `ALERTS{alertname="SnowflakedNodeOutOfService", instance="`+victim+`"}`)
		if err != nil {
			return false, err.Error()
		}
		all, _ := promQuery(t, base, `ALERTS`)
		reasons, _ := promQuery(t, base, `snowflaked_state_reason == 1`)
		if len(r) > 0 {
			alert = string(r[0])
		}
		return len(r) > 0 && (strings.Contains(alert, `"pending"`) || strings.Contains(alert, `"firing"`)), fmt.Sprintf("alerts %s; reasons %s", all, reasons)
	})
	t.Logf("the out-of-service alert for %s: %s", victim, alert)
	// The rollback alert reads the real watcher and policy series: it fires
	// for the node, with the text of the default policy (leave).
	waitFor(t, 20*time.Second, "SnowflakedClockRollback firing for "+victim, func() (bool, string) {
		r, err := promQuery(t, base, `ALERTS{alertname="SnowflakedClockRollback", alertstate="firing", policy="leave", instance="`+victim+`"}`)
		if err != nil {
			return false, err.Error()
		}
		steps, _ := promQuery(t, base, `snowflaked_watcher_steps_total{direction="backward"}`)
		return len(r) == 1, fmt.Sprintf("alerts %s; backward steps %s", r, steps)
	})

	checkDashboardQueries(t, base)

	// Every process gone: only the up series are left, and the critical
	// alert goes pending for the cluster (it fires after its for: of 10s).
	for _, n := range nodes {
		_ = n.Kill()
	}
	waitFor(t, 20*time.Second, "SnowflakedClusterDown pending with every node dead", func() (bool, string) {
		r, err := promQuery(t, base, `ALERTS{alertname="SnowflakedClusterDown", cluster="`+promCluster+`"}`)
		if err != nil {
			return false, err.Error()
		}
		up, _ := promQuery(t, base, `up`)
		return len(r) == 1, fmt.Sprintf("alerts %s; up %s", r, up)
	})
}

// checkDashboardQueries: every query of the shipped Grafana dashboard
// returns data from the Prometheus at base.
func checkDashboardQueries(t *testing.T, base string) {
	t.Helper()
	b, err := os.ReadFile("grafana/snowflaked.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana/snowflaked.json: %v", err)
	}
	queries := 0
	for _, panel := range dash.Panels {
		for _, tg := range panel.Targets {
			q := strings.ReplaceAll(tg.Expr, "$cluster", promCluster)
			queries++
			waitFor(t, 30*time.Second, fmt.Sprintf("panel %q query %s", panel.Title, q), func() (bool, string) {
				r, err := promQuery(t, base, q)
				if err != nil {
					return false, err.Error()
				}
				return len(r) > 0, "empty result"
			})
		}
	}
	if queries < 15 {
		t.Fatalf("only %d dashboard queries found", queries)
	}
	t.Logf("all %d dashboard queries returned data", queries)
}
