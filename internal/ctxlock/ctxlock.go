// Package ctxlock is a mutex for critical sections that wait on I/O (a
// ZooKeeper round, a disk write that may hang), and a semaphore for calls
// that do: waiting for either can be given up with a context, and the
// waiters block on a channel, which a testing/synctest bubble counts as
// durably blocked (a sync.Mutex it does not, so a simulation whose holder
// waits on virtual time would stall).
package ctxlock

import "context"

// Mutex is a context-aware mutex. Its zero value is not usable: call New.
type Mutex chan struct{}

// New returns an unlocked Mutex.
func New() Mutex { return make(Mutex, 1) }

// Lock locks m, waiting as long as it takes.
func (m Mutex) Lock() { m <- struct{}{} }

// LockCtx locks m unless ctx ends first (then it returns ctx's error and m
// is not locked).
func (m Mutex) LockCtx(ctx context.Context) error { return Semaphore(m).Acquire(ctx) }

// Unlock unlocks m.
func (m Mutex) Unlock() { <-m }

// Semaphore lets up to its capacity of holders in at once. Its zero value
// is not usable: call NewSemaphore.
type Semaphore chan struct{}

// NewSemaphore returns a Semaphore with n free slots (n >= 1).
func NewSemaphore(n int) Semaphore { return make(Semaphore, n) }

// Acquire takes a slot unless ctx has ended or ends first (then it returns
// ctx's error and holds no slot). An ended context wins over a free slot:
// select would pick between them at random.
func (s Semaphore) Acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release frees a slot taken by Acquire.
func (s Semaphore) Release() { <-s }
