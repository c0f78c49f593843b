package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// maxDeleteZnodes bounds the subtree DeleteCluster removes.
const maxDeleteZnodes = 1_000_000

// deleteClockMargin is how far this machine's clock may be ahead of a
// node's without DeleteCluster taking a fence that is still ahead for
// that node as passed.
const deleteClockMargin = 5 * time.Second

// DeleteCluster removes cluster's whole subtree (the command behind
// snowflakectl cluster delete). First it marks the cluster znode as being
// deleted (version-checked; no release joins such a cluster), then it
// checks that no worker holds a lease, that no worker's ZooKeeper fence
// is still ahead of the clock (a node cut off from ZooKeeper, its lease
// gone, may issue up to that fence) and that no node holds ranges of a
// segment tag, and only then deletes, the leases first and the cluster
// znode last. Before anything of the cluster's data goes it writes the
// tombstones: the cluster's (the highest fence, the layout) and each
// tag's (its max_id), which a cluster or tag created again under the name
// starts after. A refusal (ErrLeaseHeld, naming the
// holders or the fence) restores the cluster znode as it was; a delete
// that fails half-way leaves the mark, so nothing joins what is left and
// running the command again finishes it. A cluster that does not exist is
// ErrNoCluster.
func (a *Admin) DeleteCluster(ctx context.Context, cluster string) error {
	ctx, cancel := clock.WithTimeout(ctx, a.timeout)
	defer cancel()
	z, err := a.session(ctx, cluster)
	if err != nil {
		return fmt.Errorf("delete cluster %q: %w", cluster, err)
	}
	servers, auth := a.servers, a.auth
	p := newPaths(cluster)
	if ok, _, err := z.Exists(ctx, p.cluster); err != nil {
		return fmt.Errorf("delete cluster %q: %w", cluster, zkclient.Unavailable(err))
	} else if !ok {
		names, err := clusterNames(ctx, z)
		if err != nil {
			return fmt.Errorf("delete cluster %q: %w", cluster, zkclient.Unavailable(err))
		}
		return missingCluster(cluster, strings.Join(servers, ","), names)
	}
	// The tombstones must be writable before anything is marked: a
	// refusal half-way would leave the cluster marked and its leases gone.
	if err := tombstonesWritable(ctx, z, cluster, auth); err != nil {
		return fmt.Errorf("delete cluster %q: %w", cluster, err)
	}
	restore, err := markDeleting(ctx, z, p, cluster)
	if err != nil {
		return err
	}
	if err := deletable(ctx, z, p, cluster); err != nil {
		if rerr := restore(); rerr != nil {
			return fmt.Errorf("%w (and the cluster znode stays marked as being deleted, so no node joins it: %v; run cluster delete again once it may go)", err, rerr)
		}
		return err
	}
	// leases/ goes first and only empty: a node whose start passed its
	// cluster check before the mark and whose lease landed after the check
	// above makes it fail, and no lease can be created once it is gone.
	// A claim that committed meanwhile without a lease wrote a fence ahead:
	// the second check sees it.
	if err := z.Delete(ctx, p.leases, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete cluster %q: delete %s: %w (a node joined while it was checked; the cluster stays marked as being deleted, so no other node joins it: run cluster delete again once that node is stopped)",
			cluster, p.leases, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	if err := deletable(ctx, z, p, cluster); err != nil {
		return fmt.Errorf("%w (the cluster stays marked as being deleted, so no node joins it; run cluster delete again)", err)
	}
	// The tombstones go first, then exactly the versions they were read
	// from: a forever znode renewed, or a tag allocated from, after its
	// read fails the delete, and the next run reads it again.
	if err := buryCluster(ctx, z, p, cluster, auth); err != nil {
		return fmt.Errorf("delete cluster %q: %w (the cluster stays marked as being deleted, so no node joins it; run cluster delete again)", cluster, err)
	}
	budget := maxDeleteZnodes
	if err := deleteTree(ctx, z, p.cluster, &budget); err != nil {
		return fmt.Errorf("delete cluster %q: %w (the cluster stays marked as being deleted, so no node joins it; run cluster delete again)", cluster, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	return nil
}

// markDeleting makes the cluster znode require FeatureDeleting,
// version-checked, and returns how to undo it (a version-checked write of
// the data it replaced; a no-op when the mark was there already, left by a
// delete that failed half-way).
func markDeleting(ctx context.Context, z zkclient.Client, p paths, cluster string) (restore func() error, err error) {
	for round := 1; round <= maxClusterRounds; round++ {
		b, st, err := z.Get(ctx, p.cluster)
		if err != nil {
			return nil, fmt.Errorf("delete cluster %q: read %s: %w", cluster, p.cluster, zkclient.Unavailable(err))
		}
		if markedDeleting(b) {
			return func() error { return errors.New("it was marked before this run") }, nil
		}
		d, err := decodeCluster(b)
		if err != nil {
			return nil, fmt.Errorf("delete cluster %q: its znode holds data this release cannot use %s: %w", cluster, quoteShort(b), err)
		}
		mb, err := json.Marshal(d.withFeatures(zkclient.FeatureDeleting))
		if err != nil {
			return nil, fmt.Errorf("delete cluster %q: encode: %w", cluster, err)
		}
		mst, err := z.Set(ctx, p.cluster, mb, st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("delete cluster %q: mark %s: %w", cluster, p.cluster, zkclient.Unavailable(zkclient.AuthHint(err)))
		}
		return func() error {
			if _, err := z.Set(ctx, p.cluster, b, mst.Version); err != nil {
				return fmt.Errorf("restore %s: %w", p.cluster, err)
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("delete cluster %q: its znode kept changing", cluster)
}

// markedDeleting reports whether cluster znode data carries the mark.
func markedDeleting(b []byte) bool {
	var raw struct {
		Requires []string `json:"requires"`
	}
	return json.Unmarshal(b, &raw) == nil && slices.Contains(raw.Requires, zkclient.FeatureDeleting)
}

// deletable is ErrLeaseHeld while any worker of the cluster holds a lease
// or has a ZooKeeper fence still ahead of the clock, or a node holds
// ranges of a segment tag.
func deletable(ctx context.Context, z zkclient.Client, p paths, cluster string) error {
	if err := noSegmentHolders(ctx, z, p, cluster); err != nil {
		return err
	}
	leases, err := z.Children(ctx, p.leases)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete cluster %q: list %s: %w", cluster, p.leases, zkclient.Unavailable(err))
	}
	if len(leases) > 0 {
		var holders []string
		for _, l := range leases {
			b, st, err := z.Get(ctx, p.leases+"/"+l)
			if err != nil {
				holders = append(holders, "worker "+l)
				continue
			}
			holders = append(holders, fmt.Sprintf("worker %s: %s", l, describeHolder(b, st)))
		}
		return fmt.Errorf("%w: cluster %q still has %d leased worker(s) (%s): stop its nodes first", ErrLeaseHeld, cluster, len(leases), strings.Join(holders, "; "))
	}
	names, err := z.Children(ctx, p.forever)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete cluster %q: list %s: %w", cluster, p.forever, zkclient.Unavailable(err))
	}
	now := snowflake.UnixMilliOf(time.Now().Add(-deleteClockMargin))
	for _, n := range names {
		b, _, err := z.Get(ctx, p.forever+"/"+n)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete cluster %q: read %s/%s: %w", cluster, p.forever, n, zkclient.Unavailable(err))
		}
		var d foreverData
		if err := json.Unmarshal(b, &d); err != nil {
			return fmt.Errorf("%w: cluster %q: %s/%s holds malformed data %s (%v): its fence cannot be read for the tombstone; fix it by hand first",
				ErrLeaseHeld, cluster, p.forever, n, quoteShort(b), err)
		}
		if d.Fence > now {
			return fmt.Errorf("%w: cluster %q: %s may still issue IDs until its ZooKeeper fence %s (a node killed or cut off from ZooKeeper): try again %v after it",
				ErrLeaseHeld, cluster, n, d.Fence.Time().Format(time.RFC3339Nano), deleteClockMargin)
		}
	}
	return nil
}

// deleteTree deletes path and everything under it, children first; budget
// bounds the znodes visited. A lease created meanwhile makes it fail
// (leases/ is then not empty).
func deleteTree(ctx context.Context, z zkclient.Client, path string, budget *int) error {
	if *budget--; *budget < 0 {
		return fmt.Errorf("more than %d znodes under the cluster", maxDeleteZnodes)
	}
	kids, err := z.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", path, err)
	}
	for _, k := range kids {
		if err := deleteTree(ctx, z, path+"/"+k, budget); err != nil {
			return err
		}
	}
	if err := z.Delete(ctx, path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete %s: %w", path, err)
	}
	return nil
}

// segmentsPath is the parent of cluster's segment tags (segment.ZKStore's
// layout).
func (p paths) segments() string { return p.cluster + "/segments" }

// maxHoldersNamed bounds the holders a refusal names.
const maxHoldersNamed = 10

// noSegmentHolders is ErrLeaseHeld while any node has a holder record of a
// segment tag (an ephemeral znode of its segment session: it holds ranges
// and may serve them), naming the nodes and the ranges.
func noSegmentHolders(ctx context.Context, z zkclient.Client, p paths, cluster string) error {
	tags, err := z.Children(ctx, p.segments())
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete cluster %q: list %s: %w", cluster, p.segments(), zkclient.Unavailable(err))
	}
	slices.Sort(tags)
	var named []string
	count := 0
	for _, tag := range tags {
		dir := p.segments() + "/" + tag + "/holders"
		holders, err := z.Children(ctx, dir)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete cluster %q: list %s: %w", cluster, dir, zkclient.Unavailable(err))
		}
		slices.Sort(holders)
		for _, h := range holders {
			count++
			if len(named) >= maxHoldersNamed {
				continue
			}
			b, _, err := z.Get(ctx, dir+"/"+h)
			var rec struct {
				Held []struct{ Lo, Hi int64 } `json:"held"`
			}
			what := "ranges unknown"
			if err == nil && json.Unmarshal(b, &rec) == nil {
				rs := make([]string, 0, len(rec.Held))
				for _, r := range rec.Held {
					rs = append(rs, fmt.Sprintf("[%d,%d)", r.Lo, r.Hi))
				}
				what = "ranges " + strings.Join(rs, " ")
			}
			name, err := zkclient.UnescapeName(h)
			if err != nil {
				name = h
			}
			named = append(named, fmt.Sprintf("tag %s: node %s (%s)", tag, name, what))
		}
	}
	if count == 0 {
		return nil
	}
	more := ""
	if count > len(named) {
		more = fmt.Sprintf(" and %d more", count-len(named))
	}
	return fmt.Errorf("%w: cluster %q: %d node(s) hold dense-ID ranges and may serve them (%s%s): stop them first (a clean stop returns the ranges and drops the record)",
		ErrLeaseHeld, cluster, count, strings.Join(named, "; "), more)
}

// buryCluster writes cluster's tombstones, then deletes its forever znodes
// and segment tags at exactly the versions the tombstones were read from.
// The cluster's fence is the highest of every worker's ZooKeeper fence,
// previous holder's fence and last reported timestamp, and of the
// cluster's own fence floor; each tag's is its max_id.
func buryCluster(ctx context.Context, z zkclient.Client, p paths, cluster, auth string) error {
	cb, _, err := z.Get(ctx, p.cluster)
	if err != nil {
		return fmt.Errorf("read %s: %w", p.cluster, zkclient.Unavailable(err))
	}
	// The mark makes decodeCluster refuse the data: read it without.
	cd, err := decodeCluster(unmarked(cb))
	if err != nil {
		return fmt.Errorf("%s holds data this release cannot use %s: %w", p.cluster, quoteShort(cb), err)
	}
	acl, rootACL := zkclient.ACLs(auth)
	if err := zkclient.EnsureTombstoneParents(ctx, z, cluster, acl, rootACL); err != nil {
		return err
	}
	t := Tombstone{Cluster: cluster, Fence: cd.FenceFloor, Layout: cd.Layout, WorkerIDs: cd.WorkerIDs.String(),
		Incarnation: cd.Incarnation, Deleted: snowflake.UnixMilliOf(time.Now())}
	names, err := z.Children(ctx, p.forever)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("list %s: %w", p.forever, zkclient.Unavailable(err))
	}
	versions := map[string]int32{}
	for _, n := range names {
		b, st, err := z.Get(ctx, p.forever+"/"+n)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s/%s: %w", p.forever, n, zkclient.Unavailable(err))
		}
		var d foreverData
		if err := json.Unmarshal(b, &d); err != nil {
			return fmt.Errorf("%s/%s holds malformed data %s: fix or delete it by hand first (its fence cannot be read for the tombstone): %v", p.forever, n, quoteShort(b), err)
		}
		t.Fence = max(t.Fence, d.Fence, d.PrevFence, d.LastTS)
		versions[p.forever+"/"+n] = st.Version
	}
	tags, err := buryTags(ctx, z, p, cluster, acl)
	if err != nil {
		return err
	}
	if err := writeTombstone(ctx, z, t, acl); err != nil {
		return err
	}
	maps.Copy(versions, tags)
	for _, path := range slices.Sorted(maps.Keys(versions)) {
		budget := maxDeleteZnodes
		if err := deleteChildren(ctx, z, path, &budget); err != nil {
			return err
		}
		if err := z.Delete(ctx, path, versions[path]); errors.Is(err, zk.ErrBadVersion) {
			return fmt.Errorf("%s changed while the cluster was deleted (a node cut off from ZooKeeper came back?): its tombstone may be short of it", path)
		} else if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("delete %s: %w", path, zkclient.Unavailable(zkclient.AuthHint(err)))
		}
	}
	return nil
}

// buryTags writes a tombstone for each segment tag of the cluster (its
// max_id) and returns the tag znodes with the versions read.
func buryTags(ctx context.Context, z zkclient.Client, p paths, cluster string, acl []zk.ACL) (map[string]int32, error) {
	tags, err := z.Children(ctx, p.segments())
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p.segments(), zkclient.Unavailable(err))
	}
	out := map[string]int32{}
	for _, tag := range tags {
		path := p.segments() + "/" + tag
		v, ok, err := zkclient.BuryTag(ctx, z, cluster, tag, path, acl)
		if err != nil {
			return nil, err
		}
		if ok {
			out[path] = v
		}
	}
	return out, nil
}

// deleteChildren deletes everything under path (not path itself).
func deleteChildren(ctx context.Context, z zkclient.Client, path string, budget *int) error {
	kids, err := z.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", path, zkclient.Unavailable(err))
	}
	for _, k := range kids {
		if err := deleteTree(ctx, z, path+"/"+k, budget); err != nil {
			return zkclient.Unavailable(zkclient.AuthHint(err))
		}
	}
	return nil
}

// unmarked is cluster znode data without the deleting mark.
func unmarked(b []byte) []byte {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return b
	}
	var req []string
	if json.Unmarshal(raw["requires"], &req) != nil {
		return b
	}
	req = slices.DeleteFunc(req, func(f string) bool { return f == zkclient.FeatureDeleting })
	if len(req) == 0 {
		// A cluster of the flat shape, nested by the mark alone: the
		// nested shape needs a requires list, and every cluster of this
		// release requires tag incarnations, which changes nothing read
		// here (layout, range, floor, incarnation).
		req = []string{zkclient.FeatureTagIncarnation}
	}
	rb, err := json.Marshal(req)
	if err != nil {
		return b
	}
	raw["requires"] = rb
	out, err := json.Marshal(raw)
	if err != nil {
		return b
	}
	return out
}

// tombstonesWritable makes sure cluster's tombstone znodes exist and that
// none of them, the tags' included, lets anyone change it when the
// cluster's ACL does not (zkclient.ErrOpenTombstone) or belongs to other
// credentials (zkclient.ErrForeignTombstone).
func tombstonesWritable(ctx context.Context, z zkclient.Client, cluster, auth string) error {
	acl, rootACL := zkclient.ACLs(auth)
	if err := zkclient.EnsureTombstoneParents(ctx, z, cluster, acl, rootACL); err != nil {
		return err
	}
	tags, err := z.Children(ctx, zkclient.TagTombstonesPath(cluster))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("list %s: %w", zkclient.TagTombstonesPath(cluster), zkclient.Unavailable(err))
	}
	for _, t := range tags {
		if err := zkclient.CheckTombstoneACL(ctx, z, zkclient.TagTombstonePath(cluster, t), acl); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	// A digest ACL of other credentials: a write is refused with NoAuth.
	if _, err := z.Set(ctx, zkclient.TagTombstonesPath(cluster), nil, -1); errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("%w: %s: the tombstones of cluster %q were written under other credentials than these (--zk-auth): use those", zkclient.ErrForeignTombstone, zkclient.TagTombstonesPath(cluster), cluster)
	} else if err != nil {
		return fmt.Errorf("write %s: %w", zkclient.TagTombstonesPath(cluster), zkclient.Unavailable(err))
	}
	return nil
}
