package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/health"
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
			LastReport: now.UnixMilli() - 1200, LastReportAgeMs: 1200, Fence: now.Add(5 * time.Second).UnixMilli(), Token: "0123456789abcdef"}},
			[]string{"1 worker(s), 1 in service", "WORKER", "NODE KEY", "ADDRESS", "LEASE", "IN SERVICE", "LAST REPORT", "ZK FENCE (HEADROOM)", "TOKEN",
				"3", "pod-3", "10.0.0.3:8080", "yes", "1.2s ago", "2025-06-01T12:00:05.000Z (in 5s)", "01234567  "}},
		{"stopped, recycled and odd", []coordinator.WorkerInfo{
			{WorkerID: 1, NodeKey: "a", Addr: "h:1", LastReportAgeMs: 90 * 60 * 1000, Fence: now.Add(-time.Hour).UnixMilli()},
			{WorkerID: -1, NodeKey: "b", LastReportAgeMs: -1},
			{WorkerID: 2, LeaseHeld: true, LeaseHolder: "node key x", LastReportAgeMs: -1, Problem: "lease without a forever znode naming this worker ID"}},
			[]string{"3 worker(s), 0 in service", "1h30m0s ago", "(1h0m0s ago)", "never", "-  ", "yes (node key x)", "lease without a forever znode"}},
		{"retired", []coordinator.WorkerInfo{{WorkerID: 4, NodeKey: "gone", LastReportAgeMs: -1, Retired: now.UnixMilli()}},
			[]string{"gone", "retired (snowflakectl node retire)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeStatusTable(&b, "c", tc.rows, now)
			for _, s := range tc.want {
				if !strings.Contains(b.String(), s) {
					t.Errorf("table does not contain %q:\n%s", s, b.String())
				}
			}
		})
	}
}

type fixedFence int64

func (f fixedFence) LastIssued() int64      { return int64(f) }
func (f fixedFence) SetZKFence(int64)       {}
func (f fixedFence) RaiseFloor(int64) error { return nil }

// startWorker claims a worker ID for nodeKey in cluster; with serve, it also
// runs the coordinator with a guard in service, so its alive znode exists.
func startWorker(t *testing.T, zk *zkharness.Cluster, cluster, nodeKey, addr string, serve bool) *coordinator.Coordinator {
	t.Helper()
	c, err := coordinator.New(coordinator.Config{
		Servers: strings.Split(zk.ConnectString(), ","), SessionTimeout: 2 * time.Second, Cluster: cluster,
		NodeKey: nodeKey, Advertise: addr, Layout: snowflake.DefaultLayout(), ReportInterval: 200 * time.Millisecond, CreateCluster: true,
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
	startWorker(t, zk, "ctltest", "node-a", "127.0.0.1:18081", true)
	startWorker(t, zk, "ctltest", "node-b", "127.0.0.1:18082", false) // lease held, not in service

	// Poll until node-a is in service and has reported (bounded).
	var got statusJSON
	deadline := time.Now().Add(10 * time.Second)
	for {
		var stdout, stderr bytes.Buffer
		code := Main([]string{"status", "--zk", zk.ConnectString(), "--cluster", "ctltest", "--json"}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("status --json: exit %d, %s", code, stderr.String())
		}
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("status --json output %q: %v", stdout.String(), err)
		}
		if len(got.Workers) == 2 && got.Workers[0].InService && got.Workers[0].LastReport > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-a not in service with a report within 10s: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	a0, b1 := got.Workers[0], got.Workers[1]
	if got.Cluster != "ctltest" || a0.WorkerID != 0 || a0.NodeKey != "node-a" || a0.Addr != "127.0.0.1:18081" || !a0.LeaseHeld ||
		b1.WorkerID != 1 || b1.NodeKey != "node-b" || !b1.LeaseHeld || b1.InService {
		t.Errorf("workers %+v", got.Workers)
	}

	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut []string
		wantErr string
	}{
		{"table", []string{"status", "--zk", zk.ConnectString(), "--cluster", "ctltest"}, 0,
			[]string{`cluster "ctltest": 2 worker(s), 1 in service`, "node-a", "127.0.0.1:18081", "node-b", "127.0.0.1:18082", "ago"}, ""},
		{"flags after the command in any order", []string{"status", "--cluster=ctltest", "--zk=" + zk.ConnectString()}, 0, []string{"node-a"}, ""},
		{"unknown cluster", []string{"status", "--zk", zk.ConnectString(), "--cluster", "nosuch"}, 1, nil, `cluster "nosuch" does not exist`},
		{"zookeeper unreachable", []string{"status", "--zk", "127.0.0.1:1", "--timeout", "300ms"}, 1, nil, "zookeeper unavailable"},
		{"no --zk", []string{"status"}, 2, nil, "--zk is required"},
		{"bad cluster name", []string{"status", "--zk", zk.ConnectString(), "--cluster", "a/b"}, 2, nil, "a/b"},
		{"positional argument", []string{"status", "--zk", zk.ConnectString(), "extra"}, 2, nil, `unexpected arguments ["extra"]`},
		{"bad timeout", []string{"status", "--zk", zk.ConnectString(), "--timeout", "-1s"}, 2, nil, "--timeout -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
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
		})
	}
}
