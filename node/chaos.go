package node

import (
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// chaosHooks is what chaosSetup gives the node: its clock (offset in a chaos
// build), extra routes (/debug/chaos/*), and a hook run before every
// cache-file write (nil outside chaos builds; in one, it blocks while the
// disk is made to hang).
type chaosHooks struct {
	clock       clock.Clock
	routes      map[string]fasthttp.RequestHandler
	beforeWrite func()
}
