package node

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// errSegmentsStarting is what Take answers before the segment service has
// its ZooKeeper session.
var errSegmentsStarting = fmt.Errorf("%w: segment mode is waiting for its ZooKeeper session", segment.ErrUnavailable)

// segmentMode serves segment mode for a ZooKeeper node (server.SegmentSource
// and the metrics' and status page's source). It opens a ZooKeeper session
// of its own in the background, so neither the worker-ID claim nor the
// clock guard gate it: a node out of service for its clock still hands out
// dense IDs.
type segmentMode struct {
	cfg   coordinator.SegmentConfig
	file  string // the state file: the cache file's path + ".segments"
	node  string // holder name: the node key
	log   zerolog.Logger
	store atomic.Pointer[coordinator.SegmentStore]
	svc   atomic.Pointer[segment.Service]
}

func newSegmentMode(cfg Config, nodeKey string, log zerolog.Logger) *segmentMode {
	return &segmentMode{
		cfg: coordinator.SegmentConfig{Servers: cfg.ZKServers(), Cluster: cfg.Cluster, Auth: cfg.ZKAuth,
			Timeout: connectTimeout(cfg.ZKSessionTimeout), Log: log},
		file: cfg.CacheFile + ".segments", node: nodeKey, log: log,
	}
}

// Take implements server.SegmentSource.
func (m *segmentMode) Take(ctx context.Context, tag string, dst []int64, n int) ([]int64, error) {
	svc := m.svc.Load()
	if svc == nil {
		if err := segment.ValidateTag(tag); err != nil {
			return dst, err
		}
		return dst, errSegmentsStarting
	}
	return svc.Take(ctx, tag, dst, n)
}

// Ready implements server.SegmentSource: the session is up.
func (m *segmentMode) Ready() bool {
	st := m.store.Load()
	return st != nil && m.svc.Load() != nil && st.Connected()
}

// Status lists the tags this node serves (none before it started).
func (m *segmentMode) Status() []segment.TagStatus {
	if svc := m.svc.Load(); svc != nil {
		return svc.Status()
	}
	return nil
}

// run opens the store (retrying while ZooKeeper is unreachable) and starts
// the service, which resumes the ranges the state file lists. It returns
// once started or when ctx ends.
func (m *segmentMode) run(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := m.start(ctx)
		if err == nil {
			return
		}
		if attempt == 0 || attempt%30 == 0 {
			m.log.Warn().Err(err).Msg("segment mode: not started yet; retrying")
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

func (m *segmentMode) start(ctx context.Context) error {
	st, err := coordinator.OpenSegments(ctx, m.cfg)
	if err != nil {
		return err
	}
	inc, err := st.Incarnation(ctx)
	if err != nil {
		st.Close()
		return err
	}
	svc, err := segment.New(segment.Config{Store: st, StateFile: m.file, Incarnation: inc, Holder: m.node,
		Log: m.log.With().Str("component", "segments").Logger()})
	if err != nil {
		st.Close()
		return fmt.Errorf("segment mode: %w", err)
	}
	m.store.Store(st)
	m.svc.Store(svc)
	m.log.Info().Str("state_file", m.file).Msg("segment mode ready")
	return nil
}

// close stops segment mode: the ranges held leave the state file and go
// back to ZooKeeper (nothing wasted on a clean stop), within ctx.
func (m *segmentMode) close(ctx context.Context) error {
	var err error
	if svc := m.svc.Load(); svc != nil {
		wasted, cerr := svc.Close(ctx)
		if cerr != nil {
			err = fmt.Errorf("stop segment mode (%d IDs lost): %w", wasted, cerr)
		} else {
			m.log.Info().Msg("segment mode stopped: every unissued range returned to ZooKeeper")
		}
	}
	if st := m.store.Load(); st != nil {
		st.Close()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (--shutdown-timeout)", err)
	}
	return err
}
