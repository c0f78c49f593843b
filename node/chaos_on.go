//go:build chaos

package node

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
)

// ChaosBuild reports whether this binary was built with -tags chaos.
const ChaosBuild = true

// chaosClockPath is the fault-injection endpoint of chaos builds.
const chaosClockPath = "/debug/chaos/clock"

// chaosDiskPath is the fault-injection endpoint that makes the node's
// cache-file writes hang (hang=true) and lets them go (hang=false).
const chaosDiskPath = "/debug/chaos/disk"

// ChaosClockOffsetEnv sets the clock offset a chaos build starts with.
const ChaosClockOffsetEnv = "SNOWFLAKED_CHAOS_CLOCK_OFFSET"

// chaosSetup is the fault-injection seam. With the chaos tag the
// node's clock gets an adjustable wall-clock offset, set by
// POST /debug/chaos/clock?offset=-5s (offset=0 resets). The offset at start
// is SNOWFLAKED_CHAOS_CLOCK_OFFSET (a Go duration; unset means 0), so a
// node can start with its clock already off.
func chaosSetup(c clock.Clock) (chaosHooks, error) {
	oc := &offsetClock{base: c}
	if raw, ok := os.LookupEnv(ChaosClockOffsetEnv); ok {
		d, err := time.ParseDuration(raw)
		if err != nil {
			return chaosHooks{}, fmt.Errorf("%w: %s=%q: want a Go duration like -5s: %w", ErrInvalidConfig, ChaosClockOffsetEnv, raw, err)
		}
		oc.offset.Store(int64(d))
	}
	gate := &diskGate{}
	return chaosHooks{
		clock:  oc,
		routes: map[string]fasthttp.RequestHandler{chaosClockPath: oc.handle, chaosDiskPath: gate.handle},
		disk:   func(d disk.Disk) disk.Disk { return hungDisk{Disk: d, gate: gate} },
	}, nil
}

// hungDisk is a disk whose writes wait while the gate hangs, as an fsync on
// a dead disk does; reads pass.
type hungDisk struct {
	disk.Disk
	gate *diskGate
}

// WriteFileAtomic waits while the disk hangs, then writes.
func (h hungDisk) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	h.gate.wait()
	return h.Disk.WriteFileAtomic(name, data, perm)
}

// diskGate makes cache-file writes hang, as an fsync on a dead disk does:
// POST /debug/chaos/disk?hang=true blocks every write until hang=false.
type diskGate struct {
	mu      sync.Mutex
	release chan struct{} // non-nil while hung
}

// wait blocks while the disk hangs.
func (d *diskGate) wait() {
	d.mu.Lock()
	ch := d.release
	d.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (d *diskGate) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", fasthttp.MethodPost)
		writeChaosError(ctx, fasthttp.StatusMethodNotAllowed, "method_not_allowed", "use POST "+chaosDiskPath+"?hang=true")
		return
	}
	hang, err := strconv.ParseBool(string(ctx.QueryArgs().Peek("hang")))
	if err != nil {
		writeChaosError(ctx, fasthttp.StatusBadRequest, "invalid_hang", "hang must be true or false")
		return
	}
	d.mu.Lock()
	switch {
	case hang && d.release == nil:
		d.release = make(chan struct{})
	case !hang && d.release != nil:
		close(d.release)
		d.release = nil
	}
	d.mu.Unlock()
	writeChaosJSON(ctx, fasthttp.StatusOK, map[string]any{"hang": hang})
}

// offsetClock shifts the wall clock by an offset, as an NTP step or an
// operator does; the monotonic clock is untouched.
type offsetClock struct {
	base   clock.Clock
	offset atomic.Int64 // nanoseconds
}

func (o *offsetClock) WallNanos() int64    { return o.base.WallNanos() + o.offset.Load() }
func (o *offsetClock) Mono() time.Duration { return o.base.Mono() }

type chaosError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (o *offsetClock) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", fasthttp.MethodPost)
		writeChaosError(ctx, fasthttp.StatusMethodNotAllowed, "method_not_allowed", "use POST "+chaosClockPath+"?offset=-5s")
		return
	}
	raw := string(ctx.QueryArgs().Peek("offset"))
	d, err := time.ParseDuration(raw)
	if raw == "" || err != nil {
		writeChaosError(ctx, fasthttp.StatusBadRequest, "invalid_offset", "offset "+`"`+raw+`"`+" is not a Go duration like -5s (0 resets)")
		return
	}
	o.offset.Store(int64(d))
	writeChaosJSON(ctx, fasthttp.StatusOK, map[string]any{"offset": d.String(), "offset_ns": int64(d)})
}

func writeChaosError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	var e chaosError
	e.Error.Code, e.Error.Message = code, msg
	writeChaosJSON(ctx, status, e)
}

func writeChaosJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v) // plain maps and structs of strings and ints cannot fail
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
