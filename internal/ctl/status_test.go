package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

func TestWriteStatusTable(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		rows []coordinator.WorkerInfo
		want []string
	}{
		{"empty", nil, []string{`cluster "c": 0 worker(s), 0 in service`}},
		{"serving", []coordinator.WorkerInfo{{WorkerID: 3, NodeKey: "pod-3", Addr: "10.0.0.3:8080", LeaseHeld: true, InService: true,
			LastReport: snowflake.UnixMilli(now.UnixMilli() - 1200), LastReportAgeMs: 1200, Fence: snowflake.UnixMilliOf(now.Add(5 * time.Second)), Token: "0123456789abcdef"}},
			[]string{"1 worker(s), 1 in service", "WORKER", "NODE KEY", "ADDRESS", "VERSION", "LEASE", "IN SERVICE", "REASON", "LAST REPORT", "ZK FENCE (HEADROOM)", "TOKEN",
				"3", "pod-3", "10.0.0.3:8080", "yes", "1.2s ago", "2025-06-01T12:00:05.000Z (in 5s)", "01234567  "}},
		{"stopped, recycled and odd", []coordinator.WorkerInfo{
			{WorkerID: 1, NodeKey: "a", Addr: "h:1", LastReportAgeMs: 90 * 60 * 1000, Fence: snowflake.UnixMilliOf(now.Add(-time.Hour))},
			{WorkerID: -1, NodeKey: "b", LastReportAgeMs: -1},
			{WorkerID: 2, LeaseHeld: true, LeaseHolder: "node key x", LastReportAgeMs: -1, Problem: "lease without a forever znode naming this worker ID"}},
			[]string{"3 worker(s), 0 in service", "1h30m0s ago", "(1h0m0s ago)", "never", "-  ", "yes (node key x)", "lease without a forever znode"}},
		{"retired", []coordinator.WorkerInfo{{WorkerID: 4, NodeKey: "gone", LastReportAgeMs: -1, Retired: snowflake.UnixMilliOf(now)}},
			[]string{"gone", "retired (snowflakectl node retire)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeStatusTable(&b, "c", explainRows(tc.rows, time.Second, nil), now)
			for _, s := range tc.want {
				if !strings.Contains(b.String(), s) {
					t.Errorf("table does not contain %q:\n%s", s, b.String())
				}
			}
		})
	}
}

type fixedFence snowflake.UnixMilli

func (f fixedFence) LastIssued() snowflake.UnixMilli      { return snowflake.UnixMilli(f) }
func (f fixedFence) SetZKFence(snowflake.UnixMilli)       {}
func (f fixedFence) RaiseFloor(snowflake.UnixMilli) error { return nil }

// startWorker claims a worker ID for nodeKey in cluster; with serve, it also
// runs the coordinator with a guard in service, so its alive znode exists.
func startWorker(t *testing.T, zk *zkharness.Cluster, cluster, nodeKey, addr string, serve bool) *coordinator.Coordinator {
	t.Helper()
	c, err := coordinator.New(coordinator.Config{
		Servers: strings.Split(zk.ConnectString(), ","), SessionTimeout: 2 * time.Second, Cluster: cluster,
		NodeKey: nodeKey, Advertise: addr, Version: "v0.9.0-test", Layout: snowflake.DefaultLayout(), ReportInterval: 200 * time.Millisecond, CreateCluster: true,
		Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = c.Close(cctx, 0)
	})
	if _, err := c.Claim(ctx, coordinator.Prior{}); err != nil {
		t.Fatalf("claim %s: %v", nodeKey, err)
	}
	if serve {
		g := health.New(zerolog.Nop(), nil)
		c.Attach(g)
		go func() { _ = c.Run(ctx, fixedFence(time.Now().Add(time.Hour).UnixMilli())) }()
	}
	return c
}

func TestIntegration_Status(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	addrB := startStatusWorkers(t, zk)
	got := pollStatusJSON(t, zk)
	checkStatusJSONRows(t, got)

	tests := []statusCase{
		{"table", []string{"status", "--zk", zk.ConnectString(), "--cluster", "ctltest"}, 0,
			[]string{`cluster "ctltest": 3 worker(s), 1 in service`, "node-a", "127.0.0.1:18081", "node-b", addrB, "ago", "v0.9.0-test", "ntp_offset", "unreachable"}, ""},
		{"table, dead node flagged", []string{"status", "--zk", zk.ConnectString(), "--cluster", "ctltest", "--report-interval", "1ms"}, 0,
			[]string{"DEAD: not reporting; unreachable", "not reporting; ntp_offset"}, ""},
		{"no probing", []string{"status", "--zk", zk.ConnectString(), "--cluster", "ctltest", "--probe-timeout", "0", "--report-interval", "1ms"}, 0,
			[]string{"DEAD: not reporting  "}, ""},
		{"bad probe timeout", []string{"status", "--zk", zk.ConnectString(), "--probe-timeout", "-1s"}, 2, nil, "--probe-timeout -1s"},
		{"bad report interval", []string{"status", "--zk", zk.ConnectString(), "--report-interval", "0s"}, 2, nil, "--report-interval 0s"},
		{"flags after the command in any order", []string{"status", "--cluster=ctltest", "--zk=" + zk.ConnectString()}, 0, []string{"node-a"}, ""},
		{"unknown cluster", []string{"status", "--zk", zk.ConnectString(), "--cluster", "nosuch"}, 1, nil, `cluster "nosuch" does not exist`},
		{"zookeeper unreachable", []string{"status", "--zk", "127.0.0.1:1", "--timeout", "300ms"}, 1, nil, "zookeeper unavailable"},
		{"no --zk", []string{"status"}, 2, nil, "--zk is required"},
		{"bad cluster name", []string{"status", "--zk", zk.ConnectString(), "--cluster", "a/b"}, 2, nil, "a/b"},
		{"positional argument", []string{"status", "--zk", zk.ConnectString(), "extra"}, 2, nil, `unexpected arguments ["extra"]`},
		{"bad timeout", []string{"status", "--zk", zk.ConnectString(), "--timeout", "-1s"}, 2, nil, "--timeout -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkStatusCase(t, tc) })
	}
}

// startStatusWorkers claims three worker IDs in cluster ctltest: node-a
// serving, node-b holding its lease, out of service and saying why on
// /readyz, node-c holding its lease and answering nothing (killed, frozen).
// It returns node-b's address.
func startStatusWorkers(t *testing.T, zk *zkharness.Cluster) string {
	t.Helper()
	startWorker(t, zk, "ctltest", "node-a", "127.0.0.1:18081", true)
	nodeB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"state":"out_of_service","reason":"ntp_offset","detail":"offset 2s"}`))
	}))
	t.Cleanup(nodeB.Close)
	addrB := strings.TrimPrefix(nodeB.URL, "http://")
	startWorker(t, zk, "ctltest", "node-b", addrB, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addrC := ln.Addr().String()
	ln.Close() // nothing answers there
	startWorker(t, zk, "ctltest", "node-c", addrC, false)
	return addrB
}

// pollStatusJSON runs status --json until node-a is in service and has
// reported and node-c's report is old (bounded), and returns its answer.
func pollStatusJSON(t *testing.T, zk *zkharness.Cluster) statusJSON {
	t.Helper()
	var got statusJSON
	deadline := time.Now().Add(10 * time.Second)
	for {
		var stdout, stderr bytes.Buffer
		code := Main([]string{"status", "--zk", zk.ConnectString(), "--cluster", "ctltest", "--json", "--report-interval", "1ms"}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("status --json: exit %d, %s", code, stderr.String())
		}
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("status --json output %q: %v", stdout.String(), err)
		}
		if len(got.Workers) == 3 && got.Workers[0].InService && got.Workers[0].LastReport > 0 && got.Workers[2].LastReportAgeMs > 3 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-a not in service with a report within 10s: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkStatusJSONRows checks the three workers of status --json: who they
// are, their leases, version, reason and which one is dead.
func checkStatusJSONRows(t *testing.T, got statusJSON) {
	t.Helper()
	a0, b1, c2 := got.Workers[0], got.Workers[1], got.Workers[2]
	if got.Cluster != "ctltest" || a0.WorkerID != 0 || a0.NodeKey != "node-a" || a0.Addr != "127.0.0.1:18081" || !a0.LeaseHeld ||
		b1.WorkerID != 1 || b1.NodeKey != "node-b" || !b1.LeaseHeld || b1.InService {
		t.Errorf("workers %+v", got.Workers)
	}
	for _, w := range []struct {
		row    statusRow
		reason string
		dead   bool
	}{{a0, "", false}, {b1, "not reporting; ntp_offset", false}, {c2, "not reporting; unreachable", true}} {
		if w.row.Version != "v0.9.0-test" || w.row.Reason != w.reason || w.row.Dead != w.dead {
			t.Errorf("%s: version %q reason %q dead %v, want v0.9.0-test %q %v", w.row.NodeKey, w.row.Version, w.row.Reason, w.row.Dead, w.reason, w.dead)
		}
	}
}

// statusCase is one run of snowflakectl status: its arguments, exit code,
// what stdout must contain and what stderr must contain.
type statusCase struct {
	name    string
	args    []string
	code    int
	wantOut []string
	wantErr string
}

// checkStatusCase runs one statusCase and checks its exit code and output.
func checkStatusCase(t *testing.T, tc statusCase) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(tc.args, &stdout, &stderr)
	if code != tc.code {
		t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, stdout.String(), stderr.String())
	}
	for _, s := range tc.wantOut {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("stdout does not contain %q:\n%s", s, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), tc.wantErr) {
		t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantErr)
	}
}

// TestExplainRows: each row out of service gets its reason from ZooKeeper's
// data and its /readyz answer; a node with no lease or no recent report
// that does not answer is dead.
func TestExplainRows(t *testing.T) {
	const interval = time.Second
	answers := map[string]string{"up:1": "ntp_offset", "gone:1": reasonUnreachable, "ready:1": reasonReady}
	ask := func(addr string) string { return answers[addr] }
	tests := []struct {
		name       string
		row        coordinator.WorkerInfo
		ask        func(string) string
		wantReason string
		wantDead   bool
	}{
		{"in service", coordinator.WorkerInfo{Addr: "gone:1", LeaseHeld: true, InService: true, LastReportAgeMs: 500}, ask, "", false},
		{"out of service, says why", coordinator.WorkerInfo{Addr: "up:1", LeaseHeld: true, LastReportAgeMs: 500}, ask, "ntp_offset", false},
		{"out of service, silent", coordinator.WorkerInfo{Addr: "gone:1", LeaseHeld: true, LastReportAgeMs: 500}, ask, "unreachable", false},
		{"alive znode missing, ready", coordinator.WorkerInfo{Addr: "ready:1", LeaseHeld: true, LastReportAgeMs: 500}, ask, "ready", false},
		{"no lease, silent", coordinator.WorkerInfo{Addr: "gone:1", LastReportAgeMs: 60_000}, ask, "no lease; unreachable", true},
		{"no lease, answers", coordinator.WorkerInfo{Addr: "up:1", LastReportAgeMs: 60_000}, ask, "no lease; ntp_offset", false},
		{"lease held by another key", coordinator.WorkerInfo{Addr: "gone:1", LeaseHeld: true, LeaseHolder: "node key x", LastReportAgeMs: 500}, ask, "no lease; unreachable", true},
		{"lease, report old, silent", coordinator.WorkerInfo{Addr: "gone:1", LeaseHeld: true, LastReportAgeMs: 3001}, ask, "not reporting; unreachable", true},
		{"lease, report at the limit", coordinator.WorkerInfo{Addr: "gone:1", LeaseHeld: true, LastReportAgeMs: 3000}, ask, "unreachable", false},
		{"lease, never reported yet", coordinator.WorkerInfo{Addr: "up:1", LeaseHeld: true, LastReportAgeMs: -1}, ask, "ntp_offset", false},
		{"clean stop: not asked", coordinator.WorkerInfo{Addr: "up:1", Stopped: true, LastReportAgeMs: 60_000}, ask, "stopped", false},
		{"retired: not asked", coordinator.WorkerInfo{Addr: "up:1", Retired: 1, LastReportAgeMs: 60_000}, ask, "retired", false},
		{"no lease, not asked", coordinator.WorkerInfo{Addr: "up:1", LastReportAgeMs: 60_000}, nil, "no lease", true},
		{"no address", coordinator.WorkerInfo{WorkerID: 2, LeaseHeld: true, LastReportAgeMs: -1}, ask, "", false},
		{"reported, not asked", coordinator.WorkerInfo{Addr: "up:1", LeaseHeld: true, LastReportAgeMs: 500, ReportedReason: "peer_offset"}, nil, "peer_offset (reported)", false},
		{"reported, answers: the answer", coordinator.WorkerInfo{Addr: "up:1", LeaseHeld: true, LastReportAgeMs: 500, ReportedReason: "peer_offset"}, ask, "ntp_offset", false},
		{"reported, silent", coordinator.WorkerInfo{Addr: "gone:1", LeaseHeld: true, LastReportAgeMs: 500, ReportedReason: "peer_offset"}, ask, "unreachable; peer_offset (reported)", false},
		{"reported, no address", coordinator.WorkerInfo{WorkerID: 2, LeaseHeld: true, LastReportAgeMs: 500, ReportedReason: "clock_rollback"}, ask, "clock_rollback (reported)", false},
		{"reported long ago: dead", coordinator.WorkerInfo{Addr: "gone:1", LeaseHeld: true, LastReportAgeMs: 60_000, ReportedReason: "peer_offset"}, ask, "not reporting; unreachable", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := explainRows([]coordinator.WorkerInfo{tc.row}, interval, tc.ask)
			if len(got) != 1 || got[0].WorkerInfo != tc.row {
				t.Fatalf("rows %+v, want one carrying %+v", got, tc.row)
			}
			if got[0].Reason != tc.wantReason || got[0].Dead != tc.wantDead {
				t.Errorf("reason %q dead %v, want %q %v", got[0].Reason, got[0].Dead, tc.wantReason, tc.wantDead)
			}
		})
	}
	if got := explainRows(nil, interval, ask); got == nil || len(got) != 0 {
		t.Errorf("explainRows(nil) = %#v, want empty, not nil", got)
	}
}

// TestReadyzProber: what status learns from a node's /readyz.
func TestReadyzProber(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"ready", http.StatusOK, `{"state":"in_service"}`, reasonReady},
		{"out of service", http.StatusServiceUnavailable, `{"state":"out_of_service","reason":"clock_rollback","detail":"x"}`, "clock_rollback"},
		{"starting, no reason", http.StatusServiceUnavailable, `{"state":"starting","detail":"claiming"}`, "starting"},
		{"not our answer", http.StatusNotFound, `not found`, "readyz: 404 Not Found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/readyz" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			if got := readyzProber(time.Second, nil)(strings.TrimPrefix(srv.URL, "http://")); got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		if got := readyzProber(time.Second, nil)(addr); got != reasonUnreachable {
			t.Errorf("answer %q, want %q", got, reasonUnreachable)
		}
	})
	t.Run("silent past the timeout", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts (backlog), never answers
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		start := time.Now()
		if got := readyzProber(200*time.Millisecond, nil)(ln.Addr().String()); got != reasonUnreachable {
			t.Errorf("answer %q, want %q", got, reasonUnreachable)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v with a 200ms timeout", d)
		}
	})
	if readyzProber(0, nil) != nil {
		t.Error("readyzProber(0) asks: want nil")
	}
}

// With ZooKeeper down, status fails and says where to look instead: each
// node's /readyz; for a cluster that does not exist it does not.
func TestStatusWithoutZooKeeperPointsAtTheNodes(t *testing.T) {
	code, _, errOut := runCtl("status", "--zk", testsupport.ClosedAddr(t), "--timeout", "1s")
	if code != exitFailure || !strings.Contains(errOut, "without ZooKeeper, ask each node") || !strings.Contains(errOut, "/readyz") {
		t.Errorf("status with ZooKeeper down: exit %d, %q; want exit 1 and a pointer to each node's /readyz", code, errOut)
	}
}
