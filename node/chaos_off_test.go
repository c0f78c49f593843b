//go:build !chaos

package node

import (
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
)

func TestChaosOffIsInert(t *testing.T) {
	base := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	t.Setenv(ChaosClockOffsetEnv, "-5s")
	hooks, err := chaosSetup(base)
	c, routes := hooks.clock, hooks.routes
	if err != nil || c != base || len(routes) != 0 || hooks.disk != nil || ChaosBuild {
		t.Fatalf("production build changed the clock (%v), added routes %v or failed: %v", c != base, routes, err)
	}
}
