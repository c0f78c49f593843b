package snowflake

import (
	"math"
	"testing"
	"time"
)

func TestFloorTick(t *testing.T) {
	tests := []struct {
		name    string
		t, e, u int64
		want    int64
	}{
		{name: "zero", t: 0, e: 0, u: 10, want: 0},
		{name: "inside tick 0", t: 9, e: 0, u: 10, want: 0},
		{name: "tick 1", t: 10, e: 0, u: 10, want: 1},
		{name: "-1", t: -1, e: 0, u: 10, want: -1},
		{name: "-10", t: -10, e: 0, u: 10, want: -1},
		{name: "-11", t: -11, e: 0, u: 10, want: -2},
		{name: "epoch offset", t: 105, e: 100, u: 10, want: 0},
		{name: "before epoch offset", t: 99, e: 100, u: 10, want: -1},
		{name: "min int64", t: math.MinInt64, e: 0, u: 1, want: math.MinInt64},
		{name: "min int64 by 10", t: math.MinInt64, e: 0, u: 10, want: math.MinInt64/10 - 1},
		{name: "max int64", t: math.MaxInt64, e: 0, u: 1, want: math.MaxInt64},
		{name: "wraps below", t: math.MinInt64 + 5, e: 10, u: 1, want: math.MinInt64},
		{name: "wraps above", t: math.MaxInt64 - 5, e: -10, u: 1, want: math.MaxInt64},
		{name: "no wrap at the edge", t: math.MinInt64 + 10, e: 10, u: 1, want: math.MinInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := floorTick(tc.t, tc.e, tc.u); got != tc.want {
				t.Errorf("floorTick(%d, %d, %d) = %d, want %d", tc.t, tc.e, tc.u, got, tc.want)
			}
		})
	}
}

func TestTickMilli(t *testing.T) {
	l := Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: DefaultEpoch, Unit: 10 * time.Millisecond}
	e := DefaultEpoch.UnixMilli()
	tests := []struct {
		name string
		ms   int64
		tick int64
	}{
		{name: "epoch", ms: e, tick: 0},
		{name: "epoch+9", ms: e + 9, tick: 0},
		{name: "epoch+10", ms: e + 10, tick: 1},
		{name: "epoch-1", ms: e - 1, tick: -1},
		{name: "zero", ms: 0, tick: -((e + 9) / 10)},
		{name: "max", ms: math.MaxInt64, tick: (math.MaxInt64 - e) / 10},
		{name: "min", ms: math.MinInt64, tick: math.MinInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := l.tickOfMilli(tc.ms)
			if got != tc.tick {
				t.Fatalf("tickOfMilli(%d) = %d, want %d", tc.ms, got, tc.tick)
			}
			// Where it fits, the tick's start is at or before ms, and the
			// next tick's after it; they agree with TickOf in nanoseconds.
			start, ok := l.tickStartMilli(got)
			if !ok {
				return
			}
			if start > tc.ms || (start <= math.MaxInt64-10 && start+10 <= tc.ms) {
				t.Errorf("tick %d starts at %d, which does not contain %d", got, start, tc.ms)
			}
			if tc.ms > -1<<50 && tc.ms < 1<<50 {
				if ns := l.TickOf(tc.ms * int64(time.Millisecond)); ns != got {
					t.Errorf("TickOf in ns = %d, tickOfMilli = %d", ns, got)
				}
			}
		})
	}
	for _, tick := range []int64{math.MaxInt64, math.MaxInt64/10 + 1, math.MinInt64, math.MinInt64/10 - 1} {
		if ms, ok := l.tickStartMilli(tick); ok {
			t.Errorf("tickStartMilli(%d) = %d, true; want it not to fit", tick, ms)
		}
	}
	last := (math.MaxInt64 - e) / 10
	if ms, ok := l.tickStartMilli(last); !ok || ms != e+last*10 {
		t.Errorf("tickStartMilli of the last fitting tick = %d, %v; want %d", ms, ok, e+last*10)
	}
	if ms, ok := l.tickStartMilli(last + 1); ok {
		t.Errorf("tickStartMilli past the last fitting tick = %d, true", ms)
	}
}

// On a unit below 1ms (an invalid layout) the helpers answer in whole
// milliseconds instead of dividing by zero.
func TestTickMilliSubMillisecondUnit(t *testing.T) {
	l := Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: DefaultEpoch, Unit: time.Microsecond}
	e := DefaultEpoch.UnixMilli()
	if got := l.tickOfMilli(e + 5); got != 5 {
		t.Errorf("tickOfMilli(epoch+5) = %d, want 5", got)
	}
	if got, ok := l.tickStartMilli(5); got != e || !ok {
		t.Errorf("tickStartMilli(5) = %d, %v; want the epoch %d", got, ok, e)
	}
}

// The generator's tickOf (a constant divisor for 1 ms, tickOfAny for the
// rest) agrees with Layout.TickOf for every unit, before and after the
// epoch and at the extremes of int64.
func TestGeneratorTickOfMatchesLayout(t *testing.T) {
	for _, unit := range []time.Duration{time.Millisecond, 10 * time.Millisecond, time.Second} {
		for _, epoch := range []time.Time{DefaultEpoch, time.Unix(0, 0)} {
			l := Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: epoch, Unit: unit}
			g := &Generator{epochNs: epoch.UnixNano(), unitNs: int64(unit)}
			e := epoch.UnixNano()
			for _, ns := range []int64{e, e + 1, e - 1, e + int64(unit) - 1, e + int64(unit), e - int64(unit),
				e - int64(unit) - 1, 0, -1, 1, time.Now().UnixNano(), math.MaxInt64, math.MinInt64, math.MinInt64 + e} {
				if got, want := g.tickOf(ns), l.TickOf(ns); got != want {
					t.Errorf("unit %s, epoch %d: tickOf(%d) = %d, Layout.TickOf = %d", unit, e, ns, got, want)
				}
			}
		}
	}
}
