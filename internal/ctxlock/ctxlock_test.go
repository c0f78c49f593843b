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
