package node

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

const timeFieldWarning = "the timestamp field of the layout runs out soon: plan a new epoch or layout"

// layoutEnding returns a 37-bit-millisecond layout (≈4.36 years of time
// field) whose field runs out `left` after now, and its epoch as a flag value.
func layoutEnding(t testing.TB, now time.Time, left time.Duration) (snowflake.Layout, string) {
	t.Helper()
	const bits = 37
	span := time.Duration(1<<bits) * time.Millisecond
	epoch := now.Add(left - span).UTC().Truncate(time.Second)
	l, err := snowflake.ParseLayout("37/10/12", epoch.Format(time.RFC3339), "1ms", now)
	if err != nil {
		t.Fatalf("layout ending in %s: %v", left, err)
	}
	return l, epoch.Format(time.RFC3339)
}

const year = time.Duration(365.25 * 24 * float64(time.Hour))

// The periodic check warns once fewer than two years are left, on the
// node's clock, and stays quiet before.
func TestTimeFieldPeriodicWarning(t *testing.T) {
	tests := []struct {
		name      string
		left      time.Duration // at the start
		advance   time.Duration // the clock moves this far while the node runs
		wantYears float64       // years left the warning reports
	}{
		{"3 years left, then 1.5 years pass", 3 * year, 3 * year / 2, 1.5},
		{"2.01 years left, then a week passes", 2*year + year/100, 7 * 24 * time.Hour, 2.01 - 7.0/365.25},
		{"1 day left, then it runs out", 24 * time.Hour, 48 * time.Hour, -1.0 / 365.25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			clk := clocktest.NewFake(start)
			l, _ := layoutEnding(t, start, tc.left)
			var logs testsupport.SyncBuffer
			n := &node{layout: l, clock: clk, log: zerolog.New(&logs), seams: seams{yearsLeftEvery: time.Millisecond}}

			startYears := n.checkTimeField()
			if want := tc.left.Hours() / year.Hours(); math.Abs(startYears-want) > 0.001 {
				t.Errorf("years left at the start %v, want %v", startYears, want)
			}
			if warned := len(logs.Lines(t, timeFieldWarning)) > 0; warned != (startYears < yearsLeftWarning) {
				t.Errorf("warning at the start: %v with %.3f years left", warned, startYears)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { n.watchTimeField(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			before := len(logs.Lines(t, timeFieldWarning))

			clk.Advance(tc.advance)
			deadline := time.Now().Add(10 * time.Second)
			var lines []map[string]any
			for lines = logs.Lines(t, timeFieldWarning); len(lines) <= before; lines = logs.Lines(t, timeFieldWarning) {
				if time.Now().After(deadline) {
					t.Fatalf("no warning within 10s of checks every 1ms with %.3f years left", n.yearsLeft())
				}
				time.Sleep(time.Millisecond)
			}
			last := lines[len(lines)-1]
			if got, _ := last["years_left"].(float64); math.Abs(got-tc.wantYears) > 0.002 {
				t.Errorf("warning says %v years left, want %.3f", got, tc.wantYears)
			}
			if last["level"] != "warn" || last["ends"] != l.End().UTC().Format(time.RFC3339) || last["layout"] != "37/10/12" {
				t.Errorf("warning line %v", last)
			}
		})
	}
}

// A layout with more than two years left does not warn.
func TestTimeFieldNoWarningFarFromTheEnd(t *testing.T) {
	now := time.Now()
	nearLimit, _ := layoutEnding(t, now, 2*year+24*time.Hour)
	tests := []struct {
		name   string
		layout snowflake.Layout
	}{
		{"a day more than two years", nearLimit},
		{"default layout", snowflake.DefaultLayout()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(now)
			var logs testsupport.SyncBuffer
			n := &node{layout: tc.layout, clock: clk, log: zerolog.New(&logs)}
			for range 3 {
				if y := n.checkTimeField(); y < yearsLeftWarning {
					t.Fatalf("%v years left", y)
				}
				clk.Advance(time.Hour)
			}
			if got := logs.Lines(t, timeFieldWarning); len(got) != 0 {
				t.Errorf("warned: %v", got)
			}
		})
	}
}

// A node started with a layout near its end warns in its startup log, and
// its /metrics report the years left.
func TestRunWarnsWhenTheTimeFieldRunsOut(t *testing.T) {
	now := time.Now()
	_, epoch := layoutEnding(t, now, year)
	cfg := testConfig(t, 2)
	cfg.Layout, cfg.Epoch = "37/10/12", epoch
	var logs testsupport.SyncBuffer
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, withSeams(cfg, withListener(ln)), zerolog.New(&logs)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s")
		}
	})
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	lines := logs.Lines(t, timeFieldWarning)
	if len(lines) != 1 {
		t.Fatalf("%d warnings at start, want 1", len(lines))
	}
	if y, _ := lines[0]["years_left"].(float64); math.Abs(y-1) > 0.01 {
		t.Errorf("warning says %v years left, want about 1", y)
	}
	if y := scrapeHTTP(t, addr)["snowflaked_time_field_years_left"]; math.Abs(y-1) > 0.01 {
		t.Errorf("snowflaked_time_field_years_left = %v, want about 1", y)
	}
}
