package server

import (
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// An /ids batch spanning several ticks is issued one tick's worth at a
// time, with the node's readiness and the batch's time bound checked in
// between.
func TestIDsBatchChecksBetweenTicks(t *testing.T) {
	// 4 IDs per tick, so count=20 takes 5 chunks.
	layout, err := snowflake.ParseLayout("41/10/2", "2024-01-01T00:00:00Z", "1ms", fakeNow)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		after     func(f *fixture, n int) // after each chunk
		wantCode  string                  // "" for 200
		wantCalls int64
		wantChunk int // every chunk's size
	}{
		{name: "in service throughout: all 20 in 5 chunks", wantCalls: 5, wantChunk: 4},
		{name: "leaves service after the first tick: 503, nothing issued", wantCode: "out_of_service", wantCalls: 1,
			after: func(f *fixture, _ int) { f.check.Fail("test: out") }},
		{name: "too slow: 503 batch_timeout past the bound", wantCode: "batch_timeout", wantCalls: 2,
			after: func(f *fixture, _ int) { f.clk.Advance(700 * time.Millisecond) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ids := &fakeIDs{layout: layout}
			var f *fixture
			var chunks []int
			ids.afterAppend = func(n int) {
				chunks = append(chunks, n)
				if tc.after != nil {
					tc.after(f, n)
				}
			}
			f = newFixture(t, layout, func(c *Config) { c.IDs = ids }).serve(t)
			r := f.do(t, "GET", "/ids?count=20")
			if got := ids.calls.Load(); got != tc.wantCalls {
				t.Fatalf("generator asked %d times (chunks %v), want %d", got, chunks, tc.wantCalls)
			}
			if tc.wantCode == "" {
				if r.status != 200 || len(strings.Fields(string(r.body))) != 20 {
					t.Fatalf("status %d body %q", r.status, r.body)
				}
				for _, c := range chunks {
					if c != tc.wantChunk {
						t.Fatalf("chunks %v, want each %d", chunks, tc.wantChunk)
					}
				}
				return
			}
			if r.status != 503 {
				t.Fatalf("status %d body %s, want 503", r.status, r.body)
			}
			if e := decodeError(t, r); e.Code != tc.wantCode {
				t.Fatalf("error %+v, want code %s", e, tc.wantCode)
			}
		})
	}
}
