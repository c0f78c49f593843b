//go:build linux

package scale

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseMntr(t *testing.T) {
	out := "zk_version\t3.8.0-x, built on 2024-12-29\nzk_server_state\tstandalone\nzk_packets_received\t1234\n" +
		"zk_avg_latency\t0.5\nzk_num_alive_connections\t7\n"
	m, err := parseMntr(out)
	if err != nil {
		t.Fatal(err)
	}
	if m[mntrPacketsReceived] != 1234 || m[mntrConns] != 7 || m["zk_avg_latency"] != 0.5 {
		t.Errorf("parseMntr = %v", m)
	}
	if _, ok := m["zk_server_state"]; ok {
		t.Error("parseMntr kept a value that is not a number")
	}
	if _, err := parseMntr("mntr is not executed because it is not in the whitelist.\n"); err == nil {
		t.Error("parseMntr accepted an answer without zk_packets_received")
	}
}

func TestParseStatCPU(t *testing.T) {
	// The name may hold spaces and ')': fields count from the last ')'.
	stat := "4242 (snow flaked) x) S 1 4242 4242 0 -1 4194560 1157 0 0 0 250 50 0 0 20 0 8 0 123 4096 300 18446744073709551615\n"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Errorf("parseStatCPU = %v, want %v (utime 250 + stime 50 ticks)", got, want)
	}
	if _, err := parseStatCPU("4242 (x) S 1 2"); err == nil {
		t.Error("parseStatCPU accepted a short line")
	}
}

func TestReadProcSelf(t *testing.T) {
	p, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.rss < 1<<20 {
		t.Errorf("RSS of the test process %d bytes, want at least 1 MiB", p.rss)
	}
}

func TestParseStatusRSS(t *testing.T) {
	got, err := parseStatusRSS("Name:\tsnowflaked\nVmPeak:\t  9999 kB\nVmRSS:\t   14336 kB\n")
	if err != nil || got != 14336<<10 {
		t.Errorf("parseStatusRSS = %d, %v; want %d", got, err, 14336<<10)
	}
	if _, err := parseStatusRSS("Name:\tx\n"); err == nil {
		t.Error("parseStatusRSS accepted a status without VmRSS")
	}
}

func TestParseNodeMetrics(t *testing.T) {
	body := `# HELP snowflaked_requests_total x
snowflaked_requests_total{endpoint="time",code="2xx"} 40
snowflaked_requests_total{endpoint="time",code="5xx"} 2
snowflaked_requests_total{endpoint="id",code="2xx"} 1000
snowflaked_peer_rounds_total 3
snowflaked_peer_unreachable_total 1
snowflaked_zk_reports_total 20
snowflaked_worker_id 17
`
	m, err := parseNodeMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	want := nodeMetrics{timeServed: 42, peerRounds: 3, peerFailed: 1, fenceReports: 20, workerID: 17}
	if m != want {
		t.Errorf("parseNodeMetrics = %+v, want %+v", m, want)
	}
	if _, err := parseNodeMetrics("snowflaked_peer_rounds_total 3\n"); err == nil {
		t.Error("parseNodeMetrics accepted metrics without the /time counter")
	}
}

func TestFillWindowAndRecycle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := snapshot{at: t0, mntr: Mntr{mntrPacketsReceived: 100, mntrReads: 10, mntrWrites: 5},
		metrics: []nodeMetrics{{timeServed: 1}, {timeServed: 1}},
		procs:   []procSample{{cpu: time.Second}, {cpu: 2 * time.Second}}}
	b := snapshot{at: t0.Add(10 * time.Second), mntr: Mntr{mntrPacketsReceived: 300, mntrReads: 50, mntrWrites: 25, mntrConns: 4},
		metrics: []nodeMetrics{{timeServed: 11}, {timeServed: 21}},
		procs:   []procSample{{cpu: 2 * time.Second, rss: 10 << 20}, {cpu: 2 * time.Second, rss: 20 << 20}}}
	var res Result
	fillWindow(&res, a, b)
	check := func(name string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("ZKPacketsPerNodeS", res.ZKPacketsPerNodeS, 10)
	check("ZKReadsPerNodeS", res.ZKReadsPerNodeS, 2)
	check("ZKWritesPerNodeS", res.ZKWritesPerNodeS, 1)
	check("ZKConnsPerNode", res.ZKConnsPerNode, 2)
	check("TimeServedPerNodeS", res.TimeServedPerNodeS, 1.5)
	check("NodeCPUPercentMean", res.NodeCPUPercentMean, 5)
	check("NodeCPUPercentMax", res.NodeCPUPercentMax, 10)
	check("NodeRSSMiBMean", res.NodeRSSMiBMean, 15)

	c := Recycle{Keys: 4}
	fillRecycle(&c, &res, Mntr{mntrPacketsReceived: 0}, Mntr{mntrPacketsReceived: 200, mntrReads: 80}, 2, 5)
	check("PacketsPerKey", c.PacketsPerKey, 50)
	check("PacketsPerKeyNet", c.PacketsPerKeyNet, 50-2*5*10.0/4)
	check("ReadsPerKeyNet", c.ReadsPerKeyNet, 20-2*5*2.0/4)

	r := Report{Results: []Result{{Nodes: 2, Recycle: c}, {Nodes: 3, Error: "boom"}}}
	md := r.Markdown()
	for _, want := range []string{"| 2 | 0.0 |", "| 2 | 4 | 0 |", "N=3: boom"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("SCALE_NODES", "16,32 8")
	t.Setenv("SCALE_WINDOW", "5s")
	t.Setenv("SCALE_RECYCLE", "3")
	t.Setenv("SCALE_NODE_FLAGS", "--peer-interval 10s")
	c, err := ConfigFromEnv("/repo")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 3 || c.Nodes[0] != 16 || c.Nodes[2] != 8 || c.Window != 5*time.Second || c.Recycle != 3 ||
		c.BinDir != "/repo/bin" || len(c.NodeFlags) != 2 || c.Settle != DefaultSettle {
		t.Errorf("ConfigFromEnv = %+v", c)
	}
	for env, bad := range map[string]string{"SCALE_NODES": "0", "SCALE_WINDOW": "soon", "SCALE_RECYCLE": "-1"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, bad)
			if _, err := ConfigFromEnv("/repo"); err == nil {
				t.Errorf("%s=%s accepted", env, bad)
			}
		})
	}
}

func TestConfigFromEnvRelativeOut(t *testing.T) {
	t.Setenv("SCALE_OUT", "out/x")
	t.Setenv("SCALE_BIN", "/opt/bin")
	c, err := ConfigFromEnv("/repo")
	if err != nil {
		t.Fatal(err)
	}
	if c.OutDir != "/repo/out/x" || c.WorkDir != "/repo/out/x/scale-run" || c.BinDir != "/opt/bin" {
		t.Errorf("ConfigFromEnv = %+v", c)
	}
}

func TestPeerInterval(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  time.Duration
	}{
		{nil, 30 * time.Second},
		{[]string{"--peer-interval", "10s"}, 10 * time.Second},
		{[]string{"-peer-interval=5s", "--log-level", "warn"}, 5 * time.Second},
		{[]string{"--peer-max-offset", "2s"}, 30 * time.Second},
	} {
		if got := peerInterval(c.flags); got != c.want {
			t.Errorf("peerInterval(%q) = %v, want %v", c.flags, got, c.want)
		}
	}
}
