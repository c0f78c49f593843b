package ctxlock

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestLockCtxGivesUpWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New()
		m.Lock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := m.LockCtx(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("LockCtx on a held lock: %v, want the deadline", err)
		}
		got := make(chan struct{})
		go func() { m.Lock(); close(got) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a second holder got the lock while the first held it")
		default:
		}
		m.Unlock()
		<-got
		m.Unlock()
		if err := m.LockCtx(context.Background()); err != nil {
			t.Fatalf("LockCtx on a free lock: %v", err)
		}
	})
}

func TestSemaphore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSemaphore(2)
		for i := range 2 {
			if err := s.Acquire(context.Background()); err != nil {
				t.Fatalf("slot %d of 2: %v", i+1, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a third holder of 2 slots: %v, want the deadline", err)
		}
		got := make(chan struct{})
		go func() {
			if err := s.Acquire(context.Background()); err == nil {
				close(got)
			}
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a third holder got in while two held their slots")
		default:
		}
		s.Release()
		<-got
	})
}

// An ended context wins over a free slot (and a free lock), in every run:
// select alone would take either.
func TestAnEndedContextWinsOverAFreeSlot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 100 {
		s := NewSemaphore(1)
		if err := s.Acquire(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("try %d: Acquire with an ended context: %v, want it refused", i, err)
		}
		m := New()
		if err := m.LockCtx(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("try %d: LockCtx with an ended context: %v, want it refused", i, err)
		}
	}
}
