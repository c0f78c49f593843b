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

// ErrTombstone: a cluster would be created over the tombstone of a deleted
// one with settings under which the deleted cluster's IDs could be issued
// again. It wraps ErrClusterMismatch (exit 2).
var ErrTombstone = fmt.Errorf("%w: a deleted cluster's IDs could be issued again", ErrClusterMismatch)

// Tombstone is what snowflakectl cluster delete leaves of a cluster
// (zkclient.TombstonePath): what a cluster created again under its name
// must start after. It is kept until snowflakectl cluster purge forgets it
// on purpose; a second delete of the name merges into it (the higher fence
// stays).
type Tombstone struct {
	Cluster string `json:"cluster"`
	// Fence is the highest fence any worker of the deleted
	// cluster wrote to ZooKeeper, or reported as its last timestamp: no ID
	// of it has a later time.
	Fence snowflake.UnixMilli `json:"fence_ms"`
	// Layout is the deleted cluster's layout (bits, epoch, unit, gene bits).
	Layout snowflake.Layout `json:"layout"`
	// WorkerIDs is its worker-ID range, LO-HI.
	WorkerIDs string `json:"worker_id_range"`
	// Incarnation is the deleted cluster's incarnation.
	Incarnation string `json:"incarnation,omitempty"`
	// Deleted is when the delete wrote the tombstone.
	Deleted snowflake.UnixMilli `json:"deleted_ms"`
}

// readTombstone reads cluster's tombstone; ok is false when there is none
// (no znode, or one without data: the parent of tag tombstones of a
// cluster never deleted).
func readTombstone(ctx context.Context, z zkclient.Client, cluster string) (t Tombstone, ok bool, version int32, err error) {
	b, st, err := z.Get(ctx, zkclient.TombstonePath(cluster))
	if errors.Is(err, zk.ErrNoNode) {
		return Tombstone{}, false, -1, nil
	}
	if err != nil {
		return Tombstone{}, false, 0, fmt.Errorf("read the tombstone of cluster %q: %w", cluster, zkclient.Unavailable(err))
	}
	if len(b) == 0 {
		return Tombstone{}, false, st.Version, nil
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return Tombstone{}, false, 0, fmt.Errorf("the tombstone of cluster %q (%s) holds data this release cannot use %s: %w",
			cluster, zkclient.TombstonePath(cluster), quoteShort(b), err)
	}
	return t, true, st.Version, nil
}

// writeTombstone records t as cluster's tombstone, merged with one already
// there (a name deleted before: the higher fence stays), version-checked.
// Its znode must exist (zkclient.EnsureTombstoneParents).
func writeTombstone(ctx context.Context, z zkclient.Client, t Tombstone, acl []zk.ACL) error {
	return zkclient.MergeTombstone(ctx, z, zkclient.TombstonePath(t.Cluster), acl, func(old []byte) ([]byte, error) {
		if len(old) > 0 {
			var o Tombstone
			if err := json.Unmarshal(old, &o); err != nil {
				return nil, fmt.Errorf("the tombstone of cluster %q holds data this release cannot use %s: %w", t.Cluster, quoteShort(old), err)
			}
			t.Fence = max(t.Fence, o.Fence)
		}
		return json.Marshal(t)
	})
}

// createdOverTombstone returns want as the cluster created now under
// cluster's name: over its tombstone (overTombstone) unless ignore, which
// ignored then reports. guard goes into the create's multi: a delete that
// buries the name after this read makes the create fail, to be tried
// again (zkclient.TombstoneGuard).
func createdOverTombstone(ctx context.Context, z zkclient.Client, cluster string, want clusterData, ignore bool, acl, rootACL []zk.ACL) (
	_ clusterData, guard []any, ignored bool, err error) {
	// The tombstone's znode exists from here on (empty: none), so the
	// guard is a version check, which needs no right on the root.
	if err := zkclient.EnsureTombstoneParents(ctx, z, cluster, acl, rootACL); err != nil {
		return want, nil, false, err
	}
	tomb, buried, version, err := readTombstone(ctx, z, cluster)
	if err != nil {
		return want, nil, false, err
	}
	guard = zkclient.TombstoneGuard(zkclient.TombstonePath(cluster), version, acl)
	switch {
	case buried && ignore:
		return want, guard, true, nil
	case buried:
		want, err = overTombstone(cluster, want, tomb)
	}
	return want, guard, false, err
}

// overTombstone returns want as a cluster created over tombstone t: every
// claim starts after t's fence (FenceFloor, with the feature that makes
// older releases refuse to join). Settings under which an ID of the
// deleted cluster could come back are ErrTombstone naming both: a time
// field at another place or of another length or unit (the same number
// would read as another time), or a later epoch (the same time field would
// stand for a later time, past the fence). An earlier epoch, another
// worker-ID range or other gene bits are safe: every new ID's time field
// is above every old one's.
func overTombstone(cluster string, want clusterData, t Tombstone) (clusterData, error) {
	o, n := t.Layout, want.Layout
	var diff []string
	if o.TimeBits != n.TimeBits || o.WorkerBits+o.SequenceBits != n.WorkerBits+n.SequenceBits {
		diff = append(diff, fmt.Sprintf("layout %s (the time field at bits %d-%d), asked for %s (bits %d-%d)",
			o, o.WorkerBits+o.SequenceBits, o.WorkerBits+o.SequenceBits+o.TimeBits-1, n, n.WorkerBits+n.SequenceBits, n.WorkerBits+n.SequenceBits+n.TimeBits-1))
	}
	if o.Unit != n.Unit {
		diff = append(diff, fmt.Sprintf("--time-unit %v, asked for %v", o.Unit, n.Unit))
	}
	if n.Epoch.After(o.Epoch) {
		diff = append(diff, fmt.Sprintf("--epoch %s, asked for the later %s (each new ID would read %v earlier than it is, and repeat the old cluster's IDs of that time)",
			o.Epoch.UTC().Format(time.RFC3339Nano), n.Epoch.UTC().Format(time.RFC3339Nano), n.Epoch.Sub(o.Epoch)))
	}
	if len(diff) > 0 {
		return want, fmt.Errorf("%w: cluster %q was deleted (at %s) with %s; a cluster created again under its name with these settings could issue its IDs again. "+
			"Create it with the old layout, unit and an epoch no later than the old one, or under another name; or, only if no ID of the deleted cluster is kept anywhere, "+
			"add --ignore-tombstone (or forget it first: snowflakectl cluster purge %s --yes)",
			ErrTombstone, cluster, t.Deleted.Time().Format(time.RFC3339), strings.Join(diff, "; "), cluster)
	}
	want.FenceFloor = max(want.FenceFloor, t.Fence)
	return want.withFeatures(impliedFeatures(want)...), nil
}

// TombstoneInfo is one row of snowflakectl cluster list's tombstones.
type TombstoneInfo struct {
	Name      string `json:"name"`
	Layout    string `json:"layout,omitempty"`
	Epoch     string `json:"epoch,omitempty"`
	Unit      string `json:"time_unit,omitempty"`
	WorkerIDs string `json:"worker_id_range,omitempty"`
	// Fence is the time every claim of a cluster created again under the
	// name starts after (RFC 3339).
	Fence   string `json:"fence,omitempty"`
	Deleted string `json:"deleted,omitempty"`
	// Tags are the deleted tags' tombstones of the name.
	Tags []zkclient.TagTombstone `json:"tags"`
	// Exists: a cluster of the name exists again (created over it).
	Exists bool `json:"exists"`
	// Problem: the tombstone could not be decoded ("" when fine).
	Problem string `json:"problem,omitempty"`
}

// ListTombstones reads every tombstone on the ensemble (of clusters and of
// their tags), sorted by name.
func (a *Admin) ListTombstones(ctx context.Context) ([]TombstoneInfo, error) {
	ctx, cancel := clock.WithTimeout(ctx, a.timeout)
	defer cancel()
	z, err := a.session(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list tombstones: %w", err)
	}
	return listTombstones(ctx, z)
}

func listTombstones(ctx context.Context, z zkclient.Client) ([]TombstoneInfo, error) {
	names, err := z.Children(ctx, zkclient.TombstoneRoot)
	if errors.Is(err, zk.ErrNoNode) {
		return []TombstoneInfo{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list tombstones: %w", zkclient.Unavailable(err))
	}
	slices.Sort(names)
	out := []TombstoneInfo{}
	for _, n := range names {
		info := TombstoneInfo{Name: n, Tags: []zkclient.TagTombstone{}}
		t, ok, _, err := readTombstone(ctx, z, n)
		switch {
		case err != nil && zkclient.Transient(err):
			return nil, err
		case err != nil:
			info.Problem = err.Error()
		case ok:
			info.Layout, info.Epoch, info.Unit = t.Layout.String(), t.Layout.Epoch.UTC().Format(time.RFC3339Nano), t.Layout.Unit.String()
			info.WorkerIDs = t.WorkerIDs
			if t.Fence > 0 { // none for a cluster no worker ever joined
				info.Fence = t.Fence.Time().Format(time.RFC3339Nano)
			}
			info.Deleted = t.Deleted.Time().Format(time.RFC3339)
		}
		tags, err := z.Children(ctx, zkclient.TagTombstonesPath(n))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("list tombstones: %w", zkclient.Unavailable(err))
		}
		slices.Sort(tags)
		for _, tag := range tags {
			tt, ok, _, err := zkclient.ReadTagTombstone(ctx, z, n, tag)
			if err != nil && zkclient.Transient(err) {
				return nil, err
			}
			if err != nil {
				info.Problem = err.Error()
				continue
			}
			if ok {
				info.Tags = append(info.Tags, tt)
			}
		}
		if info.Fence == "" && info.Layout == "" && len(info.Tags) == 0 && info.Problem == "" {
			continue // purged, or the parent of tag tombstones never written
		}
		exists, _, err := z.Exists(ctx, zkclient.ClusterPath(n))
		if err != nil {
			return nil, fmt.Errorf("list tombstones: %w", zkclient.Unavailable(err))
		}
		info.Exists = exists
		out = append(out, info)
	}
	return out, nil
}

// PurgeResult is what PurgeTombstone forgot.
type PurgeResult struct {
	// Cluster: the cluster's own tombstone was there.
	Cluster bool
	// Tags are the tags whose tombstones went.
	Tags []string
}

// PurgeTombstone forgets cluster's tombstone and its tags' (the command
// behind snowflakectl cluster purge): a cluster or tag created afterwards
// under the name starts from nothing, so IDs and numbers of the deleted
// ones may be issued again. A cluster that exists keeps the floor it was
// created with. ErrNoCluster when there is no tombstone of the name.
func (a *Admin) PurgeTombstone(ctx context.Context, cluster string) (PurgeResult, error) {
	ctx, cancel := clock.WithTimeout(ctx, a.timeout)
	defer cancel()
	z, err := a.session(ctx, cluster)
	if err != nil {
		return PurgeResult{}, fmt.Errorf("purge the tombstone of %q: %w", cluster, err)
	}
	var res PurgeResult
	var version int32
	_, res.Cluster, version, err = readTombstone(ctx, z, cluster)
	if err != nil && zkclient.Transient(err) {
		return res, fmt.Errorf("purge the tombstone of %q: %w", cluster, err)
	}
	res.Cluster = res.Cluster || err != nil // an undecodable one goes too
	tags, err := z.Children(ctx, zkclient.TagTombstonesPath(cluster))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return res, fmt.Errorf("purge the tombstone of %q: %w", cluster, zkclient.Unavailable(err))
	}
	slices.Sort(tags)
	res.Tags = tags
	if !res.Cluster && len(tags) == 0 {
		return res, fmt.Errorf("%w: there is no tombstone of cluster %q", ErrNoCluster, cluster)
	}
	// The tags' tombstones go, and the cluster's data, each at the
	// version read: one written meanwhile (a delete of the name) stops
	// the purge. The znode itself stays, since deleting it needs the
	// tombstones' root's credentials, which may be another cluster's.
	for _, tag := range tags {
		p := zkclient.TagTombstonePath(cluster, tag)
		_, st, err := z.Get(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err == nil {
			err = z.Delete(ctx, p, st.Version)
		}
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return res, fmt.Errorf("purge the tombstone of %q: delete %s: %w", cluster, p, zkclient.Unavailable(zkclient.AuthHint(err)))
		}
	}
	if res.Cluster {
		if _, err := z.Set(ctx, zkclient.TombstonePath(cluster), nil, version); errors.Is(err, zk.ErrBadVersion) {
			return res, fmt.Errorf("purge the tombstone of %q: it was written meanwhile (a delete of the name?): look at it again (cluster list) before purging", cluster)
		} else if err != nil {
			return res, fmt.Errorf("purge the tombstone of %q: %w", cluster, zkclient.Unavailable(zkclient.AuthHint(err)))
		}
	}
	return res, nil
}
