//go:build !chaos

package node

import (
	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// ChaosBuild reports whether this binary was built with -tags chaos.
const ChaosBuild = false

// ChaosClockOffsetEnv sets the clock offset a chaos build starts with; other
// builds ignore it.
const ChaosClockOffsetEnv = "SNOWFLAKED_CHAOS_CLOCK_OFFSET"

// chaosSetup is the fault-injection seam. Without the chaos tag it
// returns the clock unchanged, no routes and no disk decorator: /debug/chaos/*
// answers 404, and SNOWFLAKED_CHAOS_CLOCK_OFFSET is ignored.
func chaosSetup(c clock.Clock) (chaosHooks, error) {
	return chaosHooks{clock: c}, nil
}
