package node

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"snowflaked/cachefile"
	"snowflaked/coordinator"
	"snowflaked/snowflake"
)

// ErrNoCacheForZKDown means ZooKeeper could not be reached at start and the
// cache file cannot say which worker ID this node has (no file, or one of
// another cluster or node key): the node refuses to start rather than guess.
var ErrNoCacheForZKDown = errors.New("ZooKeeper unreachable at start and no usable cache file")

// claimer is the part of *coordinator.Coordinator that decides the identity.
type claimer interface {
	Claim(ctx context.Context) (coordinator.Identity, error)
	ResumeFromCache(workerID, lastReported int64) error
}

// zkIdentity establishes the identity of a node in ZooKeeper mode (SPEC §3):
//
//   - ZooKeeper answers: the worker ID is the one Claim took. The fence is
//     the larger of the cache file's (when the file holds this cluster, node
//     key and worker ID) and the one in ZooKeeper. The cache file is written
//     before any ID beyond its fence is issued, so it bounds what this
//     machine issued; the ZooKeeper fence bounds what any other process of
//     this node key reported (the key may have run elsewhere since), and
//     covers this machine's last run up to the report interval. After a
//     clean stop both are the exact last issued time, so a clean restart
//     waits for nothing; after kill -9 the successor waits for the dead
//     session's lease anyway (a session timeout, normally longer than the
//     extra report interval).
//   - ZooKeeper is unreachable: the cache file must hold this cluster and
//     node key; its worker ID and fence are used and the coordinator is told
//     to register in the background (ResumeFromCache). Without such a file
//     the node refuses to start (ErrNoCacheForZKDown).
//
// In both cases a cache file of another layout, a standalone cache file and
// a damaged one are refused.
func zkIdentity(ctx context.Context, cfg Config, layout snowflake.Layout, nodeKey string, c claimer, log zerolog.Logger) (identity, error) {
	id := identity{mode: ModeZooKeeper, entry: cachefile.Entry{Cluster: cfg.Cluster, NodeKey: nodeKey, Layout: layout}}
	cached, cacheErr := cachefile.Load(cfg.CacheFile)
	noCache := errors.Is(cacheErr, cachefile.ErrNotFound)
	if cacheErr != nil && !noCache {
		return identity{}, fmt.Errorf("zookeeper identity: %w", cacheErr)
	}
	if !noCache {
		if cached.Cluster == StandaloneCluster && cached.NodeKey == StandaloneCluster {
			return identity{}, fmt.Errorf("%w: %w: %s holds worker %d written in standalone mode; ZooKeeper mode (cluster %q, node key %q) needs its own --cache-file",
				ErrInvalidConfig, ErrCacheMismatch, cfg.CacheFile, cached.WorkerID, cfg.Cluster, nodeKey)
		}
		if cached.Cluster == cfg.Cluster && cached.NodeKey == nodeKey && !cached.Layout.Equal(layout) {
			return identity{}, fmt.Errorf("%w: %w: %s holds worker %d of cluster %q with layout %s; this node is configured with layout %s",
				ErrInvalidConfig, ErrCacheMismatch, cfg.CacheFile, cached.WorkerID, cfg.Cluster, cached.Layout.Describe(), layout.Describe())
		}
	}

	zid, err := c.Claim(ctx)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return identity{}, fmt.Errorf("claim worker id: %w", ctx.Err())
	case errors.Is(err, coordinator.ErrLayoutMismatch):
		return identity{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	case errors.Is(err, coordinator.ErrZKUnavailable):
		return resumeFromCache(cfg, nodeKey, c, id, cached, noCache, err, log)
	default:
		return identity{}, err
	}

	id.entry.WorkerID = zid.WorkerID
	id.entry.Fence = zid.Fence
	id.from = "zookeeper"
	switch {
	case noCache:
		id.from = "zookeeper (no cache file)"
	case cached.Matches(cfg.Cluster, nodeKey, zid.WorkerID):
		id.entry.ZKReported = cached.ZKReported
		if cached.Fence >= zid.Fence {
			id.entry.Fence = cached.Fence
			id.from = "cache file " + cfg.CacheFile
		}
		log.Info().Int64("cache_fence_ms", cached.Fence).Int64("zk_fence_ms", zid.Fence).Str("fence_from", id.from).
			Msg("start fence: the larger of the cache file's and ZooKeeper's")
	case cached.Cluster == cfg.Cluster && cached.NodeKey == nodeKey:
		log.Warn().Int64("cached_worker_id", cached.WorkerID).Int64("worker_id", zid.WorkerID).Bool("recycled", zid.Recycled).
			Msg("the cache file holds another worker ID for this node key: using ZooKeeper's worker ID and fence, the cache file is replaced")
	default:
		log.Warn().Str("cached_cluster", cached.Cluster).Str("cached_node_key", cached.NodeKey).Int64("cached_worker_id", cached.WorkerID).
			Msg("the cache file belongs to another cluster or node key: using ZooKeeper's worker ID and fence, the cache file is replaced")
	}
	return id, nil
}

// resumeFromCache is zkIdentity's path when ZooKeeper is unreachable.
func resumeFromCache(cfg Config, nodeKey string, c claimer, id identity, cached cachefile.Entry, noCache bool, claimErr error, log zerolog.Logger) (identity, error) {
	zk := strings.Join(cfg.ZKServers(), ",")
	switch {
	case noCache:
		return identity{}, fmt.Errorf("%w: ZooKeeper %s did not answer (%v) and there is no cache file %s: a first start needs ZooKeeper to claim a worker ID",
			ErrNoCacheForZKDown, zk, claimErr, cfg.CacheFile)
	case cached.Cluster != cfg.Cluster || cached.NodeKey != nodeKey:
		return identity{}, fmt.Errorf("%w: ZooKeeper %s did not answer (%v) and the cache file %s holds cluster %q, node key %q (worker %d), not cluster %q, node key %q: this node's worker ID is unknown",
			ErrNoCacheForZKDown, zk, claimErr, cfg.CacheFile, cached.Cluster, cached.NodeKey, cached.WorkerID, cfg.Cluster, nodeKey)
	}
	if err := c.ResumeFromCache(cached.WorkerID, cached.ZKReported); err != nil {
		return identity{}, fmt.Errorf("serve worker %d from the cache file %s: %w", cached.WorkerID, cfg.CacheFile, err)
	}
	id.entry.WorkerID, id.entry.Fence, id.entry.ZKReported = cached.WorkerID, cached.Fence, cached.ZKReported
	id.from = "cache file " + cfg.CacheFile + " (ZooKeeper unreachable)"
	id.resumed = true
	log.Warn().Err(claimErr).Int64("worker_id", cached.WorkerID).Int64("fence_ms", cached.Fence).Int64("zk_reported_ms", cached.ZKReported).
		Msg("ZooKeeper unreachable at start: serving the cached worker ID; registering once ZooKeeper answers")
	return id, nil
}
