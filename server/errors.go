package server

import (
	"encoding/json"
	"errors"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Error codes of the API: the "code" of {"error":{"code":…,"message":…}},
// public API, defined (with the status each comes with) in client/wire.
const (
	codeInvalidCount     = wire.CodeInvalidCount
	codeInvalidFormat    = wire.CodeInvalidFormat
	codeInvalidParameter = wire.CodeInvalidParameter
	codeInvalidID        = wire.CodeInvalidID
	codeInvalidKey       = wire.CodeInvalidKey
	codeInvalidGene      = wire.CodeInvalidGene
	codeGeneOff          = wire.CodeGeneOff
	codeTagExhausted     = wire.CodeTagExhausted
	codeInvalidUUID      = wire.CodeInvalidUUID
	codeUUIDOff          = wire.CodeUUIDOff
	codeBadRequest       = wire.CodeBadRequest
	codeNotFound         = wire.CodeNotFound
	codeMethodNotAllowed = wire.CodeMethodNotAllowed
	codeRequestTimeout   = wire.CodeRequestTimeout
	codeBodyTooLarge     = wire.CodeBodyTooLarge
	codeHeaderTooLarge   = wire.CodeHeaderTooLarge
	codeInternal         = wire.CodeInternal
	codeOutOfService     = wire.CodeOutOfService
	codeClockRollback    = wire.CodeClockRollback
	codeFenceReached     = wire.CodeFenceReached
	codeBorrowExhausted  = wire.CodeBorrowExhausted
	codeTimeOverflow     = wire.CodeTimeOverflow
	codeClockError       = wire.CodeClockError
	codeIDError          = wire.CodeIDError
	codeBatchTimeout     = wire.CodeBatchTimeout
	codeClientNotAllowed = wire.CodeClientNotAllowed
)

// The bodies of error answers (see wire.ErrorBody; the 503 form,
// wire.UnavailableBody, also carries the reason and the node's state).
type (
	errorBody         = wire.ErrorBody
	errorDetail       = wire.ErrorDetail
	unavailableBody   = wire.UnavailableBody
	unavailableDetail = wire.UnavailableDetail
)

// writeError writes a JSON error. Errors are the slow path: allocating
// here is fine.
func (s *Server) writeError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	writeErrorJSON(ctx, status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

// authorized asks authorize (Config.Authorize, StartingConfig.Authorize)
// about the request: nil lets every request through; an error answers 403
// client_not_allowed with the error as message. It reports whether the
// request may go on. The node's server and the start phase's server both
// refuse through it, so a client gets the same answer from either.
func authorized(ctx *fasthttp.RequestCtx, authorize func(*fasthttp.RequestCtx) error) bool {
	if authorize == nil {
		return true
	}
	err := authorize(ctx)
	if err == nil {
		return true
	}
	writeErrorJSON(ctx, fasthttp.StatusForbidden, errorBody{Error: errorDetail{Code: codeClientNotAllowed, Message: err.Error()}})
	return false
}

// unavailable writes a 503 with Retry-After.
func (s *Server) unavailable(ctx *fasthttp.RequestCtx, code, reason, state, msg string) {
	ctx.Response.Header.SetCanonical(hdrRetryAfter, s.retryAfter)
	writeErrorJSON(ctx, fasthttp.StatusServiceUnavailable, unavailableBody{
		Error: unavailableDetail{Code: code, Message: msg, Reason: reason, State: state},
	})
}

func writeErrorJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // cannot happen: plain strings only
		body = []byte(`{"error":{"code":"` + codeInternal + `","message":"cannot encode the error"}}`)
		status = fasthttp.StatusInternalServerError
	}
	writeBody(ctx, status, ctJSON, body)
}

// notInService reports whether the node is out of service, and then a
// snapshot of why. Ready is one atomic load; only when it says no is the
// full status read, and if the node entered service between the two reads
// it counts as in service: a 503 must always carry a real reason, never an
// "in_service" state with an empty one.
func (s *Server) notInService() (health.Status, bool) {
	if s.cfg.Guard.Ready() {
		return health.Status{}, false
	}
	st := s.cfg.Guard.Status()
	return st, st.State != health.InService
}

// outOfService answers 503 out_of_service with the guard's state, reason and
// detail (st from notInService).
func (s *Server) outOfService(ctx *fasthttp.RequestCtx, st health.Status) {
	msg := "node is not in service: " + st.State.String()
	if st.Reason != "" {
		msg += " (" + string(st.Reason) + ")"
	}
	if st.Detail != "" {
		msg += ": " + st.Detail
	}
	s.unavailable(ctx, codeOutOfService, string(st.Reason), st.State.String(), msg)
}

// idError answers 503 because the generator refused an ID, after telling
// Config.OnIDError (which may take the node out of service).
func (s *Server) idError(ctx *fasthttp.RequestCtx, err error) {
	if s.cfg.OnIDError != nil {
		s.cfg.OnIDError(err)
	}
	code := classifyIDError(err)
	s.log.Warn().Err(err).Str("code", code).Bytes("path", ctx.Path()).Msg("generator refused IDs")
	st := s.cfg.Guard.Status() // read after OnIDError: it may have changed the state
	s.unavailable(ctx, code, code, st.State.String(), "cannot issue IDs: "+err.Error())
}

// classifyIDError maps a generator error to an error code (also used as the
// reason).
func classifyIDError(err error) string {
	switch {
	case errors.Is(err, snowflake.ErrClockRollback): // also every *snowflake.RollbackError
		return codeClockRollback
	case errors.Is(err, snowflake.ErrFenceReached):
		return codeFenceReached
	case errors.Is(err, snowflake.ErrBorrowExhausted):
		return codeBorrowExhausted
	case errors.Is(err, snowflake.ErrTimeOverflow):
		return codeTimeOverflow
	case errors.Is(err, snowflake.ErrClockStalled), errors.Is(err, snowflake.ErrBeforeEpoch):
		return codeClockError
	}
	return codeIDError
}

// handleParseError is the fasthttp.Server's ErrorHandler: it answers
// requests that could not be read with a JSON error.
func (s *Server) handleParseError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr *net.OpError
	switch {
	case errors.As(err, &small):
		s.writeError(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, codeHeaderTooLarge, "request header too large")
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.writeError(ctx, fasthttp.StatusRequestEntityTooLarge, codeBodyTooLarge, "request body too large")
	case errors.As(err, &netErr) && netErr.Timeout():
		s.writeError(ctx, fasthttp.StatusRequestTimeout, codeRequestTimeout, "timed out reading the request")
	default:
		s.writeError(ctx, fasthttp.StatusBadRequest, codeBadRequest, "cannot parse the request")
	}
}

// maxQuoted bounds how much of a client's value an error message repeats.
const maxQuoted = 64

// quote returns b as a quoted Go string for messages, cut to maxQuoted bytes.
func quote(b []byte) string {
	if len(b) > maxQuoted {
		return strconv.Quote(string(b[:maxQuoted])) + "…"
	}
	return strconv.Quote(string(b))
}
