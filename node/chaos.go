package node

import (
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
)

// chaosHooks is what chaosSetup gives the node: its clock (offset in a chaos
// build), extra routes (/debug/chaos/*), and a decorator of the disk under
// the fence keeper's cache-file writes (nil outside chaos builds; in one,
// its writes block while the disk is made to hang).
type chaosHooks struct {
	clock  clock.Clock
	routes map[string]fasthttp.RequestHandler
	disk   func(disk.Disk) disk.Disk
}
