package node

import (
	"errors"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// --rollback-tolerance reaches the generator as given: 0 is none (a
// rollback of a tick is refused at once), not the library's default.
func TestNewGeneratorRollbackTolerance(t *testing.T) {
	tests := []struct {
		name    string
		tol     time.Duration // --rollback-tolerance
		back    time.Duration // the clock's step back after the first ID
		wantErr bool
	}{
		{name: "0 refuses 1ms back", tol: 0, back: time.Millisecond, wantErr: true},
		{name: "default waits out 1ms back", tol: defaultConfig().RollbackTolerance, back: time.Millisecond},
		{name: "2ms refuses 3ms back", tol: 2 * time.Millisecond, back: 3 * time.Millisecond, wantErr: true},
		{name: "2ms waits out 2ms back", tol: 2 * time.Millisecond, back: 2 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.RollbackTolerance = tc.tol
			fake := clocktest.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
			n := &node{cfg: cfg, clock: fake, layout: snowflake.DefaultLayout()}
			n.ident.entry.WorkerID = 1
			if err := n.newGenerator(); err != nil {
				t.Fatal(err)
			}
			n.issuing.SetFence(snowflake.UnixMilliNow(fake).Add(time.Minute)) // as the fence keeper does
			last, err := n.gen.Next()
			if err != nil {
				t.Fatal(err)
			}
			fake.StepWall(-tc.back)
			id, err := n.gen.Next()
			var rb *snowflake.RollbackError
			switch {
			case !tc.wantErr && (err != nil || id <= last):
				t.Fatalf("Next %s behind with --rollback-tolerance %s = %d, %v; want an ID above %d", tc.back, tc.tol, id, err, last)
			case tc.wantErr && !errors.As(err, &rb):
				t.Fatalf("Next %s behind with --rollback-tolerance %s = %d, %v; want a *RollbackError", tc.back, tc.tol, id, err)
			case tc.wantErr && rb.Tolerance != tc.tol:
				t.Errorf("RollbackError tolerance %s, want --rollback-tolerance %s", rb.Tolerance, tc.tol)
			}
		})
	}
}
