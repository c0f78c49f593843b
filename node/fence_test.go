package node

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fakeGen is a generator's fence and last issued tick.
type fakeGen struct {
	mu          sync.Mutex
	fence, last snowflake.UnixMilli
}

func (g *fakeGen) SetFence(f snowflake.UnixMilli)  { g.mu.Lock(); g.fence = f; g.mu.Unlock() }
func (g *fakeGen) get() snowflake.UnixMilli        { g.mu.Lock(); defer g.mu.Unlock(); return g.fence }
func (g *fakeGen) LastIssued() snowflake.UnixMilli { g.mu.Lock(); defer g.mu.Unlock(); return g.last }

// A re-claim that lands between the keeper computing a fence and the write
// reading the coordinator's token (it raises the floor to the previous
// holder's fence, then publishes the new token) must not put the new token
// on disk with the fence computed before: a kill -9 then, and the restart
// (which trusts the file whose token the claim wrote) would start inside
// the previous holder's IDs. The fence written is raised to the floor read
// after the token, and the keeper hands the generator what was written.
func TestFenceWriterRaisesToTheFloorReadAfterTheToken(t *testing.T) {
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	path := filepath.Join(t.TempDir(), "cache.json")
	gen := &fakeGen{}
	const prevFence = 1_750_000_100_000 // the previous holder's: 100s ahead
	w := &fenceWriter{
		disk: disk.OS{},
		path: path, entry: cachefile.Entry{WorkerID: 3, Layout: snowflake.DefaultLayout(), Token: "old"},
		clock: clk, floor: gen.LastIssued, finalZKFence: func() snowflake.UnixMilli { return 0 },
		status: func() coordinator.Status {
			gen.mu.Lock()
			gen.last = prevFence // the re-claim: floor first, then the token
			gen.mu.Unlock()
			return coordinator.Status{Token: "new", ZKFence: prevFence + 30_000}
		},
	}
	k := fencing.NewKeeper(health.New(zerolog.Nop(), nil), clk, gen, 3*time.Second, 0, w.persist, zerolog.Nop())
	if err := k.Extend(context.Background()); err != nil { // computes now+3s, then the write reads the new token
		t.Fatal(err)
	}
	e, err := cachefile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if e.Token != "new" || e.Fence < prevFence {
		t.Fatalf("cache file: token %q with fence %d; want the new token with a fence at or past the previous holder's %d", e.Token, e.Fence, prevFence)
	}
	if k.Persisted() != e.Fence || snowflake.UnixMilli(gen.get()) != e.Fence {
		t.Fatalf("keeper records %d, generator fenced at %d; want both at the fence written %d", k.Persisted(), gen.get(), e.Fence)
	}
}
