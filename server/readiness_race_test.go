package server

import (
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// raceGuard answers Ready and Status as if the state changed between the two
// calls: Ready reports the old state, Status the new one.
type raceGuard struct {
	ready  bool
	status health.Status
}

func (g raceGuard) Ready() bool           { return g.ready }
func (g raceGuard) Status() health.Status { return g.status }

// TestReadinessReadBetweenTransitions: the node changes state between the
// server's atomic Ready check and its Status snapshot. Entering service in
// between must serve (never a 503 whose state is in_service and whose reason
// is empty, as a chaos run once saw); leaving service in between must answer
// 503 with the real reason.
func TestReadinessReadBetweenTransitions(t *testing.T) {
	tests := []struct {
		name       string
		guard      raceGuard
		wantStatus int
		wantInBody string
	}{
		{"entered service between the reads", raceGuard{false, health.Status{State: health.InService}}, 200, ""},
		{"out of service", raceGuard{false, health.Status{State: health.OutOfService, Reason: health.ReasonClockRollback}}, 503, `"reason":"clock_rollback"`},
		{"starting", raceGuard{false, health.Status{State: health.Starting, Reason: health.ReasonStarting}}, 503, `"reason":"starting"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) { c.Guard = tc.guard }).serve(t)
			for _, uri := range []string{"/id", "/ids?count=3", "/api/snowflake/get/k", "/readyz"} {
				r := f.do(t, "GET", uri)
				if r.status != tc.wantStatus {
					t.Fatalf("GET %s: status %d, want %d: %s", uri, r.status, tc.wantStatus, r.body)
				}
				if tc.wantStatus == 503 {
					if !strings.Contains(string(r.body), tc.wantInBody) || strings.Contains(string(r.body), `"reason":""`) {
						t.Fatalf("GET %s: body %s, want %s and a non-empty reason", uri, r.body, tc.wantInBody)
					}
					if r.retryAfter == "" {
						t.Fatalf("GET %s: 503 without Retry-After", uri)
					}
				}
			}
		})
	}
}
