//go:build !unix

package clock

import "time"

// wallNanos reads the wall clock.
func wallNanos() int64 { return time.Now().UnixNano() }
