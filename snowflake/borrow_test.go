package snowflake_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// With Borrow, a rollback beyond the tolerance is served: the IDs go on
// from the last issued tick (its sequence, then the next ticks), never
// back, and the counters say how many were borrowed.
func TestGeneratorBorrowThroughRollback(t *testing.T) {
	tests := []struct {
		name  string
		back  time.Duration
		ids   int // taken while behind
		ticks int // ticks past the last one they need (4096 a tick)
	}{
		{name: "10ms back, a few IDs", back: 10 * time.Millisecond, ids: 10, ticks: 0},
		{name: "5s back, two ticks' worth", back: 5 * time.Second, ids: 8192, ticks: 2},
		{name: "1h back, a tick and one", back: time.Hour, ids: 4097, ticks: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			l := snowflake.DefaultLayout()
			g := newGen(t, snowflake.Config{Layout: l, WorkerID: 3, Clock: fake, Borrow: true})
			g.SetFence(snowflake.UnixMilliOf(time.Unix(0, fake.WallNanos()).Add(time.Second)))
			fake.Advance(20 * time.Millisecond)
			last := mustNext(t, g)
			lastTick := mustDecode(t, l, last).Tick

			fake.StepWall(-tc.back)
			if got := g.Behind(); got != tc.back {
				t.Errorf("Behind() = %s, want %s", got, tc.back)
			}
			ids, err := g.NextN(tc.ids)
			if err != nil {
				t.Fatalf("NextN(%d) %s behind: %v", tc.ids, tc.back, err)
			}
			checkIncreasing(t, l, ids, last, 3)
			if got := mustDecode(t, l, ids[len(ids)-1]).Tick; got != lastTick+int64(tc.ticks) {
				t.Errorf("last borrowed ID in tick %d, want %d (the last issued tick + %d)", got, lastTick+int64(tc.ticks), tc.ticks)
			}
			st := g.Stats()
			if st.Borrowed != int64(tc.ids) || st.Rollbacks != 0 || st.RollbackWaits != 0 {
				t.Errorf("Stats = %+v, want Borrowed %d and no rollback errors or waits", st, tc.ids)
			}
			// The clock comes back: IDs follow it again, above the borrowed ones.
			fake.StepWall(tc.back + 2*time.Millisecond)
			after := mustNext(t, g)
			checkIncreasing(t, l, []int64{after}, ids[len(ids)-1], 3)
			if got, want := mustDecode(t, l, after).Tick, tickAt(l, time.Unix(0, fake.WallNanos())); got != max(want, lastTick+int64(tc.ticks)) {
				t.Errorf("after the clock caught up, tick %d, want %d", got, want)
			}
			if st := g.Stats(); st.Borrowed != int64(tc.ids) {
				t.Errorf("Borrowed = %d after the clock caught up, want still %d", st.Borrowed, tc.ids)
			}
		})
	}
}

// Within the tolerance nothing is borrowed: the generator waits, as
// without Borrow.
func TestGeneratorBorrowWaitsWithinTolerance(t *testing.T) {
	fake := newFake(t)
	fake.SetAutoStep(time.Microsecond)
	l := snowflake.DefaultLayout()
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 1, Clock: fake, Borrow: true, RollbackTolerance: 5 * time.Millisecond})
	fake.Advance(10 * time.Millisecond)
	last := mustNext(t, g)
	fake.StepWall(-1500 * time.Microsecond)
	ids, err := g.NextN(5000) // more than the last tick holds: waits for the clock
	if err != nil {
		t.Fatal(err)
	}
	checkIncreasing(t, l, ids, last, 1)
	if st := g.Stats(); st.Borrowed != 0 || st.RollbackWaits != 1 {
		t.Errorf("Stats = %+v, want no IDs borrowed and one rollback wait", st)
	}
}

// Borrowing stops at the fence with ErrBorrowExhausted (not
// ErrFenceReached: the keeper cannot help), a batch refused there leaves
// dst alone, and a fence moved on lets it go on.
func TestGeneratorBorrowStopsAtFence(t *testing.T) {
	fake := newFake(t)
	l := mustLayout(t, "41/10/12", time.Millisecond)
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 5, Clock: fake, Borrow: true})
	fence := time.Unix(0, fake.WallNanos()).Add(3 * time.Millisecond) // ticks up to start+3 may be issued
	g.SetFence(snowflake.UnixMilliOf(fence))
	last := mustNext(t, g) // tick start
	fake.StepWall(-time.Second)

	// The rest of tick start and ticks +1..+3: 4*4096-1 IDs, then the fence.
	ids, err := g.NextN(4*4096 - 1)
	if err != nil {
		t.Fatalf("borrowing within the fence: %v", err)
	}
	checkIncreasing(t, l, ids, last, 5)
	if got, want := mustDecode(t, l, ids[len(ids)-1]).Tick, tickAt(l, fence); got != want {
		t.Fatalf("last ID before the fence in tick %d, want the fence's %d", got, want)
	}
	_, err = g.Next()
	if !errors.Is(err, snowflake.ErrBorrowExhausted) || errors.Is(err, snowflake.ErrFenceReached) {
		t.Fatalf("Next at the fence while borrowing: %v, want ErrBorrowExhausted only", err)
	}
	if !strings.Contains(err.Error(), "ahead of the clock") {
		t.Errorf("error %q does not say how far ahead the IDs are", err)
	}
	dst := []int64{42}
	if got, err := g.AppendN(dst, 3); !errors.Is(err, snowflake.ErrBorrowExhausted) || len(got) != 1 {
		t.Errorf("AppendN at the fence = %v, %v", got, err)
	}
	if st := g.Stats(); st.BorrowExhausted != 2 || st.FenceHits != 0 || st.Borrowed != 4*4096-1 {
		t.Errorf("Stats = %+v, want BorrowExhausted 2, no fence hits, Borrowed %d", st, 4*4096-1)
	}
	// The fence moves on: borrowing resumes after the last ID.
	g.SetFence(snowflake.UnixMilliOf(fence.Add(time.Millisecond)))
	id := mustNext(t, g)
	checkIncreasing(t, l, []int64{id}, ids[len(ids)-1], 5)
}

// Without Borrow the same rollback is the error it always was.
func TestGeneratorLeaveIsUnchanged(t *testing.T) {
	fake := newFake(t)
	g := newGen(t, snowflake.Config{WorkerID: 5, Clock: fake})
	mustNext(t, g)
	fake.StepWall(-time.Second)
	if _, err := g.Next(); !errors.Is(err, snowflake.ErrClockRollback) {
		t.Fatalf("Next 1s behind without Borrow: %v, want ErrClockRollback", err)
	}
	if st := g.Stats(); st.Borrowed != 0 || st.Rollbacks != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

// A clock that steps both ways at random, a fence that only moves up and
// batches of every size: every ID is above the previous one and inside the
// fence that held when it was issued. With the fence check of the borrow
// path removed, or borrowing from the clock's tick instead of the last
// issued one, this fails.
func TestGeneratorBorrowRandomSteps(t *testing.T) {
	var borrowed, exhaustedAll int
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		fake := newFake(t)
		fake.SetAutoStep(time.Microsecond)              // a tick used up in step with the clock waits for the next
		l := mustLayout(t, "41/10/6", time.Millisecond) // 64 a tick: batches cross ticks
		g := newGen(t, snowflake.Config{Layout: l, WorkerID: 9, Clock: fake, Borrow: true})
		fence := time.Unix(0, fake.WallNanos()).Add(50 * time.Millisecond)
		g.SetFence(snowflake.UnixMilliOf(fence))
		prev := int64(0)
		var issued, exhausted int
		for range 2000 {
			switch r := rng.IntN(10); {
			case r < 2:
				fake.StepWall(-time.Duration(rng.IntN(200)) * time.Millisecond)
			case r < 4:
				fake.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
			case r < 5: // the keeper: now + 50ms, never lower
				if f := time.Unix(0, fake.WallNanos()).Add(50 * time.Millisecond); f.After(fence) {
					fence = f
					g.SetFence(snowflake.UnixMilliOf(fence))
				}
			default:
				ids, err := g.NextN(1 + rng.IntN(200))
				if errors.Is(err, snowflake.ErrBorrowExhausted) || errors.Is(err, snowflake.ErrFenceReached) {
					exhausted++
					continue
				}
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				for _, id := range ids {
					if id <= prev {
						t.Fatalf("seed %d: ID %d after %d", seed, id, prev)
					}
					if tick := mustDecode(t, l, id).Tick; tick > tickAt(l, fence) {
						t.Fatalf("seed %d: ID in tick %d past the fence's %d", seed, tick, tickAt(l, fence))
					}
					prev = id
				}
				issued += len(ids)
			}
		}
		if issued == 0 {
			t.Fatalf("seed %d: no ID issued", seed)
		}
		borrowed += int(g.Stats().Borrowed)
		exhaustedAll += int(g.Stats().BorrowExhausted)
	}
	if borrowed == 0 || exhaustedAll == 0 {
		t.Fatalf("%d IDs borrowed, %d refused at the fence while borrowing: the seeds did not cover borrowing to the fence", borrowed, exhaustedAll)
	}
	t.Logf("%d IDs borrowed, %d borrowing requests refused at the fence", borrowed, exhaustedAll)
}

// Goroutines borrowing at once share one sequence: no ID twice, each
// goroutine's IDs rising, and none refused inside the fence.
func TestGeneratorBorrowConcurrent(t *testing.T) {
	const goroutines, perG = 8, 5000
	fake := newFake(t)
	l := snowflake.DefaultLayout()
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 30, Clock: fake, Borrow: true})
	g.SetFence(snowflake.UnixMilliOf(time.Unix(0, fake.WallNanos()).Add(time.Second)))
	mustNext(t, g)
	fake.StepWall(-5 * time.Second)
	out := concurrentIDs(t, g, goroutines, perG)
	checkUnique(t, l, 30, out, perG)
	if got := g.Stats().Borrowed; got != goroutines*perG {
		t.Errorf("Borrowed = %d, want %d", got, goroutines*perG)
	}
}

// Borrowing up to the layout's last tick ends in ErrBorrowExhausted (the
// node stays out until the clock catches up), not ErrTimeOverflow, whose
// check clears while the clock is behind the end and would make the node
// flap.
func TestGeneratorBorrowAtTheLayoutsEnd(t *testing.T) {
	fake := newFake(t)
	l := mustLayout(t, "41/10/12", time.Millisecond)
	end := l.End() // the start of the tick after the last
	fake.StepWall(end.Sub(time.Unix(0, fake.WallNanos())) - time.Millisecond)
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 5, Clock: fake, Borrow: true})
	g.SetFence(snowflake.UnixMilliOf(end.Add(time.Hour)))
	if _, err := g.NextN(4096); err != nil { // the last tick, used up
		t.Fatal(err)
	}
	fake.StepWall(-time.Second)
	if _, err := g.Next(); !errors.Is(err, snowflake.ErrBorrowExhausted) {
		t.Fatalf("borrowing past the layout's last tick: %v, want ErrBorrowExhausted", err)
	}
}
