package snowflake_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// FuzzDecode: any int64 decodes without panicking, with the default and
// js53 layouts; every ID in range round-trips through Compose, anything else
// is ErrInvalidID.
func FuzzDecode(f *testing.F) {
	for _, id := range []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1<<53 - 1, 1 << 53, 1<<22 | 1<<12 | 1, 197_140_459_712_856_064} {
		f.Add(id)
	}
	layouts := []snowflake.Layout{snowflake.DefaultLayout(), snowflake.JS53Layout()}
	f.Fuzz(func(t *testing.T, id int64) {
		for _, l := range layouts {
			p, err := l.Decode(id)
			if id < 0 || id > l.MaxID() {
				if !errors.Is(err, snowflake.ErrInvalidID) || p != (snowflake.Parts{}) {
					t.Fatalf("%s: Decode(%d) = %+v, %v; want ErrInvalidID", l, id, p, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: Decode(%d): %v", l, id, err)
			}
			if p.ID != id || l.Compose(p.Tick, p.WorkerID, p.Sequence) != id {
				t.Fatalf("%s: Decode(%d) = %+v does not compose back", l, id, p)
			}
			if p.Tick < 0 || p.Tick > l.MaxTick() || p.WorkerID < 0 || p.WorkerID > l.MaxWorkerID() || p.Sequence < 0 || p.Sequence > l.MaxSequence() {
				t.Fatalf("%s: Decode(%d) = %+v has a field out of range", l, id, p)
			}
			if want := l.Epoch.Add(time.Duration(p.Tick) * l.Unit); !p.Time.Equal(want) || p.UnixMilli() != want.UnixMilli() {
				t.Fatalf("%s: Decode(%d).Time = %s, want %s", l, id, p.Time, want)
			}
		}
	})
}

// FuzzParseLayout: any strings parse without panicking; a layout that
// parses validates, prints bits that parse back to it, survives JSON, and
// issues an ID at now.
func FuzzParseLayout(f *testing.F) {
	seeds := [][3]string{
		{"41/10/12", "2024-01-01T00:00:00Z", "1ms"},
		{"js53", "2024-01-01T00:00:00Z", "1ms"},
		{"default", "2020-02-29T23:59:59.999+05:30", "10ms"},
		{"39/16/8", "1970-01-01T00:00:00Z", "1h"},
		{"62/0/1", "2025-06-01T11:00:00Z", "1h"},
		{"20/21/22", "2025-06-01T11:59:00Z", "1ms"},
		{"41/12/11", "2024-01-01T00:00:00Z", "1ms"},
		{"41/10", "2024-01-01", "1us"},
		{"a/b/c", "", ""},
		{"-1/10/12", "2024-01-01T00:00:00.0005Z", "1.5ms"},
		{"64/0/0", "2999-01-01T00:00:00Z", "2h"},
		{" 41 / 10 / 12 ", " 2024-01-01T00:00:00Z ", " 1s "},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	now := testNow
	f.Fuzz(func(t *testing.T, bits, epoch, unit string) {
		_, _, _, _ = snowflake.ParseBits(bits)
		l, err := snowflake.ParseLayout(bits, epoch, unit, now)
		if err != nil {
			if !errors.Is(err, snowflake.ErrInvalidLayout) || l != (snowflake.Layout{}) {
				t.Fatalf("ParseLayout(%q, %q, %q) = %s, %v; want the zero Layout and ErrInvalidLayout", bits, epoch, unit, l.Describe(), err)
			}
			return
		}
		if err := l.Validate(now); err != nil {
			t.Fatalf("ParseLayout(%q, %q, %q) = %s, which does not validate: %v", bits, epoch, unit, l.Describe(), err)
		}
		checkLayoutRoundTrips(t, l, now)
		checkLayoutIssuesAtNow(t, l, now)
	})
}

// checkLayoutRoundTrips checks that a parsed layout prints bits that parse
// back to it, survives JSON, covers now, and decodes its first and last IDs.
func checkLayoutRoundTrips(t *testing.T, l snowflake.Layout, now time.Time) {
	t.Helper()
	tb, wb, sb, err := snowflake.ParseBits(l.String())
	if err != nil || tb != l.TimeBits || wb != l.WorkerBits || sb != l.SequenceBits {
		t.Fatalf("ParseBits(%q) = %d/%d/%d, %v; want %s", l.String(), tb, wb, sb, err, l)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatalf("Marshal(%s): %v", l.Describe(), err)
	}
	var back snowflake.Layout
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(l) {
		t.Fatalf("JSON round trip of %s via %s = %s, %v", l.Describe(), b, back.Describe(), err)
	}
	if !l.End().After(now) || l.PerSecond() <= 0 || l.MaxID() <= 0 {
		t.Fatalf("%s: End %s, PerSecond %v, MaxID %d", l.Describe(), l.End(), l.PerSecond(), l.MaxID())
	}
	for _, id := range []int64{0, l.MaxID()} {
		p, err := l.Decode(id)
		if err == nil && l.Compose(p.Tick, p.WorkerID, p.Sequence) != id {
			t.Fatalf("%s: Decode(%d) = %+v does not compose back", l.Describe(), id, p)
		}
		if err != nil && (id == 0 || !errors.Is(err, snowflake.ErrInvalidID)) {
			t.Fatalf("%s: Decode(%d): %v", l.Describe(), id, err)
		}
	}
}

// checkLayoutIssuesAtNow checks that a generator on the layout issues the
// first ID of now's tick.
func checkLayoutIssuesAtNow(t *testing.T, l snowflake.Layout, now time.Time) {
	t.Helper()
	// A generator issues an ID at now, in now's tick (tick 0 is the
	// "nothing issued yet" mark, so only from tick 1 on).
	tick := l.TickOf(now.UnixNano())
	if tick < 1 {
		return
	}
	g, err := snowflake.NewGenerator(snowflake.Config{Layout: l, WorkerID: l.MaxWorkerID(), Clock: clocktest.NewFake(now)})
	if err != nil {
		t.Fatalf("NewGenerator(%s): %v", l.Describe(), err)
	}
	id, err := g.Next()
	if err != nil {
		t.Fatalf("%s: Next at %s: %v", l.Describe(), now, err)
	}
	if want := l.Compose(tick, l.MaxWorkerID(), 0); id != want {
		t.Fatalf("%s: Next = %d, want %d (tick %d)", l.Describe(), id, want, tick)
	}
}
