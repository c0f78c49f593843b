// Package clock separates the two clocks a snowflake node depends on: the
// wall clock, which can be stepped (by NTP, an operator or a fault), and the
// monotonic clock, which cannot. Everything that reads time takes a Clock so
// that tests and chaos builds can move the wall clock without touching the
// monotonic one, exactly as a real NTP step does.
//
// It also arms the product's timers: NewTimer, AfterFunc, Sleep,
// NewTicker, WithTimeout and WithDeadline are the time and context
// package's, except that a Schedule carried by the context decides when
// they fire. Production sets none; the simulations set an Apart, under
// which no two timers fire at one virtual instant. A test keeps every
// timer of the module armed here (TestTimersArmedThroughTheSchedule).
package clock

import "time"

// Clock reads wall and monotonic time independently.
type Clock interface {
	// WallNanos returns the wall-clock time in Unix nanoseconds. It may jump
	// backwards or forwards.
	WallNanos() int64
	// Mono returns the time elapsed since a fixed, arbitrary origin on a
	// clock that never steps.
	Mono() time.Duration
}

// System is the machine's clock. Its zero value is not usable: call NewSystem.
type System struct {
	origin time.Time
}

// NewSystem returns the machine's clock, with its monotonic origin set to now.
func NewSystem() *System { return &System{origin: time.Now()} }

// WallNanos returns the wall-clock time in Unix nanoseconds (microsecond
// precision on Unix systems).
func (s *System) WallNanos() int64 { return wallNanos() }

// Mono returns the monotonic time elapsed since NewSystem.
func (s *System) Mono() time.Duration { return time.Since(s.origin) }

// WallTime converts a Clock's wall reading into a time.Time without a
// monotonic component.
func WallTime(c Clock) time.Time { return time.Unix(0, c.WallNanos()) }
