// Package startuplog holds back what libraries print through the standard
// logger while the program initialises, before main can route that logger
// into its own structured log. VictoriaMetrics/metrics, for one, prints
// "INFO: metrics: disable exposing PSI metrics because of failed init" from
// a package-level initializer on machines without cgroup pressure files,
// so every start (even --help) began with a stray line on stderr.
//
// How it gets there first: Go initialises packages in the order of their
// import paths, each once its imports are done (Go spec, "Package
// initialization", since Go 1.21). This package imports only the standard
// log package (and what log itself imports), so it is ready whenever a
// library that logs is, and its path
// (codeberg.org/snowflaked/snowflaked/internal/startuplog) sorts before
// github.com/...: its init runs first and points the standard logger at a
// buffer. A main imports it and calls Take once its own log is set up.
// TestNoStrayStartupLines (cmd/snowflaked) fails if this ever stops holding.
package startuplog

import (
	"log"
	"sync"
)

// maxHeld bounds what is held back (a library logging in a loop at init
// must not grow memory without bound); the rest is counted as dropped.
const maxHeld = 64 << 10

// held is the standard logger's output until Take.
var held struct {
	mu      sync.Mutex
	buf     []byte
	dropped int
}

type holder struct{}

func (holder) Write(p []byte) (int, error) {
	held.mu.Lock()
	defer held.mu.Unlock()
	if len(held.buf)+len(p) > maxHeld {
		held.dropped += len(p)
		return len(p), nil
	}
	held.buf = append(held.buf, p...)
	return len(p), nil
}

func init() { log.SetOutput(holder{}) }

// Take returns the lines held back so far, without their line ends, and
// how many bytes were dropped beyond the bound. The standard logger keeps
// writing to the holder until the caller points it elsewhere (do that right
// after Take).
func Take() (lines []string, dropped int) {
	held.mu.Lock()
	defer held.mu.Unlock()
	start := 0
	for i, b := range held.buf {
		if b == '\n' {
			lines = append(lines, string(held.buf[start:i]))
			start = i + 1
		}
	}
	if start < len(held.buf) {
		lines = append(lines, string(held.buf[start:]))
	}
	held.buf, dropped, held.dropped = nil, held.dropped, 0
	return lines, dropped
}
