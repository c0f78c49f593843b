package server

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Query parameters and error code of /bounds (see client/wire).
const (
	paramFrom        = wire.ParamFrom
	paramTo          = wire.ParamTo
	codeInvalidRange = wire.CodeInvalidRange
)

// boundsTimeFormat writes /bounds' times: RFC 3339, UTC, milliseconds.
const boundsTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// maxUUIDMilli is the largest unix_ts_ms a UUIDv7 holds (48 bits).
const maxUUIDMilli = 1<<48 - 1

// serveBounds answers GET /bounds?from=…&to=…: the IDs of the layout
// whose tick lies in [from, to), as a wire.BoundsBody. It is arithmetic on
// the layout: served in and out of service alike.
func (s *Server) serveBounds(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	if !s.checkParams(ctx, args, paramFrom, paramTo) {
		return
	}
	var raw [2][]byte
	for i, name := range []string{paramFrom, paramTo} {
		if !args.Has(name) {
			s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidRange,
				name+" is required: "+wire.PathBounds+"?"+paramFrom+"=…&"+paramTo+"=… with RFC 3339 times (2026-01-02T15:04:05Z, an offset or a fraction allowed) or Unix milliseconds")
			return
		}
		raw[i] = args.Peek(name)
	}
	body, err := boundsOf(s.cfg.IDs.Layout(), string(raw[0]), string(raw[1]), s.uuidErr == nil)
	if err != nil {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidRange, err.Error())
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, body)
}

// parseBoundTime reads one end of a /bounds range: an RFC 3339 time
// (offset or Z, fraction allowed) or a decimal Unix time in milliseconds;
// it returns the instant, rounded down to the millisecond.
func parseBoundTime(name, v string) (snowflake.UnixMilli, error) {
	if v == "" {
		return 0, errors.New(name + " is empty: want an RFC 3339 time (2026-01-02T15:04:05Z) or Unix milliseconds")
	}
	digits := v
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if allDigits([]byte(digits)) {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, errors.New(name + " " + strconv.Quote(v) + " is out of range for Unix milliseconds")
		}
		return snowflake.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, errors.New(name + " " + strconv.Quote(v) + " is neither an RFC 3339 time (2026-01-02T15:04:05Z, 2026-01-02T17:04:05.250+02:00) nor Unix milliseconds")
	}
	return snowflake.UnixMilliOf(t), nil // rounds down, before 1970 too
}

// boundsOf is /bounds for layout l: from and to as the request gives
// them; uuids says whether the layout makes UUIDs (else they are left
// out). Its errors are the invalid_range messages.
func boundsOf(l snowflake.Layout, from, to string, uuids bool) (wire.BoundsBody, error) {
	fromMS, err := parseBoundTime(paramFrom, from)
	if err != nil {
		return wire.BoundsBody{}, err
	}
	toMS, err := parseBoundTime(paramTo, to)
	if err != nil {
		return wire.BoundsBody{}, err
	}
	epoch, unit := snowflake.UnixMilliOf(l.Epoch), int64(l.Unit/time.Millisecond)
	ticks := int64(1) << l.TimeBits // the time field's ticks: 0 .. ticks-1
	end, endOK := tickMilli(epoch, unit, ticks)
	fmtMS := func(ms snowflake.UnixMilli) string { return ms.Time().Format(boundsTimeFormat) }
	switch {
	case fromMS < epoch:
		return wire.BoundsBody{}, errors.New("from " + strconv.Quote(from) + " is before the layout's epoch " + fmtMS(epoch) + ": no ID is that old")
	case endOK && toMS > end:
		return wire.BoundsBody{}, errors.New("to " + strconv.Quote(to) + " is after the end of the layout's time field, " + fmtMS(end) + " (" +
			strconv.FormatUint(uint64(l.TimeBits), 10) + " bits of " + l.Unit.String() + " from " + fmtMS(epoch) + ")")
	case fromMS > toMS:
		return wire.BoundsBody{}, errors.New("the range is reversed: from " + strconv.Quote(from) + " is after to " + strconv.Quote(to))
	}
	fromTick, toTick := floorDiv(int64(fromMS-epoch), unit), floorDiv(int64(toMS-epoch), unit)
	if fromTick >= toTick {
		if fromMS == toMS {
			return wire.BoundsBody{}, errors.New("the range is empty: from and to are the same time, and to is excluded")
		}
		start, _ := tickMilli(epoch, unit, fromTick)
		return wire.BoundsBody{}, errors.New("the range is empty: from and to fall in the same tick, which starts at " + fmtMS(start) +
			" (ticks of " + l.Unit.String() + "; both are truncated to the start of their tick, and to is excluded): end it at the next tick or later")
	}
	// fromTick < toTick ≤ ticks: every tick start fits (to ≤ end does).
	startMS, _ := tickMilli(epoch, unit, fromTick)
	endMS, _ := tickMilli(epoch, unit, toTick)
	shift := l.WorkerBits + l.SequenceBits
	body := wire.BoundsBody{
		From: fmtMS(startMS), To: fmtMS(endMS), FromMS: int64(startMS), ToMS: int64(endMS),
		MinID: strconv.FormatUint(uint64(fromTick)<<shift, 10),
		MaxID: strconv.FormatUint(uint64(toTick)<<shift-1, 10), // toTick<<shift is at most 2^63
	}
	lastMS, _ := tickMilli(epoch, unit, toTick-1)
	if uuids && lastMS <= maxUUIDMilli {
		body.MinUUID = wire.FormatUUID(uuidBound(startMS, false))
		body.MaxUUID = wire.FormatUUID(uuidBound(lastMS, true))
	}
	return body, nil
}

// uuidBound is the smallest (ones false) or largest version 7 UUID of
// millisecond ms: version 7, variant 10, every other bit 0 or 1.
func uuidBound(ms snowflake.UnixMilli, ones bool) [16]byte {
	var rest uint64 // rand_a (12 bits) and rand_b (62 bits)
	if ones {
		rest = math.MaxUint64
	}
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], uint64(ms)<<16|0x7<<12|rest&0xfff)
	binary.BigEndian.PutUint64(u[8:16], 0b10<<62|rest&(1<<62-1))
	return u
}

// tickMilli is the start of tick (unit in ms), and false when it does not
// fit an int64.
func tickMilli(epoch snowflake.UnixMilli, unit, tick int64) (snowflake.UnixMilli, bool) {
	if tick > (math.MaxInt64-max(int64(epoch), 0))/unit {
		return 0, false
	}
	return epoch + snowflake.UnixMilli(tick*unit), true
}

// floorDiv is floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
