//go:build !chaos

package node

import (
	"github.com/valyala/fasthttp"

	"snowflaked/clock"
)

// ChaosBuild reports whether this binary was built with -tags chaos.
const ChaosBuild = false

// ChaosClockOffsetEnv sets the clock offset a chaos build starts with; other
// builds ignore it.
const ChaosClockOffsetEnv = "SNOWFLAKED_CHAOS_CLOCK_OFFSET"

// chaosSetup is the fault-injection seam (SPEC §7). Without the chaos tag it
// returns the clock unchanged and no routes: /debug/chaos/* answers 404, and
// SNOWFLAKED_CHAOS_CLOCK_OFFSET is ignored.
func chaosSetup(c clock.Clock) (clock.Clock, map[string]fasthttp.RequestHandler, error) {
	return c, nil, nil
}
