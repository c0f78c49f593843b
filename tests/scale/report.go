//go:build linux

package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Report is a whole scale run: how it was run and one Result per cluster
// size. It is written as JSON (WriteFiles) with the same field names.
type Report struct {
	Started     time.Time `json:"started"`
	Host        string    `json:"host"`        // CPUs, memory, kernel
	ZooKeeper   string    `json:"zookeeper"`   // zk_version
	Version     string    `json:"version"`     // bin/snowflaked --version
	Layout      string    `json:"layout"`      // --layout of every cluster
	NodeFlags   []string  `json:"node_flags"`  // flags every node gets besides its own --listen, --cache-file, --node-key
	WindowS     float64   `json:"window_s"`    // the steady window
	SettleS     float64   `json:"settle_s"`    // wait from all in service to the window
	RecycleWant int       `json:"recycle_req"` // SCALE_RECYCLE, before clamping to N
	Notes       []string  `json:"notes"`
	Results     []Result  `json:"results"`
}

// Result is one cluster of N nodes: its start, its steady window and its
// recycle phase. Per-node figures divide by N (the recycle phase by R).
type Result struct {
	Nodes   int    `json:"nodes"`
	Cluster string `json:"cluster"`
	Error   string `json:"error,omitempty"` // why the run stopped early; figures after it are zero

	// Start: from the first process start to every node answering /readyz 200.
	StartAllS            float64 `json:"start_all_in_service_s"`
	StartMedianS         float64 `json:"start_median_in_service_s"`
	StartZKPacketsPerKey float64 `json:"start_zk_packets_per_node"` // mntr zk_packets_received delta over the start / N

	// Steady window.
	WindowS              float64            `json:"window_s"`
	ZKPacketsPerNodeS    float64            `json:"zk_packets_per_node_s"` // zk_packets_received delta / N / s (reads, writes, pings)
	ZKReadsPerNodeS      float64            `json:"zk_reads_per_node_s"`   // zk_cnt_readlatency delta / N / s
	ZKWritesPerNodeS     float64            `json:"zk_writes_per_node_s"`  // zk_cnt_updatelatency delta / N / s
	ZKConnsPerNode       float64            `json:"zk_connections_per_node"`
	ZKWatchesMaxPerNode  float64            `json:"zk_watches_max_per_node"` // largest zk_watch_count seen in the window's samples / N
	ZKWatchesPerNode     float64            `json:"zk_watches_per_node"`     // zk_watch_count at the window's end / N
	ZKEphemeralsPerNode  float64            `json:"zk_ephemerals_per_node"`
	ZKOutstandingMax     float64            `json:"zk_outstanding_max"` // largest zk_outstanding_requests seen in the window's samples
	ZKZnodes             float64            `json:"zk_znodes"`
	ZKCPUPercent         float64            `json:"zk_cpu_percent"` // of one core, the ZooKeeper JVM over the window
	ZKRSSMiB             float64            `json:"zk_rss_mib"`
	TimeServedPerNodeS   float64            `json:"time_served_per_node_s"` // peer /time requests answered (snowflaked_requests_total{endpoint="time"})
	PeerRoundsPerNodeS   float64            `json:"peer_rounds_per_node_s"`
	PeerUnreachable      float64            `json:"peer_unreachable"` // failed /time requests in the window, all nodes
	FenceReportsPerNodeS float64            `json:"fence_reports_per_node_s"`
	NodeCPUPercentMean   float64            `json:"node_cpu_percent_mean"` // of one core
	NodeCPUPercentMax    float64            `json:"node_cpu_percent_max"`
	NodeRSSMiBMean       float64            `json:"node_rss_mib_mean"`
	NodeRSSMiBMax        float64            `json:"node_rss_mib_max"`
	MntrWindowStart      map[string]float64 `json:"mntr_window_start"`
	MntrWindowEnd        map[string]float64 `json:"mntr_window_end"`
	DriverMntrCalls      int                `json:"driver_mntr_calls_in_window"` // the driver's own mntr calls (each may count as a packet)

	// Recycle: R nodes stopped (SIGTERM) and retired, R new node keys started.
	Recycle Recycle `json:"recycle"`
}

// Recycle is the recycle phase of a Result.
type Recycle struct {
	Keys             int                `json:"keys"`             // R
	Recycled         int                `json:"recycled"`         // new keys that took one of the retired worker IDs
	StopS            float64            `json:"stop_s"`           // SIGTERM to all R exited
	RetireS          float64            `json:"retire_s"`         // snowflakectl node retire of the R keys, one after another
	AllInServiceS    float64            `json:"all_in_service_s"` // first new process start to all R in service
	MedianS          float64            `json:"median_in_service_s"`
	PacketsPerKey    float64            `json:"zk_packets_per_key"`     // zk_packets_received delta / R, raw
	PacketsPerKeyNet float64            `json:"zk_packets_per_key_net"` // minus the N-R running nodes' steady rate over the phase
	ReadsPerKey      float64            `json:"zk_reads_per_key"`
	ReadsPerKeyNet   float64            `json:"zk_reads_per_key_net"`
	WritesPerKey     float64            `json:"zk_writes_per_key"`
	WritesPerKeyNet  float64            `json:"zk_writes_per_key_net"`
	MntrStart        map[string]float64 `json:"mntr_start"`
	MntrEnd          map[string]float64 `json:"mntr_end"`
}

// Markdown renders the report: a header saying how it was run, a table of
// the steady state and a table of the recycle phase.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# snowflaked scale report\n\n")
	fmt.Fprintf(&b, "- started: %s\n", r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- host: %s\n", r.Host)
	fmt.Fprintf(&b, "- ZooKeeper: standalone, %s, on 127.0.0.1 (maxClientCnxns=0)\n", r.ZooKeeper)
	fmt.Fprintf(&b, "- snowflaked: %s, layout %s, every node: `%s`\n", r.Version, r.Layout, strings.Join(r.NodeFlags, " "))
	fmt.Fprintf(&b, "- steady window %gs, after %gs settling once all are in service\n", r.WindowS, r.SettleS)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n## Steady state, per node\n\n")
	b.WriteString("| N | all in service (s) | median (s) | ZK pkts/node/s | ZK reads/node/s | ZK writes/node/s | ZK conns/node | ZK watches/node (max) | ZK outstanding max | /time served/node/s | peer rounds/node/s | fence renewals/node/s | node CPU % (mean/max) | node RSS MiB (mean/max) | ZK CPU % | ZK RSS MiB |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %d | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.2f | %.3f | %.3f | %.2f / %.2f | %.1f / %.1f | %.1f | %.0f |\n",
			x.Nodes, x.StartAllS, x.StartMedianS, x.ZKPacketsPerNodeS, x.ZKReadsPerNodeS, x.ZKWritesPerNodeS,
			x.ZKConnsPerNode, x.ZKWatchesMaxPerNode, x.ZKOutstandingMax, x.TimeServedPerNodeS, x.PeerRoundsPerNodeS,
			x.FenceReportsPerNodeS, x.NodeCPUPercentMean, x.NodeCPUPercentMax, x.NodeRSSMiBMean, x.NodeRSSMiBMax,
			x.ZKCPUPercent, x.ZKRSSMiB)
	}
	b.WriteString("\n## Recycle: R nodes stopped and retired, R new node keys take their worker IDs\n\n")
	b.WriteString("| N | R | recycled | stop (s) | retire (s) | all in service (s) | median (s) | ZK pkts/key (raw / net) | ZK reads/key (raw / net) | ZK writes/key (raw / net) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Results {
		c := x.Recycle
		fmt.Fprintf(&b, "| %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f |\n",
			x.Nodes, c.Keys, c.Recycled, c.StopS, c.RetireS, c.AllInServiceS, c.MedianS,
			c.PacketsPerKey, c.PacketsPerKeyNet, c.ReadsPerKey, c.ReadsPerKeyNet, c.WritesPerKey, c.WritesPerKeyNet)
	}
	var errs []string
	for _, x := range r.Results {
		if x.Error != "" {
			errs = append(errs, fmt.Sprintf("- N=%d: %s", x.Nodes, truncate(x.Error, 600)))
		}
	}
	if len(errs) > 0 {
		b.WriteString("\n## Errors\n\n" + strings.Join(errs, "\n") + "\n")
	}
	b.WriteString("\n" + legend)
	return b.String()
}

// legend explains the columns under the tables.
const legend = `Columns: *all in service* is from the first process start to every node answering /readyz 200
(median: per node, from its own start). ZooKeeper figures come from mntr: *pkts* is
zk_packets_received (every request, pings included), *reads* zk_cnt_readlatency, *writes*
zk_cnt_updatelatency (multi counts once), deltas over the window divided by N and seconds; *conns*
is zk_num_alive_connections at the window's end, *watches* the largest zk_watch_count of the
window's samples (every 5 s), both divided by N; *outstanding max* the largest zk_outstanding_requests.
*/time served* is the nodes' snowflaked_requests_total{endpoint="time"} (peer clock checks
answered). CPU is utime+stime from /proc over the window, in percent of one core; RSS is VmRSS
at the window's end. Recycle *net* subtracts what the N-R running nodes send in the same time at
their steady-window rate.
`

// WriteFiles writes the report to dir/scale-report.md and
// dir/scale-report.json.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "scale-report.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "scale-report.md"), []byte(r.Markdown()), 0o644)
}
