package coordinator

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// A fresh claim after ResumeFromCache whose write commits with its answer
// lost completes, on the in-memory ZooKeeper, in virtual time: whether the
// next read of the forever znode answers at once or times out first (then
// a later read must still take our own token for ours, not for another
// process's claim).
func TestReclaimAfterLostAnswerCompletes(t *testing.T) {
	cases := []struct {
		name     string
		slowRead time.Duration // the first read of the forever znode after the lost answer
	}{
		{"the next read answers", 0},
		{"the next read times out first", 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := zkmem.New()
				cfg := testConfig(t, []string{"127.0.0.1:2181"}, "moved")
				cfg.Dial = srv.Dial
				elsewhere := newCoord(t, cfg)
				old := mustClaim(t, elsewhere)
				high := time.Now().Add(2 * time.Second).UnixMilli()
				if err := elsewhere.Close(context.Background(), snowflake.UnixMilli(high)); err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				phase := 0
				srv.SetInjector(func(r zkmem.Request) zkmem.Fault {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case phase == 0 && r.Op == "multi":
						phase = 1
						return zkmem.Fault{Kind: zkmem.LoseAnswer}
					case phase == 1 && r.Op == "get" && r.Path == old.Path:
						phase = 2
						return zkmem.Fault{Delay: tc.slowRead}
					}
					return zkmem.Fault{}
				})
				c := newCoord(t, cfg)
				if err := c.ResumeFromCache(Resume{WorkerID: old.WorkerID, Token: "an-older-token",
					ZKFence: snowflake.UnixMilliOf(time.Now().Add(time.Minute)), Incarnation: old.Incarnation}); err != nil {
					t.Fatal(err)
				}
				fs := &testFence{}
				c.Attach(health.New(testsupport.Log(t, nil), nil))
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx, fs) }()
				time.Sleep(30 * time.Second)
				st := c.Status()
				c.mu.Lock()
				blocked := c.st.blocked
				c.mu.Unlock()
				cancel()
				<-done
				mu.Lock()
				lost := phase >= 1
				mu.Unlock()
				switch {
				case !lost:
					t.Fatal("no multi went out: the answer was never lost")
				case blocked != "":
					t.Fatalf("blocked for good: %s", blocked)
				case !st.LeaseHeld || st.Token == "an-older-token" || st.Token == old.Token:
					t.Fatalf("the claim did not complete: lease held %v, token %q", st.LeaseHeld, st.Token)
				case fs.floor.Load() != high:
					t.Fatalf("floor %d, want the previous holder's fence %d", fs.floor.Load(), high)
				}
			})
		})
	}
}
