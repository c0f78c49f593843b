package node

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// errNoCacheForZKDown means ZooKeeper could not be reached at start and the
// cache file cannot say which worker ID this node has (no file, or one of
// another cluster or node key): the node refuses to start rather than guess.
var errNoCacheForZKDown = errors.New("ZooKeeper unreachable at start and no usable cache file")

// claimer is the part of *coordinator.Coordinator that decides the identity.
type claimer interface {
	Claim(ctx context.Context, prior coordinator.Prior) (coordinator.Identity, error)
	ResumeFromCache(r coordinator.Resume) error
}

// zkIdentity establishes the identity of a node in ZooKeeper mode:
//
//   - ZooKeeper answers: the worker ID is the one Claim took, with a new
//     instance token and a ZooKeeper fence acknowledged for it. The node
//     starts after the previous holder's ZooKeeper fence, read in the
//     claim's multi — or, when the token it replaced is the cache file's
//     (nobody claimed the worker ID since this disk's last process), after
//     the cache file's tighter fence: that process persisted its fence on
//     this disk before issuing up to it. A cache file from before fencing
//     tokens gives the larger of both. The cache file's session lets Claim
//     remove the dead predecessor's lease at once (we hold the cache lock),
//     its incarnation must be the cluster's (ErrIncarnationMismatch, exit 2,
//     unless --accept-new-incarnation: then the node starts after the
//     larger of both fences).
//   - ZooKeeper is unreachable: the cache file must hold this cluster and
//     node key; its worker ID, fence and instance token are used, and the
//     node may issue up to the ZooKeeper fence acknowledged for that token
//     (nothing for a file without one) while the coordinator registers in
//     the background (ResumeFromCache). Without such a file the node
//     refuses to start (errNoCacheForZKDown).
//
// In both cases a cache file of another layout, a standalone cache file and
// a damaged one are refused.
func zkIdentity(ctx context.Context, cfg Config, layout snowflake.Layout, nodeKey string, c claimer, log zerolog.Logger) (identity, error) {
	id := identity{mode: modeZooKeeper, entry: cachefile.Entry{Cluster: cfg.Cluster, NodeKey: nodeKey, Layout: layout}}
	cached, noCache, ours, err := loadZKCache(cfg, layout, nodeKey)
	if err != nil {
		return identity{}, err
	}
	var prior coordinator.Prior
	if ours {
		prior = coordinator.Prior{Incarnation: cached.Incarnation, Session: cached.ZKSession, AcceptIncarnation: cfg.AcceptNewIncarnation}
	}

	zid, err := c.Claim(ctx, prior)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return identity{}, fmt.Errorf("claim worker id: %w", ctx.Err())
	case errors.Is(err, coordinator.ErrLayoutMismatch), errors.Is(err, coordinator.ErrClusterMismatch), errors.Is(err, coordinator.ErrOpenACL), errors.Is(err, coordinator.ErrIncarnationMismatch),
		errors.Is(err, coordinator.ErrNoCluster), errors.Is(err, coordinator.ErrUnknownFeature):
		return identity{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	case errors.Is(err, coordinator.ErrZKUnavailable):
		return resumeFromCache(cfg, nodeKey, c, id, cached, noCache, err, log)
	default:
		return identity{}, err
	}

	e := &id.entry
	e.WorkerID, e.Fence = zid.WorkerID, zid.PrevFence
	e.Incarnation, e.Token, e.ZKFence, e.ZKSession = zid.Incarnation, zid.Token, zid.ZKFence, zid.Session
	id.from = "zookeeper (the previous holder's fence)"
	id.recycleAfter, id.recycleAfterFrom = zid.RecycleAfter, "the cluster's (--recycle-after unset)"
	if cfg.RecycleAfter != 0 {
		id.recycleAfterFrom = "--recycle-after (equal to the cluster's)"
	}
	matches := cached.Matches(cfg.Cluster, nodeKey, zid.WorkerID) && (cached.Incarnation == "" || cached.Incarnation == zid.Incarnation || cfg.AcceptNewIncarnation)
	fence, fromCache := fencing.StartAfter(
		fencing.Record{Token: zid.Token, Fence: zid.ZKFence, PrevToken: zid.PrevToken, PrevFence: zid.PrevFence},
		fencing.Cache{Matches: matches, Token: cached.Token, Fence: cached.Fence})
	switch {
	case noCache:
		id.from = "zookeeper (no cache file)"
	case matches:
		e.ZKReported = cached.ZKReported
		e.Fence = fence
		if fromCache {
			id.from = "cache file " + cfg.CacheFile
		}
		log.Info().Int64("cache_fence_ms", int64(cached.Fence)).Int64("zk_fence_ms", int64(zid.PrevFence)).Str("cache_token", cached.Token).
			Str("replaced_token", zid.PrevToken).Str("fence_from", id.from).
			Msg("start fence: the cache file's when the claim replaced its token (nobody claimed the worker ID since), else the previous holder's")
	case ours:
		log.Warn().Int64("cached_worker_id", cached.WorkerID).Int64("worker_id", zid.WorkerID).Bool("recycled", zid.Recycled).
			Msg("the cache file holds another worker ID for this node key: using ZooKeeper's worker ID and fence, the cache file is replaced")
	default:
		log.Warn().Str("cached_cluster", cached.Cluster).Str("cached_node_key", cached.NodeKey).Int64("cached_worker_id", cached.WorkerID).
			Msg("the cache file belongs to another cluster or node key: using ZooKeeper's worker ID and fence, the cache file is replaced")
	}
	if !(matches && fromCache) && e.Fence > 0 {
		// The start fence is the previous holder's ZooKeeper fence, which
		// says nothing about this clock: waiting for it is normal.
		// A holder that stopped cleanly wrote the time of its last ID: a
		// correct clock is past it within --max-start-wait, so a longer
		// wait is this clock's fault (clock_behind_fence), not the holder's.
		ahead := cfg.ZKFenceAhead
		if zid.PrevStopped {
			ahead = 0
		}
		id.prevHolder = &fencing.PrevHolder{NodeKey: zid.PrevNodeKey, Addr: zid.PrevAddr, Token: zid.PrevToken,
			Fence: e.Fence, ZKFenceAhead: ahead}
	}
	return id, nil
}

// loadZKCache reads the cache file for zkIdentity: noCache when there is
// none, ours when it is of this cluster and node key. A damaged file, a
// standalone one and one of ours with another layout are refused.
func loadZKCache(cfg Config, layout snowflake.Layout, nodeKey string) (cached cachefile.Entry, noCache, ours bool, err error) {
	cached, cacheErr := cachefile.LoadFrom(cfg.files(), cfg.CacheFile)
	noCache = errors.Is(cacheErr, cachefile.ErrNotFound)
	if cacheErr != nil && !noCache {
		return cached, false, false, fmt.Errorf("zookeeper identity: %w", cacheErr)
	}
	ours = !noCache && cached.Cluster == cfg.Cluster && cached.NodeKey == nodeKey
	if !noCache {
		if cached.Cluster == standaloneCluster && cached.NodeKey == standaloneCluster {
			return cached, false, false, fmt.Errorf("%w: %w: %s holds worker %d written in standalone mode; ZooKeeper mode (cluster %q, node key %q) needs its own --cache-file",
				ErrInvalidConfig, errCacheMismatch, cfg.CacheFile, cached.WorkerID, cfg.Cluster, nodeKey)
		}
		if ours && !cached.Layout.Equal(layout) {
			return cached, false, false, fmt.Errorf("%w: %w: %s holds worker %d of cluster %q with layout %s; this node is configured with layout %s",
				ErrInvalidConfig, errCacheMismatch, cfg.CacheFile, cached.WorkerID, cfg.Cluster, cached.Layout.Describe(), layout.Describe())
		}
	}
	return cached, noCache, ours, nil
}

// resumeFromCache is zkIdentity's path when ZooKeeper is unreachable.
func resumeFromCache(cfg Config, nodeKey string, c claimer, id identity, cached cachefile.Entry, noCache bool, claimErr error, log zerolog.Logger) (identity, error) {
	zk := strings.Join(cfg.zkServers(), ",")
	switch {
	case noCache:
		return identity{}, fmt.Errorf("%w: ZooKeeper %s did not answer (%v) and there is no cache file %s: a first start needs ZooKeeper to claim a worker ID",
			errNoCacheForZKDown, zk, claimErr, cfg.CacheFile)
	case cached.Cluster != cfg.Cluster || cached.NodeKey != nodeKey:
		return identity{}, fmt.Errorf("%w: ZooKeeper %s did not answer (%v) and the cache file %s holds cluster %q, node key %q (worker %d), not cluster %q, node key %q: this node's worker ID is unknown",
			errNoCacheForZKDown, zk, claimErr, cfg.CacheFile, cached.Cluster, cached.NodeKey, cached.WorkerID, cfg.Cluster, nodeKey)
	}
	if err := c.ResumeFromCache(coordinator.Resume{
		WorkerID: cached.WorkerID, Token: cached.Token, ZKFence: cached.ZKFence, Session: cached.ZKSession,
		Incarnation: cached.Incarnation, LastReport: cached.ZKReported,
	}); err != nil {
		return identity{}, fmt.Errorf("serve worker %d from the cache file %s: %w", cached.WorkerID, cfg.CacheFile, err)
	}
	id.entry = cached
	if cached.Token == "" {
		id.entry.ZKFence = 0 // a file from before fencing tokens grants nothing until ZooKeeper answers
	}
	id.from = "cache file " + cfg.CacheFile + " (ZooKeeper unreachable)"
	id.recycleAfter, id.recycleAfterFrom = cfg.RecycleAfter, "the cluster's, not read yet (ZooKeeper unreachable; a resumed node recycles nothing)"
	if cfg.RecycleAfter != 0 {
		id.recycleAfterFrom = "--recycle-after, not checked against the cluster's yet (ZooKeeper unreachable)"
	}
	id.resumed = true
	log.Warn().Err(claimErr).Int64("worker_id", cached.WorkerID).Int64("fence_ms", int64(cached.Fence)).Int64("zk_fence_ms", int64(id.entry.ZKFence)).
		Int64("zk_reported_ms", int64(cached.ZKReported)).
		Msg("ZooKeeper unreachable at start: serving the cached worker ID up to the ZooKeeper fence acknowledged for its token; registering once ZooKeeper answers")
	return id, nil
}
