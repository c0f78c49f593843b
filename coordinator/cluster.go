package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// clusterData is the JSON of /snowflaked/<cluster>: the layout plus the
// settings every node of the cluster must share, the cluster's incarnation
// and the features a node must understand to join it. Files written before
// the incarnation existed lack it and recycle_after_ms; the first node that
// finds them missing adds them (version-checked).
//
// Two shapes (see docs/fencing.md, "Who may join"): a cluster that
// requires no feature keeps the flat shape every release reads
// ({"layout":"41/10/12","epoch",…}); one that requires any is written as
// {"format":2,"requires":[…],"layout":{"layout":…,"epoch":…},…}, whose
// nested layout releases before the features list fail to decode, so they
// refuse to start instead of skipping a setting they do not know.
type clusterData struct {
	Layout snowflake.Layout
	// Incarnation is random, chosen when the cluster znode is created: a
	// ZooKeeper rebuilt from scratch (or another ensemble) has another one.
	Incarnation string `json:"incarnation,omitempty"`
	// RecycleAfterMs is the cluster's --recycle-after.
	RecycleAfterMs int64 `json:"recycle_after_ms,omitempty"`
	// WorkerIDs is the cluster's --worker-id-range, resolved (the whole
	// worker field when the znode names none).
	WorkerIDs WorkerRange `json:"-"`
	// Requires lists the features a node must know to join, sorted.
	Requires []string `json:"-"`
	// FenceFloor is the fence of the deleted cluster of the
	// same name this one was created over (its tombstone's): every forever
	// znode is created with it as its fence, so every claim starts after
	// it. 0 for none; set only at creation.
	FenceFloor snowflake.UnixMilli `json:"-"`
}

// clusterFormat is the "format" of the shape written once a feature is
// required (the flat shape has none: format 1).
const clusterFormat = zkclient.ClusterFormat

// MarshalJSON writes the flat shape when the cluster requires no feature,
// else the nested one (format 2).
func (d clusterData) MarshalJSON() ([]byte, error) {
	lb, err := json.Marshal(d.Layout)
	if err != nil {
		return nil, err
	}
	var rangeStr string
	if full, _ := (WorkerRange{}).resolve(d.Layout); d.WorkerIDs != (WorkerRange{}) && d.WorkerIDs != full {
		rangeStr = d.WorkerIDs.String()
	}
	if len(d.Requires) > 0 {
		// A struct, not a map: format and requires come first, so the
		// 80 bytes an older release quotes in its error name them.
		return json.Marshal(struct {
			Format         int                 `json:"format"`
			Requires       []string            `json:"requires"`
			Layout         json.RawMessage     `json:"layout"`
			WorkerIDRange  string              `json:"worker_id_range,omitempty"`
			RecycleAfterMs int64               `json:"recycle_after_ms,omitempty"`
			FenceFloor     snowflake.UnixMilli `json:"fence_floor_ms,omitempty"`
			Incarnation    any                 `json:"incarnation,omitempty"`
		}{clusterFormat, d.Requires, lb, rangeStr, d.RecycleAfterMs, d.FenceFloor, zkclient.EncodeIncarnation(clusterFormat, d.Incarnation)})
	}
	m := map[string]any{}
	if err := json.Unmarshal(lb, &m); err != nil {
		return nil, err
	}
	if d.Incarnation != "" {
		m["incarnation"] = d.Incarnation
	}
	if d.RecycleAfterMs != 0 {
		m["recycle_after_ms"] = d.RecycleAfterMs
	}
	if rangeStr != "" {
		m["worker_id_range"] = rangeStr
	}
	return json.Marshal(m)
}

// decodeCluster reads the cluster znode's data, either shape. Its header
// (format, required features, incarnation) is zkclient's to read, before
// anything else: a format newer than this release's, or a required
// feature it does not know, gives an error wrapping ErrUnknownFeature.
func decodeCluster(b []byte) (clusterData, error) {
	var d clusterData
	h, err := zkclient.DecodeClusterHeader(b)
	if err != nil {
		return d, err
	}
	var extra struct {
		Layout         json.RawMessage     `json:"layout"`
		RecycleAfterMs int64               `json:"recycle_after_ms"`
		WorkerIDRange  string              `json:"worker_id_range"`
		FenceFloor     snowflake.UnixMilli `json:"fence_floor_ms"`
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return d, err
	}
	layout := b // the flat shape: the layout's fields at the top
	if h.Format == clusterFormat {
		layout = extra.Layout
	}
	if err := json.Unmarshal(layout, &d.Layout); err != nil {
		return d, err
	}
	if extra.RecycleAfterMs < 0 {
		return d, fmt.Errorf("recycle_after_ms %d is negative", extra.RecycleAfterMs)
	}
	if extra.RecycleAfterMs > maxRecycleAfterMs {
		// As a time.Duration it would wrap negative: every worker ID
		// without a lease would look free at once.
		return d, fmt.Errorf("recycle_after_ms %d is above %d (the longest duration)", extra.RecycleAfterMs, int64(maxRecycleAfterMs))
	}
	r, err := ParseWorkerRange(extra.WorkerIDRange)
	if err == nil {
		r, err = r.resolve(d.Layout)
	}
	if err != nil {
		return d, err
	}
	if extra.FenceFloor < 0 {
		return d, fmt.Errorf("fence_floor_ms %d is negative", extra.FenceFloor)
	}
	if extra.FenceFloor > 0 && !slices.Contains(h.Requires, zkclient.FeatureFenceFloor) {
		// Written by hand: a release that predates the floor would join
		// and ignore it.
		return d, fmt.Errorf("fence_floor_ms %d without the %s feature required", extra.FenceFloor, zkclient.FeatureFenceFloor)
	}
	d.WorkerIDs, d.RecycleAfterMs, d.FenceFloor = r, extra.RecycleAfterMs, extra.FenceFloor
	d.Requires, d.Incarnation = h.Requires, h.Incarnation
	return d, nil
}

// maxClusterRounds bounds ensureCluster's version-checked upgrades.
const maxClusterRounds = 5

// maxRecycleAfterMs is the largest recycle_after_ms a time.Duration holds.
const maxRecycleAfterMs = math.MaxInt64 / int64(time.Millisecond)

// newClusterData is the cluster znode a node (--create-cluster) or
// snowflakectl cluster create writes for a new cluster: it requires what
// its settings need and tag incarnations from the start.
func newClusterData(l snowflake.Layout, ids WorkerRange, recycleAfter time.Duration) clusterData {
	d := clusterData{Layout: l, Incarnation: zkclient.NewToken(), RecycleAfterMs: recycleAfter.Milliseconds(), WorkerIDs: ids}
	return d.withFeatures(append(impliedFeatures(d), FeatureTagIncarnation)...)
}

// ensureCluster checks the cluster znode's layout, shared settings and
// required features, and returns what it records (its incarnation and
// recycle-after always set). A missing
// cluster is created only with Config.CreateCluster; otherwise it is
// ErrNoCluster and nothing is written. A cluster znode without an
// incarnation or recycle-after (written by an older version) gets them,
// and one whose settings need a feature it does not yet require (a range
// recorded by a release before the features list) gets it, version-checked,
// so every node agrees and older releases can no longer join.
func (c *Coordinator) ensureCluster(ctx context.Context, z zkclient.Client) (clusterData, error) {
	ok, _, err := z.Exists(ctx, c.p.cluster)
	if err != nil {
		return clusterData{}, fmt.Errorf("read %s: %w", c.p.cluster, err)
	}
	if !ok {
		if !c.cfg.CreateCluster {
			return clusterData{}, c.noClusterError(ctx, z)
		}
		if err := c.createCluster(ctx, z); err != nil {
			return clusterData{}, err
		}
	}
	var got clusterData
	for round := 1; ; round++ {
		b, st, err := z.Get(ctx, c.p.cluster)
		if err != nil {
			return clusterData{}, fmt.Errorf("read %s: %w", c.p.cluster, err)
		}
		if got, err = decodeCluster(b); errors.Is(err, ErrUnknownFeature) {
			return clusterData{}, fmt.Errorf("cluster %q: %w", c.cfg.Cluster, err)
		} else if err != nil {
			return clusterData{}, fmt.Errorf("cluster znode %s holds malformed data %s: %v", c.p.cluster, quoteShort(b), err)
		}
		if !got.Layout.Equal(c.cfg.Layout) {
			return clusterData{}, fmt.Errorf("%w: cluster %q in ZooKeeper uses layout %s, this node is configured with %s",
				ErrLayoutMismatch, c.cfg.Cluster, got.Layout.Describe(), c.cfg.Layout.Describe())
		}
		if err := c.checkShared(got); err != nil {
			return clusterData{}, err
		}
		up := got.withFeatures(impliedFeatures(got)...)
		if got.Incarnation != "" && got.RecycleAfterMs != 0 && slices.Equal(up.Requires, got.Requires) {
			break
		}
		if round > maxClusterRounds {
			return clusterData{}, fmt.Errorf("cluster znode %s kept changing while adding its incarnation", c.p.cluster)
		}
		if up.Incarnation == "" {
			up.Incarnation = zkclient.NewToken()
		}
		if up.RecycleAfterMs == 0 {
			up.RecycleAfterMs = c.recordedRecycleAfter().Milliseconds()
		}
		ub, err := json.Marshal(up)
		if err != nil {
			return clusterData{}, fmt.Errorf("encode cluster data: %w", err)
		}
		if _, err := z.Set(ctx, c.p.cluster, ub, st.Version); err != nil && !errors.Is(err, zk.ErrBadVersion) {
			return clusterData{}, fmt.Errorf("upgrade the cluster znode %s: %w", c.p.cluster, zkclient.AuthHint(err))
		}
		c.log.Info().Str("cluster", c.p.cluster).Strs("requires", up.Requires).
			Msg("cluster znode upgraded: incarnation, recycle-after and required features recorded (releases that do not know them can no longer join)")
	}
	for _, p := range []string{c.p.forever, c.p.leases, c.p.alive} {
		if err := z.Ensure(ctx, p, nil, c.acl); err != nil {
			return clusterData{}, err
		}
	}
	if c.cfg.Auth != "" {
		if err := checkClusterACLs(ctx, z, c.cfg.Cluster, c.p); err != nil {
			return got, err
		}
	}
	c.warnOverlaps(ctx, z, got)
	return got, nil
}

// createCluster creates the cluster znode (--create-cluster), over the
// tombstone of a deleted cluster of the name, guarded against a delete
// that buries the name meanwhile. A cluster created by another node
// meanwhile is left as it is.
func (c *Coordinator) createCluster(ctx context.Context, z zkclient.Client) error {
	if err := z.Ensure(ctx, zkclient.Root, nil, c.rootACL); err != nil {
		return err
	}
	for round := 1; ; round++ {
		want, guard, _, err := createdOverTombstone(ctx, z, c.cfg.Cluster, newClusterData(c.cfg.Layout, c.cfg.WorkerIDs, c.recordedRecycleAfter()), false, c.acl, c.rootACL)
		if errors.Is(err, ErrTombstone) {
			return fmt.Errorf("--create-cluster: %w", err)
		}
		if err != nil {
			return err
		}
		wantB, err := json.Marshal(want)
		if err != nil {
			return fmt.Errorf("encode cluster data: %w", err)
		}
		create := &zk.CreateRequest{Path: c.p.cluster, Data: wantB, Acl: c.acl}
		failed, err := z.Multi(ctx, append([]any{create}, guard...)...)
		switch {
		case err == nil:
			c.log.Info().Str("cluster", c.p.cluster).Strs("requires", want.Requires).Msg("created the cluster (--create-cluster)")
			if want.FenceFloor > 0 {
				c.log.Warn().Str("cluster", c.cfg.Cluster).Time("fence_floor", want.FenceFloor.Time()).
					Msg("a cluster of this name was deleted: the new one starts every worker ID after its fence")
			}
			return nil
		case failed == 0 && errors.Is(err, zk.ErrNodeExists):
			return nil // another node created it: checked as any existing cluster
		case failed > 0 && zkclient.GuardLost(err) && round < maxClusterRounds:
			continue // a delete buried the name since the tombstone was read
		case failed > 0:
			return fmt.Errorf("create %s: check its tombstone %s: %w", c.p.cluster, zkclient.TombstonePath(c.cfg.Cluster), zkclient.AuthHint(err))
		}
		return fmt.Errorf("create %s: %w", c.p.cluster, zkclient.AuthHint(err))
	}
}

// checkACLs refuses a cluster, used with credentials (--zk-auth), one of
// whose znodes at paths lets a client without them change it: created
// without credentials, or by someone else first with open ACLs. Whoever
// can delete a forever znode deletes its fence, and a recycler then
// reissues its IDs. A znode that does not exist is skipped.
func checkACLs(ctx context.Context, z zkclient.Client, cluster string, paths ...string) error {
	acls, err := z.GetACLs(ctx, paths)
	if err != nil {
		return err
	}
	for i, p := range paths {
		for _, a := range acls[i] {
			if a.Scheme != "digest" && a.Perms&^zk.PermRead != 0 {
				return fmt.Errorf("%w: cluster %q: %s lets %s:%s %s without the cluster's credentials (it was created without --zk-auth, or by someone else first), so anyone who reaches ZooKeeper could delete its fences; delete the cluster (snowflakectl cluster delete) and create it again with --zk-auth, or run every node without --zk-auth",
					ErrOpenACL, cluster, p, a.Scheme, a.ID, permNames(a.Perms))
			}
		}
	}
	return nil
}

// checkClusterACLs is checkACLs over what guards a cluster's IDs: its
// znode, forever, leases and alive, every forever znode (each holds a
// fence: one made by a node run without --zk-auth stays open), and the
// segments znode with each tag's.
func checkClusterACLs(ctx context.Context, z zkclient.Client, cluster string, p paths) error {
	check := []string{p.cluster, p.forever, p.leases, p.alive, p.cluster + "/segments"}
	for _, dir := range []string{p.forever, p.cluster + "/segments"} {
		kids, err := z.Children(ctx, dir)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		for _, k := range kids {
			check = append(check, dir+"/"+k)
		}
	}
	return checkACLs(ctx, z, cluster, check...)
}

// permNames spells ZooKeeper permissions as its shell does: "cdrwa".
func permNames(perms int32) string {
	var b strings.Builder
	for _, p := range []struct {
		bit  int32
		name byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if perms&p.bit != 0 {
			b.WriteByte(p.name)
		}
	}
	return b.String()
}

// checkShared compares the cluster's shared settings with this node's
// (recycle-after only when both the cluster records it and this node sets
// it: unset, the node follows the cluster's).
func (c *Coordinator) checkShared(got clusterData) error {
	if got.WorkerIDs != c.cfg.WorkerIDs {
		return fmt.Errorf("%w: cluster %q in ZooKeeper uses --worker-id-range %s, this node is configured with %s: use the cluster's range",
			ErrClusterMismatch, c.cfg.Cluster, got.WorkerIDs, c.cfg.WorkerIDs)
	}
	if got.RecycleAfterMs != 0 && c.cfg.RecycleAfter != 0 && got.RecycleAfterMs != c.cfg.RecycleAfter.Milliseconds() {
		return fmt.Errorf("%w: cluster %q in ZooKeeper uses --recycle-after %v, this node is configured with %v: "+
			"leave --recycle-after unset to follow the cluster's value, or set it to %v; snowflakectl cluster set %s --recycle-after changes the cluster's",
			ErrClusterMismatch, c.cfg.Cluster, msDuration(got.RecycleAfterMs), c.cfg.RecycleAfter, msDuration(got.RecycleAfterMs), c.cfg.Cluster)
	}
	return nil
}

// recordedRecycleAfter is the recycle-after this node records in a cluster
// znode that has none (a cluster it creates, or one an older release
// wrote): its own when set, else DefaultRecycleAfter.
func (c *Coordinator) recordedRecycleAfter() time.Duration {
	if c.cfg.RecycleAfter != 0 {
		return c.cfg.RecycleAfter
	}
	return DefaultRecycleAfter
}

// msDuration is a cluster znode's milliseconds as a duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// noClusterError is ErrNoCluster for this node's cluster, naming the
// clusters the ensemble holds and a near match.
func (c *Coordinator) noClusterError(ctx context.Context, z zkclient.Client) error {
	names, err := clusterNames(ctx, z)
	if err != nil {
		return fmt.Errorf("read %s: %w", zkclient.Root, err)
	}
	return missingCluster(c.cfg.Cluster, strings.Join(c.cfg.Servers, ","), names)
}

// warnOverlaps logs a warning for every other cluster on the ensemble
// whose worker-ID range overlaps this one's. Best effort: a read that
// fails is logged at debug level.
func (c *Coordinator) warnOverlaps(ctx context.Context, z zkclient.Client, d clusterData) {
	others, err := overlaps(ctx, z, c.cfg.Cluster, d)
	if err != nil {
		c.log.Debug().Err(err).Msg("could not check other clusters' worker-ID ranges")
	}
	for _, o := range others {
		c.log.Warn().Str("cluster", c.cfg.Cluster).Str("other_cluster", o.Name).Msg(o.Warning)
	}
}

// checkIncarnation compares the cluster's incarnation with the one a cache
// file recorded ("" for none or an old file: nothing to compare).
func checkIncarnation(cluster, got string, prior Prior) error {
	if prior.Incarnation == "" || prior.Incarnation == got || prior.AcceptIncarnation {
		return nil
	}
	return fmt.Errorf("%w: the cache file belongs to incarnation %s of cluster %q, ZooKeeper holds incarnation %s "+
		"(ZooKeeper was rebuilt, or --zk points at another ensemble): fix --zk, or start once with --accept-new-incarnation "+
		"to claim afresh after the cache file's fence",
		ErrIncarnationMismatch, prior.Incarnation, cluster, got)
}
