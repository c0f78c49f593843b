package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Bounds of a worker page (ListWorkerPage's limit).
const (
	// DefaultWorkerPageLimit is the page size of the status page when its
	// view names none.
	DefaultWorkerPageLimit = 100
	// MaxWorkerPageLimit is the largest page one view may ask for.
	MaxWorkerPageLimit = 1000
)

// DefaultWorkerPageTimeout bounds one listing of a worker page when its
// caller names no bound.
const DefaultWorkerPageTimeout = 3 * time.Second

// WorkerPage is one bounded page of a cluster's worker table.
type WorkerPage struct {
	// Workers are the page's rows, by worker ID (as ListWorkers sorts
	// them): the reading node's own forever znode first picked, then the
	// others in the order of their znode names.
	Workers []WorkerInfo
	// Total counts the cluster's forever znodes (a full listing's rows,
	// leases without a forever znode aside).
	Total int
	// Limit is the page size asked for.
	Limit int
}

// Connected reports whether the coordinator's ZooKeeper client has a
// session now. It makes no ZooKeeper call.
func (c *Coordinator) Connected() bool {
	conn := c.getConn()
	return conn != nil && conn.State() == zk.StateHasSession
}

// ListWorkerPage reads one page of the cluster's worker table over the
// coordinator's own session (no new one): this node's forever znode and
// others, limit rows in all (1..MaxWorkerPageLimit), with Total the count
// of every forever znode. It reads at most 2×limit+4 znodes, whatever the
// cluster's size: the cluster znode, the three lists (forever/, leases/,
// alive/), the page's forever znodes and the leases among them. Without a
// session it fails at once with ErrZKUnavailable (requests queued while
// disconnected would all go out at the reconnect). Unlike ListWorkers it
// does not look for leases no forever znode explains, nor for a worker ID
// two forever znodes outside the page name: `snowflakectl status` does.
func (c *Coordinator) ListWorkerPage(ctx context.Context, limit int) (WorkerPage, error) {
	if limit < 1 || limit > MaxWorkerPageLimit {
		return WorkerPage{}, fmt.Errorf("list workers: %w: limit %d outside 1..%d", ErrInvalidConfig, limit, MaxWorkerPageLimit)
	}
	conn := c.getConn()
	if conn == nil || conn.State() != zk.StateHasSession {
		state := "no client"
		if conn != nil {
			state = conn.State().String()
		}
		return WorkerPage{}, fmt.Errorf("list workers: %w: the node's ZooKeeper session is not connected (%s)", ErrZKUnavailable, state)
	}
	c.mu.Lock()
	own := c.st.path
	c.mu.Unlock()
	z := zkclient.Client{Conn: conn, Timeout: c.opTimeout}
	pg, err := listWorkerPage(ctx, z, c.p, c.cfg.Cluster, own, limit)
	if err != nil {
		return WorkerPage{}, fmt.Errorf("list workers: %w", zkclient.Unavailable(err))
	}
	return pg, nil
}

// listWorkerPage reads one page of the worker table (see ListWorkerPage);
// own is the reading node's forever znode path ("" for none).
func listWorkerPage(ctx context.Context, z zkclient.Client, p paths, cluster, own string, limit int) (WorkerPage, error) {
	cd, err := readClusterData(ctx, z, p, cluster)
	if err != nil {
		return WorkerPage{}, err
	}
	names, err := z.Children(ctx, p.forever)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return WorkerPage{}, fmt.Errorf("list %s: %w", p.forever, err)
	}
	pg := WorkerPage{Total: len(names), Limit: limit}
	slices.Sort(names)
	if ownName := path.Base(own); own != "" {
		if i := slices.Index(names, ownName); i > 0 {
			names = slices.Insert(slices.Delete(names, i, i+1), 0, ownName)
		}
	}
	names = names[:min(len(names), limit)]
	rows, claimed, err := foreverRows(ctx, z, p, names, cd.WorkerIDs)
	if err != nil {
		return WorkerPage{}, err
	}
	if pg.Workers, err = markEphemerals(ctx, z, p, cd.Layout.MaxWorkerID(), rows, claimed, false); err != nil {
		return WorkerPage{}, err
	}
	slices.SortFunc(pg.Workers, compareRows)
	return pg, nil
}

// foreverRow is the row of forever znode name (key, seq) as read in got.
func foreverRow(p paths, name, key string, seq int64, got *zkclient.GetResult, ids WorkerRange, now snowflake.UnixMilli) WorkerInfo {
	node, derr := decodeForeverNode(p, name, key, seq, got.Data, got.Stat, ids)
	row := WorkerInfo{WorkerID: node.workerID, NodeKey: key, Path: node.path, Addr: node.data.Addr, Version: node.data.Version,
		LastReport: node.data.LastTS, LastReportAgeMs: -1, Fence: node.data.Fence, Token: node.data.Token, Stopped: node.data.Stopped, ReportedReason: node.data.Reason,
		Retired: node.data.Retired}
	if node.data.LastTS > 0 {
		last := node.data.LastTS
		// The znode's mtime is a report's only when the node itself wrote
		// last (a report or its claim: updated is then its last_ts); a
		// retire or another node's take-over writes it too.
		own := node.data.Updated == node.data.LastTS && node.data.Retired == 0 && node.data.RecycledTo == "" && node.workerID != noWorker
		if own && got.Stat != nil && got.Stat.Mtime > 0 {
			mtime := snowflake.UnixMilli(got.Stat.Mtime) // ZooKeeper's mtime is in milliseconds since the Unix epoch
			last = max(last, mtime)
			row.ReportSkewMs = node.data.LastTS.Sub(mtime).Milliseconds()
		}
		row.LastReportAgeMs = max(now.Sub(last).Milliseconds(), 0)
	}
	if derr != nil {
		row.Problem = derr.Error()
	}
	return row
}

// compareRows orders worker rows by worker ID (rows without one last),
// then node key and path.
func compareRows(a, b WorkerInfo) int {
	ai, bi := a.WorkerID, b.WorkerID
	if ai < 0 {
		ai = 1 << 62
	}
	if bi < 0 {
		bi = 1 << 62
	}
	return cmp.Or(cmp.Compare(ai, bi), cmp.Compare(a.NodeKey, b.NodeKey), cmp.Compare(a.Path, b.Path))
}
