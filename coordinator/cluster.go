package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// clusterData is the JSON of /snowflaked/<cluster>: the layout (its own
// fields, flat) plus the settings every node of the cluster must share and
// the cluster's incarnation. Files written before the incarnation existed
// lack the last two fields; the first node that finds them missing adds
// them (version-checked).
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
}

// MarshalJSON writes the layout's fields and the cluster's side by side
// (the layout's own MarshalJSON gives its part).
func (d clusterData) MarshalJSON() ([]byte, error) {
	lb, err := json.Marshal(d.Layout)
	if err != nil {
		return nil, err
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
	if full, _ := (WorkerRange{}).resolve(d.Layout); d.WorkerIDs != (WorkerRange{}) && d.WorkerIDs != full {
		m["worker_id_range"] = d.WorkerIDs.String()
	}
	return json.Marshal(m)
}

// decodeCluster reads the cluster znode's data.
func decodeCluster(b []byte) (clusterData, error) {
	var d clusterData
	if err := json.Unmarshal(b, &d.Layout); err != nil {
		return d, err
	}
	var extra struct {
		Incarnation    string `json:"incarnation"`
		RecycleAfterMs int64  `json:"recycle_after_ms"`
		WorkerIDRange  string `json:"worker_id_range"`
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return d, err
	}
	if extra.RecycleAfterMs < 0 {
		return d, fmt.Errorf("recycle_after_ms %d is negative", extra.RecycleAfterMs)
	}
	r, err := ParseWorkerRange(extra.WorkerIDRange)
	if err == nil {
		r, err = r.resolve(d.Layout)
	}
	if err != nil {
		return d, err
	}
	d.WorkerIDs = r
	d.Incarnation, d.RecycleAfterMs = extra.Incarnation, extra.RecycleAfterMs
	return d, nil
}

// maxClusterRounds bounds ensureCluster's version-checked upgrades.
const maxClusterRounds = 5

// ensureCluster creates the cluster znodes as needed, checks the layout and
// the shared settings, and returns the cluster's incarnation. A cluster
// znode without an incarnation or recycle-after (written by an older
// version) gets them, version-checked, so every node agrees on one.
func (c *Coordinator) ensureCluster(ctx context.Context, z zkclient.Client) (string, error) {
	want := clusterData{Layout: c.cfg.Layout, Incarnation: zkclient.NewToken(), RecycleAfterMs: c.cfg.RecycleAfter.Milliseconds(), WorkerIDs: c.cfg.WorkerIDs}
	wantB, err := json.Marshal(want)
	if err != nil {
		return "", fmt.Errorf("encode cluster data: %w", err)
	}
	if err := z.Ensure(ctx, zkclient.Root, nil, c.rootACL); err != nil {
		return "", err
	}
	if err := z.Ensure(ctx, c.p.cluster, wantB, c.acl); err != nil {
		return "", err
	}
	var got clusterData
	for round := 1; ; round++ {
		b, st, err := z.Get(ctx, c.p.cluster)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", c.p.cluster, err)
		}
		if got, err = decodeCluster(b); err != nil {
			return "", fmt.Errorf("cluster znode %s holds malformed data %s: %v", c.p.cluster, quoteShort(b), err)
		}
		if !got.Layout.Equal(c.cfg.Layout) {
			return "", fmt.Errorf("%w: cluster %q in ZooKeeper uses layout %s, this node is configured with %s",
				ErrLayoutMismatch, c.cfg.Cluster, got.Layout.Describe(), c.cfg.Layout.Describe())
		}
		if got.Incarnation != "" && got.RecycleAfterMs != 0 {
			break
		}
		if round > maxClusterRounds {
			return "", fmt.Errorf("cluster znode %s kept changing while adding its incarnation", c.p.cluster)
		}
		up := got
		if up.Incarnation == "" {
			up.Incarnation = want.Incarnation
		}
		if up.RecycleAfterMs == 0 {
			up.RecycleAfterMs = want.RecycleAfterMs
		}
		ub, err := json.Marshal(up)
		if err != nil {
			return "", fmt.Errorf("encode cluster data: %w", err)
		}
		if _, err := z.Set(ctx, c.p.cluster, ub, st.Version); err != nil && !errors.Is(err, zk.ErrBadVersion) {
			return "", fmt.Errorf("add the incarnation to %s: %w", c.p.cluster, zkclient.AuthHint(err))
		}
		c.log.Info().Str("cluster", c.p.cluster).Msg("cluster znode upgraded: incarnation and recycle-after recorded")
	}
	if got.WorkerIDs != c.cfg.WorkerIDs {
		return "", fmt.Errorf("%w: cluster %q in ZooKeeper uses --worker-id-range %s, this node is configured with %s: use the cluster's range",
			ErrClusterMismatch, c.cfg.Cluster, got.WorkerIDs, c.cfg.WorkerIDs)
	}
	if got.RecycleAfterMs != c.cfg.RecycleAfter.Milliseconds() {
		return "", fmt.Errorf("%w: cluster %q in ZooKeeper uses --recycle-after %v, this node is configured with %v: use the cluster's value",
			ErrClusterMismatch, c.cfg.Cluster, time.Duration(got.RecycleAfterMs)*time.Millisecond, c.cfg.RecycleAfter)
	}
	for _, p := range []string{c.p.forever, c.p.leases, c.p.alive} {
		if err := z.Ensure(ctx, p, nil, c.acl); err != nil {
			return "", err
		}
	}
	return got.Incarnation, nil
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
