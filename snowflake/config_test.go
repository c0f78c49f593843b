package snowflake_test

import (
	"errors"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// wallClock is a Clock declared outside the module's internal packages, as
// a caller of the library declares one: the machine's clock.
type wallClock struct{ origin time.Time }

func (c wallClock) WallNanos() int64    { return time.Now().UnixNano() }
func (c wallClock) Mono() time.Duration { return time.Since(c.origin) }

// A Config needs no clock: nil is the system clock. Its IDs increase and
// carry the time the system clock read when they were made.
func TestConfigWithoutClockUsesTheSystemClock(t *testing.T) {
	tests := []struct {
		name   string
		layout snowflake.Layout
		clock  snowflake.Clock
	}{
		{name: "nil clock, default layout", layout: snowflake.DefaultLayout()},
		{name: "nil clock, js53", layout: snowflake.JS53Layout()},
		{name: "a caller's clock", layout: snowflake.DefaultLayout(), clock: wallClock{origin: time.Now()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := snowflake.NewGenerator(snowflake.Config{Layout: tc.layout, WorkerID: 1, Clock: tc.clock})
			if err != nil {
				t.Fatalf("NewGenerator without a clock: %v", err)
			}
			before := time.Now()
			var last int64
			for i := range 10_000 {
				id, err := g.Next()
				if err != nil {
					t.Fatalf("Next #%d: %v", i, err)
				}
				if id <= last {
					t.Fatalf("Next #%d = %d, not above %d", i, id, last)
				}
				last = id
			}
			after := time.Now()
			p, err := tc.layout.Decode(last)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Unix(0, tc.layout.TickStart(p.Tick))
			if at.Before(before.Truncate(tc.layout.Unit)) || at.After(after) {
				t.Errorf("last ID's time %s is not between %s and %s: not the system clock", at, before, after)
			}
			if p.WorkerID != 1 {
				t.Errorf("last ID's worker %d, want 1", p.WorkerID)
			}
		})
	}
}

// The zero RollbackTolerance is DefaultRollbackTolerance; none at all is
// NoRollbackTolerance, no sentinel value: a clock behind the last issued
// tick by any amount is then an error at once.
func TestRollbackToleranceZeroValueAndNone(t *testing.T) {
	tests := []struct {
		name          string
		cfg           snowflake.Config
		back          time.Duration // the clock's step back after the first ID
		wantErr       bool
		wantTolerance time.Duration // in the RollbackError
	}{
		{name: "zero value, 1ms back", cfg: snowflake.Config{}, back: time.Millisecond},
		{name: "zero value, 5ms back", cfg: snowflake.Config{}, back: snowflake.DefaultRollbackTolerance},
		{name: "zero value, 6ms back", cfg: snowflake.Config{}, back: 6 * time.Millisecond, wantErr: true, wantTolerance: snowflake.DefaultRollbackTolerance},
		{name: "none, 1ms back", cfg: snowflake.Config{NoRollbackTolerance: true}, back: time.Millisecond, wantErr: true},
		{name: "none, 1ns back", cfg: snowflake.Config{NoRollbackTolerance: true}, back: time.Nanosecond, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			cfg := tc.cfg
			cfg.WorkerID, cfg.Clock = 2, fake
			g := newGen(t, cfg)
			last := mustNext(t, g)
			fake.StepWall(-tc.back)
			id, err := g.Next()
			if !tc.wantErr {
				if err != nil || id <= last {
					t.Fatalf("Next %s behind = %d, %v; want an ID above %d", tc.back, id, err, last)
				}
				return
			}
			var rb *snowflake.RollbackError
			if !errors.As(err, &rb) || id != 0 {
				t.Fatalf("Next %s behind = %d, %v; want 0 and a *RollbackError", tc.back, id, err)
			}
			if rb.Behind != tc.back || rb.Tolerance != tc.wantTolerance {
				t.Errorf("RollbackError{Behind: %s, Tolerance: %s}, want {%s, %s}", rb.Behind, rb.Tolerance, tc.back, tc.wantTolerance)
			}
			if st := g.Stats(); st.Rollbacks != 1 || st.RollbackWaits != 0 {
				t.Errorf("Stats() = %+v, want one rollback and no wait", st)
			}
		})
	}
}
