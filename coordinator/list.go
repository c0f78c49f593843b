package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// WorkerInfo is one row of `snowflakectl status`.
type WorkerInfo struct {
	// WorkerID is -1 for a forever znode that holds no worker ID (taken over
	// by another node key, or waiting to recycle one).
	WorkerID int64  `json:"worker_id"`
	NodeKey  string `json:"node_key"`
	Path     string `json:"path,omitempty"` // the forever znode
	Addr     string `json:"addr"`
	// Version is the version the node was built as, from its forever
	// znode ("" for nodes that predate it).
	Version string `json:"version,omitempty"`
	// LeaseHeld: leases/<id> exists. LeaseHolder names its holder when that
	// is not this row's node key.
	LeaseHeld   bool   `json:"lease_held"`
	LeaseHolder string `json:"lease_holder,omitempty"`
	// InService: alive/<id> exists.
	InService bool `json:"in_service"`
	// LastReport (by the node's clock, 0: never) and its age (-1:
	// never): how long ago ZooKeeper took the node's last report (the
	// forever znode's mtime when the node wrote it last), or the report's
	// own time if that is more recent, so a node whose clock is behind
	// still shows as reporting.
	LastReport      snowflake.UnixMilli `json:"last_report_ms"`
	LastReportAgeMs int64               `json:"last_report_age_ms"`
	// ReportSkewMs is the last report's time less ZooKeeper's time of its
	// write (the znode's mtime): about 0 for a node whose clock agrees
	// with ZooKeeper's, -10000 for one 10 s behind.
	ReportSkewMs int64 `json:"report_skew_ms,omitempty"`
	// Fence is the ZooKeeper fence: its holder issues no ID beyond it;
	// Token the instance token it was granted to.
	Fence snowflake.UnixMilli `json:"fence_ms"`
	Token string              `json:"token,omitempty"`
	// Stopped: the last write to the forever znode was the final fence of
	// a clean stop.
	Stopped bool `json:"stopped,omitempty"`
	// Retired (when, 0: not): snowflakectl node retire freed the
	// worker ID for recycling at once.
	Retired snowflake.UnixMilli `json:"retired_ms,omitempty"`
	// ReportedReason is why the node was out of service at its last report
	// ("" when in service then, or a node that predates it).
	ReportedReason string `json:"reported_reason,omitempty"`
	// Problem describes malformed or inconsistent znodes ("" when fine).
	Problem string `json:"problem,omitempty"`
}

// reportSkewNoted is the report skew ClockNote mentions: more than a
// write's latency and the clock checks' own tolerances.
const reportSkewNoted = 2 * time.Second

// ClockNote says how far the node's clock was from ZooKeeper's at its last
// report, when that is notable ("" otherwise): "its clock is 10.0s behind
// ZooKeeper's".
func (w WorkerInfo) ClockNote() string {
	d := time.Duration(w.ReportSkewMs) * time.Millisecond
	switch {
	case w.LastReportAgeMs < 0 || d.Abs() < reportSkewNoted:
		return ""
	case d < 0:
		return fmt.Sprintf("its clock is %.1fs behind ZooKeeper's", -d.Seconds())
	}
	return fmt.Sprintf("its clock is %.1fs ahead of ZooKeeper's", d.Seconds())
}

// ListWorkers reads a cluster's table for `snowflakectl status`: one row per
// forever znode plus rows for leases no forever znode explains (reading
// needs no credentials). The Admin's timeout bounds the whole call.
// Malformed znodes become rows with Problem set.
func (a *Admin) ListWorkers(ctx context.Context, cluster string) ([]WorkerInfo, error) {
	_, rows, err := a.ReadCluster(ctx, cluster)
	return rows, err
}

// ReadCluster is ListWorkers that also returns the cluster's shared
// settings, read from the same cluster znode.
func (a *Admin) ReadCluster(ctx context.Context, cluster string) (Settings, []WorkerInfo, error) {
	ctx, cancel := clock.WithTimeout(ctx, a.timeout)
	defer cancel()
	// No check that the cluster exists first: listWorkers reads its znode
	// and says so.
	z, err := a.session(ctx, cluster)
	if err != nil {
		return Settings{}, nil, fmt.Errorf("list workers: %w", err)
	}
	p := newPaths(cluster)
	cd, rows, err := listWorkers(ctx, z, p, cluster)
	if err != nil {
		return Settings{}, nil, fmt.Errorf("list workers: %w", zkclient.Unavailable(err))
	}
	ra := "not recorded"
	if cd.RecycleAfterMs > 0 {
		ra = (time.Duration(cd.RecycleAfterMs) * time.Millisecond).String()
	}
	return Settings{Layout: cd.Layout, WorkerIDs: cd.WorkerIDs.String(), RecycleAfter: ra}, rows, nil
}

// Settings are what a cluster's nodes share, as its cluster znode holds
// them.
type Settings struct {
	Layout       snowflake.Layout `json:"layout"`
	WorkerIDs    string           `json:"worker_id_range"` // LO-HI
	RecycleAfter string           `json:"recycle_after"`
}

func listWorkers(ctx context.Context, z zkclient.Client, p paths, cluster string) (clusterData, []WorkerInfo, error) {
	cd, err := readClusterData(ctx, z, p, cluster)
	if err != nil {
		return clusterData{}, nil, err
	}
	names, err := z.Children(ctx, p.forever)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return clusterData{}, nil, fmt.Errorf("list %s: %w", p.forever, err)
	}
	rows, claimed, err := foreverRows(ctx, z, p, names, cd.WorkerIDs)
	if err != nil {
		return clusterData{}, nil, err
	}
	if rows, err = markEphemerals(ctx, z, p, cd.Layout.MaxWorkerID(), rows, claimed, true); err != nil {
		return clusterData{}, nil, err
	}
	slices.SortFunc(rows, compareRows)
	return cd, rows, nil
}

// readClusterData reads and decodes cluster's znode.
func readClusterData(ctx context.Context, z zkclient.Client, p paths, cluster string) (clusterData, error) {
	b, _, err := z.Get(ctx, p.cluster)
	if errors.Is(err, zk.ErrNoNode) {
		return clusterData{}, fmt.Errorf("cluster %q does not exist in ZooKeeper (no %s)", cluster, p.cluster)
	}
	if err != nil {
		return clusterData{}, fmt.Errorf("read %s: %w", p.cluster, err)
	}
	cd, err := decodeCluster(b)
	if err != nil {
		return clusterData{}, fmt.Errorf("cluster znode %s holds malformed data %s: %v", p.cluster, quoteShort(b), err)
	}
	return cd, nil
}

// foreverRows reads the forever znodes named (children of forever/) as
// rows, in that order: a name that does not parse is a row with its
// problem, a znode deleted since the listing none, and a worker ID an
// earlier row names is flagged. claimed maps each worker ID to its row.
func foreverRows(ctx context.Context, z zkclient.Client, p paths, names []string, ids WorkerRange) (rows []WorkerInfo, claimed map[int64]int, err error) {
	now := snowflake.UnixMilliOf(time.Now())
	type named struct {
		name, key string
		seq       int64
	}
	var good []named
	var fpaths []string
	for _, n := range names {
		key, seq, err := parseForeverName(n)
		if err != nil {
			rows = append(rows, WorkerInfo{WorkerID: noWorker, Path: p.forever + "/" + n, LastReportAgeMs: -1, Problem: err.Error()})
			continue
		}
		good = append(good, named{n, key, seq})
		fpaths = append(fpaths, p.forever+"/"+n)
	}
	got, err := z.GetMany(ctx, fpaths)
	if err != nil {
		return nil, nil, err
	}
	claimed = map[int64]int{} // worker ID → row index
	for i, n := range good {
		if got[i] == nil {
			continue // deleted since the list
		}
		row := foreverRow(p, n.name, n.key, n.seq, got[i], ids, now)
		if id := row.WorkerID; row.Problem == "" && id != noWorker {
			if j, dup := claimed[id]; dup {
				row.Problem = fmt.Sprintf("worker ID %d is also named by %s", id, rows[j].Path)
			} else {
				claimed[id] = len(rows)
			}
		}
		rows = append(rows, row)
	}
	return rows, claimed, nil
}

// markEphemerals fills LeaseHeld/LeaseHolder/InService from leases/ and
// alive/. With all, it reads every lease and adds rows for leases no
// forever znode explains; without, it reads only the leases of the worker
// IDs the rows claim (a page's: no more reads than rows).
func markEphemerals(ctx context.Context, z zkclient.Client, p paths, maxID int64, rows []WorkerInfo, claimed map[int64]int, all bool) ([]WorkerInfo, error) {
	leases, err := z.Children(ctx, p.leases)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("list %s: %w", p.leases, err)
	}
	var ids []int64
	var lpaths []string
	for _, n := range leases {
		id, err := parseWorkerName(n, maxID)
		if err != nil {
			continue
		}
		if _, ok := claimed[id]; ok || all {
			ids = append(ids, id)
			lpaths = append(lpaths, p.lease(id))
		}
	}
	got, err := z.GetMany(ctx, lpaths)
	if err != nil {
		return nil, err
	}
	for i, g := range got {
		if g == nil {
			continue
		}
		j, ok := claimed[ids[i]]
		if !ok {
			rows = append(rows, WorkerInfo{WorkerID: ids[i], LeaseHeld: true, LastReportAgeMs: -1,
				LeaseHolder: describeHolder(g.Data, g.Stat), Problem: "lease without a forever znode naming this worker ID"})
			claimed[ids[i]] = len(rows) - 1
			continue
		}
		rows[j].LeaseHeld = true
		if d, err := decodeLease(g.Data); err != nil || d.NodeKey != rows[j].NodeKey {
			rows[j].LeaseHolder = describeHolder(g.Data, g.Stat)
		}
	}
	alive, err := z.Children(ctx, p.alive)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("list %s: %w", p.alive, err)
	}
	for _, n := range alive {
		if id, err := parseWorkerName(n, maxID); err == nil {
			if j, ok := claimed[id]; ok {
				rows[j].InService = true
			}
		}
	}
	return rows, nil
}
