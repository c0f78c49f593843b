package server

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Rate limit of the HTTP library's own messages: at most libLogBurst lines
// per libLogPeriod; the lines dropped in between are counted in the next
// line written (field "suppressed").
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
	suppressed int       // lines dropped since the last one written
}

func newLibLog(log zerolog.Logger, now func() time.Time) *libLog {
	return &libLog{log: log.With().Str("component", "http").Logger(), now: now}
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
		l.mu.Unlock()
		return
	}
	l.written++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()

	ev := l.log.Warn()
	if strings.HasPrefix(format, "error when serving connection") {
		ev = l.log.Info()
	}
	if suppressed > 0 {
		ev = ev.Int("suppressed", suppressed)
	}
	ev.Msg(fmt.Sprintf(format, args...))
}
