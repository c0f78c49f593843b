//go:build !chaos

package node

import (
	"testing"
	"time"

	"snowflaked/clock/clocktest"
)

func TestChaosOffIsInert(t *testing.T) {
	base := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	c, routes := chaosSetup(base)
	if c != base || len(routes) != 0 || ChaosBuild {
		t.Fatalf("production build changed the clock (%v) or added routes %v", c != base, routes)
	}
}
