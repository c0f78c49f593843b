//go:build linux

package scale

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/promtext"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// Mntr is ZooKeeper's answer to the four-letter command mntr: each
// numeric zk_* line, by name.
type Mntr map[string]float64

// The mntr keys the report reads.
const (
	mntrPacketsReceived = "zk_packets_received"
	mntrPacketsSent     = "zk_packets_sent"
	mntrReads           = "zk_cnt_readlatency"   // read requests answered (getData, getChildren, exists, …)
	mntrWrites          = "zk_cnt_updatelatency" // write requests committed (create, setData, delete, multi, …)
	mntrConns           = "zk_num_alive_connections"
	mntrWatches         = "zk_watch_count"
	mntrOutstanding     = "zk_outstanding_requests"
	mntrEphemerals      = "zk_ephemerals_count"
	mntrZnodes          = "zk_znode_count"
	mntrSessions        = "zk_global_sessions"
)

// rawMntrKeys are the mntr values copied into the JSON report.
var rawMntrKeys = []string{mntrPacketsReceived, mntrPacketsSent, mntrReads, mntrWrites, mntrConns,
	mntrWatches, mntrOutstanding, mntrEphemerals, mntrZnodes, mntrSessions}

// parseMntr reads mntr's "key<TAB>value" lines; lines whose value is not a
// number (zk_version, zk_server_state) are skipped.
func parseMntr(out string) (Mntr, error) {
	m := Mntr{}
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			m[k] = f
		}
	}
	if _, ok := m[mntrPacketsReceived]; !ok {
		return nil, fmt.Errorf("mntr: no %s in %q (is mntr whitelisted: 4lw.commands.whitelist?)", mntrPacketsReceived, truncate(out, 200))
	}
	return m, nil
}

// subset returns m's values of rawMntrKeys.
func (m Mntr) subset() map[string]float64 {
	out := make(map[string]float64, len(rawMntrKeys))
	for _, k := range rawMntrKeys {
		out[k] = m[k]
	}
	return out
}

// mntr asks the ZooKeeper at addr for mntr, within timeout.
func mntr(addr string, timeout time.Duration) (Mntr, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("mntr: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, fmt.Errorf("mntr: %w", err)
	}
	if _, err := io.WriteString(conn, "mntr"); err != nil {
		return nil, fmt.Errorf("mntr: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(conn, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("mntr: %w", err)
	}
	return parseMntr(string(b))
}

// mntrVersion returns the zk_version line's value ("" when absent).
func mntrVersion(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "mntr"); err != nil {
		return ""
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "zk_version\t"); ok {
			return v
		}
	}
	return ""
}

// procSample is one process's CPU time and resident memory, read from /proc.
type procSample struct {
	cpu time.Duration // user + system
	rss int64         // bytes
}

// readProc samples process pid.
func readProc(pid int) (procSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, err
	}
	cpu, err := parseStatCPU(string(stat))
	if err != nil {
		return procSample{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, err
	}
	rss, err := parseStatusRSS(string(status))
	if err != nil {
		return procSample{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return procSample{cpu: cpu, rss: rss}, nil
}

// parseStatCPU returns utime + stime of a /proc/<pid>/stat line. The
// command name (field 2) may hold spaces and parentheses: the fields are
// counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' in stat")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the name, want at least 13", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// parseStatusRSS returns VmRSS of /proc/<pid>/status, in bytes.
func parseStatusRSS(status string) (int64, error) {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("VmRSS line %q", strings.TrimSpace(line))
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS line")
}

// findPidByCwd returns the process whose working directory is dir and whose
// command line holds marker (the ZooKeeper JVM zkharness starts in its
// server directory); 0 when there is none.
func findPidByCwd(dir, marker string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		want = dir
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil || cwd != want {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), marker) {
			return pid
		}
	}
	return 0
}

// httpClient talks to the nodes: no keep-alive (a poll leaves no idle
// connection on a node), short timeouts.
var httpClient = &http.Client{
	Timeout:   3 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
}

// get returns the status and body of GET http://addr/path.
func get(ctx context.Context, addr, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(b), err
}

// ready reports whether the node at addr answers /readyz with 200.
func ready(ctx context.Context, addr string) bool {
	code, _, err := get(ctx, addr, "/readyz")
	return err == nil && code == http.StatusOK
}

// nodeMetrics are the counters and gauges the report reads from a node's
// /metrics.
type nodeMetrics struct {
	timeServed   float64 // snowflaked_requests_total{endpoint="time"}, every code
	peerRounds   float64 // snowflaked_peer_rounds_total
	peerFailed   float64 // snowflaked_peer_unreachable_total
	fenceReports float64 // snowflaked_zk_reports_total
	workerID     int64   // snowflaked_worker_id (-1 when absent)
}

// responseCodes are the code labels of snowflaked_requests_total.
var responseCodes = []string{"1xx", "2xx", "3xx", "4xx", "5xx", "other"}

// scrape reads a node's /metrics.
func scrape(ctx context.Context, addr string) (nodeMetrics, error) {
	code, body, err := get(ctx, addr, "/metrics")
	if err != nil {
		return nodeMetrics{}, err
	}
	if code != http.StatusOK {
		return nodeMetrics{}, fmt.Errorf("GET %s/metrics: %d", addr, code)
	}
	return parseNodeMetrics(body)
}

// parseNodeMetrics picks nodeMetrics out of a Prometheus exposition.
func parseNodeMetrics(body string) (nodeMetrics, error) {
	m, err := promtext.Parse(body)
	if err != nil {
		return nodeMetrics{}, err
	}
	var nm nodeMetrics
	found := false
	for _, c := range responseCodes {
		if v, ok := m[promtext.Series("snowflaked_requests_total", "code", c, "endpoint", "time")]; ok {
			nm.timeServed += v
			found = true
		}
	}
	if !found {
		return nm, errors.New(`no snowflaked_requests_total{endpoint="time"} in /metrics`)
	}
	nm.peerRounds = m["snowflaked_peer_rounds_total"]
	nm.peerFailed = m["snowflaked_peer_unreachable_total"]
	nm.fenceReports = m["snowflaked_zk_reports_total"]
	nm.workerID = -1
	if v, ok := m["snowflaked_worker_id"]; ok {
		nm.workerID = int64(v)
	}
	return nm, nil
}

// truncate shortens s to n bytes for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
