package snowflake

import (
	"math"
	"strconv"
	"time"
)

// UnixMilli is a wall-clock instant in milliseconds since the Unix epoch:
// the unit of fences, floors and a node's reported time. It encodes to JSON
// as that integer.
type UnixMilli int64

// NoFence is the fence of a generator that has none: later than any
// instant.
const NoFence UnixMilli = math.MaxInt64

// UnixMilliOf returns the instant t, truncated to the millisecond.
func UnixMilliOf(t time.Time) UnixMilli { return UnixMilli(t.UnixMilli()) }

// UnixMilliNow returns c's wall reading, truncated to the millisecond.
func UnixMilliNow(c Clock) UnixMilli { return UnixMilli(c.WallNanos() / int64(time.Millisecond)) }

// Time returns the instant as a time.Time in UTC.
func (u UnixMilli) Time() time.Time { return time.UnixMilli(int64(u)).UTC() }

// Add returns u+d, d truncated to whole milliseconds.
func (u UnixMilli) Add(d time.Duration) UnixMilli { return u + UnixMilli(d/time.Millisecond) }

// Sub returns the duration u-v, saturated to the range of a time.Duration.
func (u UnixMilli) Sub(v UnixMilli) time.Duration {
	const lim = math.MaxInt64 / int64(time.Millisecond)
	d := int64(u) - int64(v)
	switch {
	case (d > 0) != (u > v): // the difference overflowed
		if u > v {
			return math.MaxInt64
		}
		return math.MinInt64
	case d > lim:
		return math.MaxInt64
	case d < -lim:
		return math.MinInt64
	}
	return time.Duration(d) * time.Millisecond
}

// String returns the instant in RFC 3339 with milliseconds and the integer,
// e.g. "2026-01-02T15:04:05.000Z (1767366245000)".
func (u UnixMilli) String() string {
	return u.Time().Format("2006-01-02T15:04:05.000Z07:00") + " (" + strconv.FormatInt(int64(u), 10) + ")"
}
