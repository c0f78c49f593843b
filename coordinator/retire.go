package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// ErrUnknownNodeKey: no forever znode of the cluster belongs to the node
// key asked for.
var ErrUnknownNodeKey = errors.New("unknown node key")

// Retired is what Retire did.
type Retired struct {
	// WorkerIDs are the worker IDs the node key held, now free to recycle
	// at once (after their holder's fence).
	WorkerIDs []int64
	// Fence is the highest ZooKeeper fence of the retired znodes: the
	// next holder issues only after it.
	Fence snowflake.UnixMilli
	// Already is true when every one of them was retired before.
	Already bool
}

// maxRetireRounds bounds Retire's version-checked attempts.
const maxRetireRounds = 10

// Retire marks the forever znode(s) of nodeKey in cluster retired (the
// command behind snowflakectl node retire): their worker IDs may then be
// recycled before recycle-after, still only after the retired holder's
// ZooKeeper fence (the recycle multi reads it, version-checked, as for any
// take-over). One multi per attempt sets each znode (version-checked) and
// proves its lease absent (creates and deletes it); a lease held is
// ErrLeaseHeld naming the holder. A node key without a forever znode is
// ErrUnknownNodeKey; a missing cluster ErrNoCluster.
func (a *Admin) Retire(ctx context.Context, cluster, nodeKey string) (Retired, error) {
	if err := zkclient.ValidateNodeKey(nodeKey); err != nil {
		return Retired{}, fmt.Errorf("retire: %w: %v", ErrInvalidConfig, err)
	}
	ctx, cancel := clock.WithTimeout(ctx, a.timeout)
	defer cancel()
	z, err := a.session(ctx, cluster)
	if err != nil {
		return Retired{}, fmt.Errorf("retire: %w", err)
	}
	servers, auth := a.servers, a.auth
	p := newPaths(cluster)
	acl, _ := zkclient.ACLs(auth)
	for round := 1; round <= maxRetireRounds; round++ {
		res, ops, err := retireOps(ctx, z, p, cluster, nodeKey, acl, snowflake.UnixMilliOf(time.Now()), servers)
		if err != nil || len(ops) == 0 {
			return res, err
		}
		failed, err := z.Multi(ctx, ops...)
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, zk.ErrNodeExists):
			lp := ops[failed].(*zk.CreateRequest).Path
			b, st, gerr := z.Get(ctx, lp)
			if errors.Is(gerr, zk.ErrNoNode) {
				continue // released meanwhile: try again
			}
			holder := "an unknown holder"
			if gerr == nil {
				holder = describeHolder(b, st)
			}
			return Retired{}, fmt.Errorf("%w: node key %q cannot be retired: its worker ID's lease %s is held by %s; stop that node first (retire is for nodes that are gone)",
				ErrLeaseHeld, nodeKey, lp, holder)
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			continue // the znode changed (a renewal, a recycle): read again
		default:
			return Retired{}, fmt.Errorf("retire node key %q: %w", nodeKey, zkclient.Unavailable(zkclient.AuthHint(err)))
		}
	}
	return Retired{}, fmt.Errorf("retire node key %q: its forever znode kept changing (is the node running?)", nodeKey)
}

// retireOps reads nodeKey's forever znodes and builds the retire multi
// (no ops when there is nothing left to write).
func retireOps(ctx context.Context, z zkclient.Client, p paths, cluster, nodeKey string, acl []zk.ACL, now snowflake.UnixMilli, servers []string) (Retired, []any, error) {
	b, _, err := z.Get(ctx, p.cluster)
	if errors.Is(err, zk.ErrNoNode) {
		names, lerr := clusterNames(ctx, z)
		if lerr != nil {
			return Retired{}, nil, fmt.Errorf("retire: %w", zkclient.Unavailable(lerr))
		}
		return Retired{}, nil, fmt.Errorf("retire: %w", missingCluster(cluster, strings.Join(servers, ","), names))
	}
	if err != nil {
		return Retired{}, nil, fmt.Errorf("retire: read %s: %w", p.cluster, zkclient.Unavailable(err))
	}
	cd, err := decodeCluster(b)
	if err != nil {
		return Retired{}, nil, fmt.Errorf("retire: cluster znode %s holds data this release cannot use %s: %w", p.cluster, quoteShort(b), err)
	}
	names, err := z.Children(ctx, p.forever)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return Retired{}, nil, fmt.Errorf("retire: list %s: %w", p.forever, zkclient.Unavailable(err))
	}
	var res Retired
	var ops []any
	var keys []string
	found, already := false, true
	for _, n := range names {
		key, seq, err := parseForeverName(n)
		if err != nil {
			continue
		}
		if key != nodeKey {
			keys = append(keys, key)
			continue
		}
		found = true
		fb, st, err := z.Get(ctx, p.forever+"/"+n)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return Retired{}, nil, fmt.Errorf("retire: read %s/%s: %w", p.forever, n, zkclient.Unavailable(err))
		}
		node, err := decodeForeverNode(p, n, key, seq, fb, st, cd.WorkerIDs)
		if err != nil {
			return Retired{}, nil, fmt.Errorf("retire: %w; fix or delete it first", err)
		}
		if node.workerID == noWorker {
			continue
		}
		res.WorkerIDs = append(res.WorkerIDs, node.workerID)
		res.Fence = max(res.Fence, node.data.Fence, node.data.LastTS)
		if node.data.Retired > 0 {
			continue
		}
		already = false
		d := node.data
		wid := node.workerID
		d.WorkerID, d.Retired = &wid, now
		db, err := json.Marshal(d)
		if err != nil {
			return Retired{}, nil, fmt.Errorf("retire: encode forever data: %w", err)
		}
		lp := p.lease(node.workerID)
		ops = append(ops, &zk.SetDataRequest{Path: node.path, Data: db, Version: node.version},
			&zk.CreateRequest{Path: lp, Acl: acl}, &zk.DeleteRequest{Path: lp, Version: -1})
	}
	switch {
	case !found:
		slices.Sort(keys)
		keys = slices.Compact(keys)
		known := "it has no node keys"
		if len(keys) > 0 {
			known = "its node keys are " + strings.Join(keys, ", ")
		}
		return Retired{}, nil, fmt.Errorf("%w: cluster %q has no forever znode for node key %q (%s)", ErrUnknownNodeKey, cluster, nodeKey, known)
	case len(res.WorkerIDs) == 0:
		return Retired{}, nil, fmt.Errorf("node key %q of cluster %q holds no worker ID (taken over already): nothing to retire", nodeKey, cluster)
	}
	res.Already = already
	return res, ops, nil
}
