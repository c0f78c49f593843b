package server

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Rate limit of the HTTP library's own messages: at most libLogBurst lines
// per libLogPeriod. The lines dropped are counted: at the end of the period
// in which the first was dropped, one line says how many (field
// "suppressed"), so a burst is never silent however long the quiet after.
const (
	libLogBurst  = 10
	libLogPeriod = time.Second
)

// libLog routes what fasthttp prints (a connection it could not serve, a
// failed accept) into the node's JSON log instead of its default plain-text
// logger on stderr. A client that sends garbage on many connections cannot
// flood the log: lines beyond the burst are dropped and counted.
type libLog struct {
	log zerolog.Logger
	now func() time.Time

	mu         sync.Mutex
	start      time.Time // of the current period
	written    int       // lines written in the current period
	suppressed int       // lines dropped and not yet reported
	flushing   bool      // a report of the dropped lines is scheduled
	after      func(time.Duration, func())
}

// newLibLog returns the library's logger writing to log, which carries the
// component already (the server's own lines share it).
func newLibLog(log zerolog.Logger, now func() time.Time) *libLog {
	return &libLog{log: log, now: now,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// flush reports the lines dropped since the last report.
func (l *libLog) flush() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed, l.flushing = 0, false
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn().Int("suppressed", n).Msgf("%d more messages of the HTTP library were dropped (at most %d a second are logged)", n, libLogBurst)
	}
}

// Printf implements fasthttp.Logger. A connection the library could not
// serve is the client's doing (garbage, a TLS hello, a request too large):
// logged at info. Anything else (accept errors, the connection limit) is
// the node's concern: warn.
func (l *libLog) Printf(format string, args ...any) {
	now := l.now()
	l.mu.Lock()
	if now.Sub(l.start) >= libLogPeriod || now.Before(l.start) {
		l.start, l.written = now, 0
	}
	if l.written >= libLogBurst {
		l.suppressed++
		if !l.flushing {
			l.flushing = true
			l.after(l.start.Add(libLogPeriod).Sub(now), l.flush)
		}
		l.mu.Unlock()
		return
	}
	l.written++
	l.mu.Unlock()

	ev := l.log.Warn()
	if strings.HasPrefix(format, "error when serving connection") {
		ev = l.log.Info()
	}
	ev.Msg(fmt.Sprintf(format, args...))
}
