package server

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// StartingConfig configures a Starting server.
type StartingConfig struct {
	// Status says what the node waits for (state Starting, a reason and
	// a detail); required. Called on every /readyz and refused request.
	Status func() health.Status
	// Authorize, when not nil, is asked first about every request, as
	// Config.Authorize is by the node's server (the same function: mutual
	// TLS allow-lists): a non-nil error answers 403 client_not_allowed
	// with the error as message, /healthz included.
	Authorize func(ctx *fasthttp.RequestCtx) error
	// Admin, when not nil, says whether the request comes from a client
	// that may read Status's detail (what the node waits for names
	// ZooKeeper's addresses and the lease holder: the node's state, as
	// its admin endpoints show it); the others get the state and reason
	// without it. Nil: every client gets the detail.
	Admin      func(ctx *fasthttp.RequestCtx) bool
	RetryAfter time.Duration // Retry-After on 503; 0 means 1s
	Log        zerolog.Logger
}

// startingReadTimeout bounds reading a request while the node starts: the
// phase is short, and a connection that sends nothing must not hold the
// hand-over to the node's server.
const startingReadTimeout = 2 * time.Second

// Starting answers HTTP while a node starts, before its Server exists (the
// claim of a worker ID can take a session timeout and more): a client that
// Authorize refuses gets 403 client_not_allowed on every path, as from the
// node's server; to the others GET /healthz is 200, GET /readyz and
// /readyz/segment 503 with state starting and what the node waits for,
// every other path 503 out_of_service with the same state, reason and
// detail (never a refused or hanging connection, which a liveness probe
// would count against the process). The detail goes to admins only (see
// StartingConfig.Admin). Each response closes its connection, so none
// outlives the phase.
type Starting struct {
	status     func() health.Status
	authorize  func(*fasthttp.RequestCtx) error
	admin      func(*fasthttp.RequestCtx) bool
	retryAfter []byte
	srv        *fasthttp.Server
}

// NewStarting checks cfg and returns a Starting server.
func NewStarting(cfg StartingConfig) (*Starting, error) {
	if cfg.Status == nil {
		return nil, errors.New("new starting server: Status is required")
	}
	if cfg.RetryAfter < 0 {
		return nil, errors.New("new starting server: negative retry-after")
	}
	ra := cfg.RetryAfter
	if ra == 0 {
		ra = defaultRetryAfter
	}
	s := &Starting{status: cfg.Status, authorize: cfg.Authorize, admin: cfg.Admin, retryAfter: strconv.AppendInt(nil, max(int64((ra+time.Second-1)/time.Second), 1), 10)}
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		Logger:             newLibLog(cfg.Log, time.Now),
		Name:               "snowflaked",
		ReadTimeout:        startingReadTimeout,
		WriteTimeout:       defaultWriteTimeout,
		IdleTimeout:        startingReadTimeout,
		MaxRequestBodySize: maxRequestBodySize,
		CloseOnShutdown:    true,
	}
	return s, nil
}

// Serve serves on ln until Shutdown.
func (s *Starting) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown stops accepting connections and waits (up to ctx) for the
// requests in flight.
func (s *Starting) Shutdown(ctx context.Context) error { return s.srv.ShutdownWithContext(ctx) }

func (s *Starting) handle(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	ctx.Response.Header.SetCanonical(hdrCacheControl, valNoStore)
	if !authorized(ctx, s.authorize) {
		return
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.SetCanonical(hdrAllow, valAllow)
		writeErrorJSON(ctx, fasthttp.StatusMethodNotAllowed, errorBody{Error: errorDetail{
			Code: codeMethodNotAllowed, Message: "method " + quote(ctx.Method()) + " is not allowed: use GET or HEAD"}})
		return
	}
	r, _ := match(ctx.Path())
	if r != nil && r.ep == endpoint.Healthz {
		writeBody(ctx, fasthttp.StatusOK, ctJSON, bodyHealthz)
		return
	}
	st := s.status()
	if s.admin != nil && !s.admin(ctx) {
		st.Detail = ""
	}
	ctx.Response.Header.SetCanonical(hdrRetryAfter, s.retryAfter)
	if r != nil && r.ep == endpoint.Readyz {
		writeErrorJSON(ctx, fasthttp.StatusServiceUnavailable, readyBody{State: st.State.String(), Reason: string(st.Reason), Detail: st.Detail})
		return
	}
	msg := "node is not in service: " + st.State.String() + " (" + string(st.Reason) + ")"
	if st.Detail != "" {
		msg += ": " + st.Detail
	}
	writeErrorJSON(ctx, fasthttp.StatusServiceUnavailable, unavailableBody{Error: unavailableDetail{
		Code: codeOutOfService, Message: msg, Reason: string(st.Reason), State: st.State.String()}})
}
