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

// workerLister gives the status page one page of the cluster's worker
// list (coordinator.ListWorkerPage: over the coordinator's own ZooKeeper
// session, a number of reads bounded by the page) without reading
// ZooKeeper on every view: a page (or its error) is reused for ttl while
// views ask for the same limit, and only one listing runs at a time;
// callers that arrive meanwhile wait for it (bounded by their context)
// instead of starting another. Report ages are advanced by the time since
// the page was read, so a cached page does not make reports look fresher
// than they are.
type workerLister struct {
	ttl  time.Duration
	mono func() time.Duration // monotonic clock, for the page's age
	list func(ctx context.Context, timeout time.Duration, limit int) (coordinator.WorkerPage, error)
	busy ctxlock.Mutex // held while a listing runs

	mu    sync.Mutex
	have  bool
	at    time.Duration // mono of the last listing
	limit int           // the last listing's limit
	page  coordinator.WorkerPage
	err   error
}

func newWorkerLister(ttl time.Duration, mono func() time.Duration,
	list func(ctx context.Context, timeout time.Duration, limit int) (coordinator.WorkerPage, error)) *workerLister {
	return &workerLister{ttl: ttl, mono: mono, list: list, busy: ctxlock.New()}
}

// WorkerPage returns the cached page of limit rows while it is younger
// than the TTL, or lists the workers again.
func (l *workerLister) WorkerPage(ctx context.Context, limit int) (coordinator.WorkerPage, error) {
	if pg, ok, err := l.cached(limit); ok {
		return pg, err
	}
	if err := l.busy.LockCtx(ctx); err != nil {
		return coordinator.WorkerPage{}, fmt.Errorf("list workers: waiting for its turn: %w", err)
	}
	defer l.busy.Unlock()
	if pg, ok, err := l.cached(limit); ok { // listed while we waited
		return pg, err
	}
	timeout := coordinator.DefaultWorkerPageTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return coordinator.WorkerPage{}, fmt.Errorf("list workers: %w", context.DeadlineExceeded)
	}
	pg, err := l.list(ctx, timeout, limit)
	l.mu.Lock()
	l.have, l.at, l.limit, l.page, l.err = true, l.mono(), limit, pg, err
	l.mu.Unlock()
	pg.Workers = slices.Clone(pg.Workers)
	return pg, err
}

// cached returns a copy of the last page (with report ages advanced) when
// it is younger than the TTL and of the same limit.
func (l *workerLister) cached(limit int) (pg coordinator.WorkerPage, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.have || l.limit != limit {
		return coordinator.WorkerPage{}, false, nil
	}
	age := l.mono() - l.at
	if age < 0 || age >= l.ttl {
		return coordinator.WorkerPage{}, false, nil
	}
	pg = l.page
	pg.Workers = slices.Clone(l.page.Workers)
	for i := range pg.Workers {
		if pg.Workers[i].LastReportAgeMs >= 0 {
			pg.Workers[i].LastReportAgeMs += age.Milliseconds()
		}
	}
	return pg, true, l.err
}
