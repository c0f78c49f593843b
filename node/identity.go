package node

import (
	"errors"
	"fmt"
	"time"

	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// errCacheMismatch means the cache file belongs to another identity (worker
// ID, layout, cluster or node key) than the flags ask for. It is wrapped
// together with ErrInvalidConfig.
var errCacheMismatch = errors.New("cache file does not match the configuration")

// standaloneCluster is the Cluster (and NodeKey) of a standalone node's
// cache-file entry: empty, so it can never match a ZooKeeper cluster's name.
const standaloneCluster = ""

// identity is who the node is and what the previous run promised: the
// worker ID, layout and fence, as the cache-file entry the fence keeper
// keeps writing.
type identity struct {
	mode    string
	entry   cachefile.Entry // Fence: the fence at start (0 for none)
	from    string          // where the fence came from, for the log
	resumed bool            // ZooKeeper mode: serving the cached worker ID while ZooKeeper is unreachable
	// prevHolder is set when the start fence is the previous holder's
	// ZooKeeper fence, not one this node's disk wrote (no or another cache
	// file, or a take-over since): waiting for it is prev_holder_fence.
	prevHolder *fencing.PrevHolder
	// recycleAfter is the recycle-after the claim used (0: unknown, the
	// cluster's not read) and recycleAfterFrom where it came from, for the
	// log (ZooKeeper mode).
	recycleAfter     time.Duration
	recycleAfterFrom string
}

// standaloneIdentity takes worker ID and layout from the flags and the
// fence from the cache file, which must belong to the same worker ID and
// layout. No file means a first start (no fence); a damaged one is an error.
func standaloneIdentity(cfg Config, layout snowflake.Layout) (identity, error) {
	id := identity{mode: modeStandalone, entry: cachefile.Entry{
		Cluster: standaloneCluster, NodeKey: standaloneCluster, WorkerID: cfg.WorkerID, Layout: layout,
	}}
	e, err := cachefile.LoadFrom(cfg.files(), cfg.CacheFile)
	switch {
	case errors.Is(err, cachefile.ErrNotFound):
		id.from = "no cache file: first start"
		return id, nil
	case err != nil:
		return identity{}, fmt.Errorf("standalone identity: %w", err)
	}
	if e.Cluster != standaloneCluster || e.NodeKey != standaloneCluster {
		return identity{}, fmt.Errorf("%w: %w: %s holds worker %d of cluster %q (node key %q), written in ZooKeeper mode; standalone mode with --worker-id %d needs its own --cache-file",
			ErrInvalidConfig, errCacheMismatch, cfg.CacheFile, e.WorkerID, e.Cluster, e.NodeKey, cfg.WorkerID)
	}
	if e.WorkerID != cfg.WorkerID || !e.Layout.Equal(layout) {
		return identity{}, fmt.Errorf("%w: %w: %s holds worker %d with layout %s; --worker-id is %d with layout %s: pass the cached values or use another --cache-file",
			ErrInvalidConfig, errCacheMismatch, cfg.CacheFile, e.WorkerID, e.Layout.Describe(), cfg.WorkerID, layout.Describe())
	}
	id.entry.Fence = e.Fence
	id.from = "cache file " + cfg.CacheFile
	return id, nil
}
