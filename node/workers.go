package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/ctxlock"
)

// defaultListTimeout bounds one worker listing when the caller's context
// has no deadline.
const defaultListTimeout = 3 * time.Second

// workerLister gives the status page the cluster's worker list without a
// new ZooKeeper session per page view: coordinator.ListWorkers opens one
// per call (the coordinator offers no listing over its own session), so a
// list (or its error) is reused for ttl, and only one listing runs at a
// time; callers that arrive meanwhile wait for it (bounded by their
// context) instead of starting another. Report ages are advanced by the
// time since the list was read, so a cached list does not make reports
// look fresher than they are.
type workerLister struct {
	ttl  time.Duration
	mono func() time.Duration // monotonic clock, for the list's age
	list func(ctx context.Context, timeout time.Duration) ([]coordinator.WorkerInfo, error)
	busy ctxlock.Mutex // held while a listing runs

	mu   sync.Mutex
	have bool
	at   time.Duration // mono of the last listing
	rows []coordinator.WorkerInfo
	err  error
}

func newWorkerLister(ttl time.Duration, mono func() time.Duration,
	list func(ctx context.Context, timeout time.Duration) ([]coordinator.WorkerInfo, error)) *workerLister {
	return &workerLister{ttl: ttl, mono: mono, list: list, busy: ctxlock.New()}
}

// Workers returns the cached list while it is younger than the TTL, or
// lists the workers again.
func (l *workerLister) Workers(ctx context.Context) ([]coordinator.WorkerInfo, error) {
	if rows, ok, err := l.cached(); ok {
		return rows, err
	}
	if err := l.busy.LockCtx(ctx); err != nil {
		return nil, fmt.Errorf("list workers: waiting for its turn: %w", err)
	}
	defer l.busy.Unlock()
	if rows, ok, err := l.cached(); ok { // listed while we waited
		return rows, err
	}
	timeout := defaultListTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("list workers: %w", context.DeadlineExceeded)
	}
	rows, err := l.list(ctx, timeout)
	l.mu.Lock()
	l.have, l.at, l.rows, l.err = true, l.mono(), rows, err
	l.mu.Unlock()
	return slices.Clone(rows), err
}

// cached returns a copy of the last list (with report ages advanced) when
// it is younger than the TTL.
func (l *workerLister) cached() (rows []coordinator.WorkerInfo, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.have {
		return nil, false, nil
	}
	age := l.mono() - l.at
	if age < 0 || age >= l.ttl {
		return nil, false, nil
	}
	rows = slices.Clone(l.rows)
	for i := range rows {
		if rows[i].LastReportAgeMs >= 0 {
			rows[i].LastReportAgeMs += age.Milliseconds()
		}
	}
	return rows, true, l.err
}
