package server

import (
	"encoding/json"
	"errors"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Error codes of the API: the "code" of {"error":{"code":…,"message":…}}.
// They are public API.
const (
	codeInvalidCount     = "invalid_count"      // 400: /ids count missing or outside 1..MaxBatch
	codeInvalidFormat    = "invalid_format"     // 400: format is neither text nor json
	codeInvalidParameter = "invalid_parameter"  // 400: unknown or repeated query parameter
	codeInvalidID        = "invalid_id"         // 400: /decode/{id} is not an ID of the layout
	codeInvalidKey       = "invalid_key"        // 400: empty Leaf key
	codeInvalidGene      = "invalid_gene"       // 400: ?gene= is not a decimal 0..2^63-1
	codeGeneOff          = "gene_off"           // 400: ?gene= on a cluster without gene bits
	codeTagExhausted     = "tag_exhausted"      // 503: an opaque tag handed out all of its numbers
	codeInvalidUUID      = "invalid_uuid"       // 400: /decode/{uuid} is not a UUID of this cluster's layout
	codeUUIDOff          = "uuid_off"           // 400: the layout leaves fewer than 32 random bits in a UUIDv7
	codeBadRequest       = "bad_request"        // 400: the request could not be parsed
	codeNotFound         = "not_found"          // 404
	codeMethodNotAllowed = "method_not_allowed" // 405
	codeRequestTimeout   = "request_timeout"    // 408
	codeBodyTooLarge     = "body_too_large"     // 413
	codeHeaderTooLarge   = "header_too_large"   // 431
	codeInternal         = "internal"           // 500: a bug (panic, unencodable report)
	codeOutOfService     = "out_of_service"     // 503: the guard says the node is not in service
	codeClockRollback    = "clock_rollback"     // 503: the generator saw the clock go back beyond tolerance
	codeFenceReached     = "fence_reached"      // 503: the next ID would pass the time fence
	codeBorrowExhausted  = "borrow_exhausted"   // 503: borrowing through a rollback reached the time fence
	codeTimeOverflow     = "time_overflow"      // 503: the layout's timestamp field is exhausted
	codeClockError       = "clock_error"        // 503: the clock is stalled or before the epoch
	codeIDError          = "id_error"           // 503: any other generator error
	codeBatchTimeout     = "batch_timeout"      // 503: an /ids batch would take longer than BatchBound + 2 ticks
)

// errorBody is {"error":{"code":…,"message":…}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// unavailableBody is the 503 form: the error also carries the reason and
// the node's state.
type unavailableBody struct {
	Error unavailableDetail `json:"error"`
}

type unavailableDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
	State   string `json:"state"`
}

// writeError writes a JSON error. Errors are the slow path: allocating
// here is fine.
func (s *Server) writeError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	writeErrorJSON(ctx, status, errorBody{Error: errorDetail{Code: code, Message: msg}})
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
		body = []byte(`{"error":{"code":"internal","message":"cannot encode the error"}}`)
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
