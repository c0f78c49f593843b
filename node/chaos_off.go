//go:build !chaos

package node

import (
	"github.com/valyala/fasthttp"

	"snowflaked/clock"
)

// ChaosBuild reports whether this binary was built with -tags chaos.
const ChaosBuild = false

// chaosSetup is the fault-injection seam (SPEC §7). Without the chaos tag it
// returns the clock unchanged and no routes: /debug/chaos/* answers 404.
func chaosSetup(c clock.Clock) (clock.Clock, map[string]fasthttp.RequestHandler) {
	return c, nil
}
