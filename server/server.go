// Package server is snowflaked's HTTP API on fasthttp (SPEC §5).
package server

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"snowflaked/clock"
	"snowflaked/clockguard"
	"snowflaked/snowflake"
)

// IDSource issues IDs; *snowflake.Generator satisfies it.
type IDSource interface {
	Next() (int64, error)
	AppendN(dst []int64, n int) ([]int64, error)
	Layout() snowflake.Layout
}

// Readiness tells whether the node is in service; *clockguard.Guard satisfies it.
type Readiness interface {
	Ready() bool
	Status() clockguard.Status
}

// DefaultMaxBatch is the default --max-batch.
const DefaultMaxBatch = 10000

// Config configures a Server.
type Config struct {
	IDs   IDSource  // required
	Guard Readiness // required
	Clock clock.Clock
	// OnIDError is called (must be quick, non-blocking) when the generator
	// refuses an ID, e.g. with a *snowflake.RollbackError, so the node can
	// leave service. May be nil.
	OnIDError func(error)
	// ClockReport returns the JSON-marshalable body of GET /clock. May be nil.
	ClockReport func() any
	MaxBatch    int           // 0 means DefaultMaxBatch
	RetryAfter  time.Duration // Retry-After on 503; 0 means 1s
	Log         zerolog.Logger
	// Routes are extra handlers by exact path (e.g. /metrics, /status,
	// /debug/chaos/clock); each handler checks its own method.
	Routes map[string]fasthttp.RequestHandler
}

// Server serves the HTTP API.
type Server struct {
	cfg Config
	srv *fasthttp.Server
}

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.IDs == nil || cfg.Guard == nil || cfg.Clock == nil {
		return nil, errors.New("new server: IDs, Guard and Clock are required")
	}
	s := &Server{cfg: cfg}
	s.srv = &fasthttp.Server{Handler: s.Handler(), Name: "snowflaked", ReadTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second}
	return s, nil
}

// Handler returns the request router.
func (s *Server) Handler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) { ctx.Error("TODO", fasthttp.StatusNotImplemented) }
}

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown stops accepting connections and waits (up to ctx) for in-flight
// requests to finish.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.ShutdownWithContext(ctx) }
