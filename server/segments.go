package server

import (
	"bytes"
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// SegmentSource issues dense IDs of a tag (segment mode);
// *segment.Service, with a readiness, satisfies it.
type SegmentSource interface {
	// TakeWithToken appends n IDs of tag to dst, increasing, for a request
	// that carried token (nil: none): segment.ErrTokenRequired,
	// segment.ErrTokenInvalid and segment.ErrCountAboveMax refuse it,
	// segment.ErrTokensUnconfirmed when the tag's tokens cannot be
	// confirmed now.
	TakeWithToken(ctx context.Context, tag string, token []byte, dst []int64, n int) ([]int64, error)
	// Ready reports whether segment mode can load ranges now (its
	// ZooKeeper session is up). It does not depend on the clock guard.
	Ready() bool
}

// PeriodSource is a SegmentSource that serves reset tags (numbers that
// restart each period, printed with the period's date): the server asks
// it, when it has it, instead of TakeWithToken.
type PeriodSource interface {
	// TakePeriod is TakeWithToken that also says which period a reset
	// tag's numbers are of (the zero Period for other tags);
	// segment.ErrPeriodExhausted when the period has no number left of
	// its format's width.
	TakePeriod(ctx context.Context, tag string, token []byte, dst []int64, n int) ([]int64, segment.Period, error)
	// Resets reports whether tag resets by period (its IDs are text of
	// its own format, so no other format applies).
	Resets(ctx context.Context, tag string) (bool, error)
}

var bodySegmentReady = []byte(`{"state":"in_service","mode":"segment"}`)

// Error codes of segment mode (see client/wire).
const (
	codeUnknownTag         = wire.CodeUnknownTag
	codeInvalidTag         = wire.CodeInvalidTag
	codeSegmentsOff        = wire.CodeSegmentsOff
	codeSegmentUnavailable = wire.CodeSegmentUnavailable
	codeTokenRequired      = wire.CodeTokenRequired
	codeTokenInvalid       = wire.CodeTokenInvalid
	codeTokensUnconfirmed  = wire.CodeTokensUnconfirmed
	codePeriodExhausted    = wire.CodePeriodExhausted
)

// bearerPrefix starts an Authorization header that carries a token.
var bearerPrefix = []byte("Bearer ")

// segmentToken is the request's tag token: Authorization: Bearer <token>,
// or on the Leaf path ?token=<token> (how Leaf and tinyid clients send it).
// ok is false when the request was answered (400: a token given twice, or
// an Authorization header of another scheme).
func (s *Server) segmentToken(ctx *fasthttp.RequestCtx, leaf bool) (token []byte, ok bool) {
	if h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization); len(h) > 0 {
		if len(h) <= len(bearerPrefix) || !bytes.EqualFold(h[:len(bearerPrefix)], bearerPrefix) {
			s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidParameter, "Authorization: want Bearer <token>")
			return nil, false
		}
		token = bytes.TrimSpace(h[len(bearerPrefix):])
	}
	if leaf && ctx.QueryArgs().Has(wire.ParamToken) {
		if token != nil {
			s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidParameter, "the token is given twice: in Authorization and in ?"+wire.ParamToken+"=")
			return nil, false
		}
		token = ctx.QueryArgs().Peek(wire.ParamToken)
	}
	return token, true
}

// msgSegmentsOff is the message of segments_off.
const msgSegmentsOff = "segment mode needs ZooKeeper: this node runs standalone"

// serveSegment answers GET /segment/{tag}[?count=N][&format=text|json|base62|…] and
// (leaf) GET /api/segment/get/{tag}. It does not ask the clock guard: dense
// IDs carry no time.
func (s *Server) serveSegment(ctx *fasthttp.RequestCtx, tag []byte, leaf bool) {
	if s.cfg.Segments == nil {
		s.writeError(ctx, fasthttp.StatusNotFound, codeSegmentsOff, msgSegmentsOff)
		return
	}
	name := string(tag)
	if err := segment.ValidateTag(name); err != nil {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidTag, err.Error())
		return
	}
	n, f, many := 1, form{}, false
	if args := ctx.QueryArgs(); !leaf && args.Len() > 0 {
		if !s.checkParams(ctx, args, paramCount, paramFormat) {
			return
		}
		var ok bool
		if f, ok = s.format(ctx, args, denseBits); !ok {
			return
		}
		if args.Has(paramCount) {
			if n, ok = s.count(ctx, args); !ok {
				return
			}
			many = true
		}
	}
	token, ok := s.segmentToken(ctx, leaf)
	if !ok {
		return
	}
	ps, periodic := s.cfg.Segments.(PeriodSource)
	if periodic && f.enc != 0 {
		resets, err := ps.Resets(context.Background(), name)
		if err == nil && resets {
			s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidFormat, "tag "+strconv.Quote(name)+" prints its IDs in its own format (it resets by period): use format=text or json")
			return
		}
		// An error is the take's to answer.
	}
	bt := s.batches.Get().(*batch)
	var ids []int64
	var period segment.Period
	var err error
	if periodic {
		ids, period, err = ps.TakePeriod(context.Background(), name, token, bt.ids[:0], n)
	} else {
		ids, err = s.cfg.Segments.TakeWithToken(context.Background(), name, token, bt.ids[:0], n)
	}
	if err == nil && !period.IsZero() && f.enc != 0 { // Resets could not tell before the take
		_ = bt.Close()
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidFormat, "tag "+strconv.Quote(name)+" prints its IDs in its own format (it resets by period): use format=text or json")
		return
	}
	if err != nil {
		_ = bt.Close()
		s.writeTakeError(ctx, name, err)
		return
	}
	bt.ids = ids
	s.obs.IssuedIDs(len(ids))
	if !period.IsZero() {
		writePeriod(ctx, bt, period, f.json, many)
		return
	}
	if many {
		writeBatch(ctx, bt, f)
		return
	}
	_ = bt.Close()
	s.writeOne(ctx, ids[0], f)
}

// writeTakeError answers a failed take of tag name's IDs: the error's
// status, code and message.
func (s *Server) writeTakeError(ctx *fasthttp.RequestCtx, name string, err error) {
	switch {
	case errors.Is(err, segment.ErrTokenRequired):
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="snowflaked"`)
		s.writeError(ctx, fasthttp.StatusUnauthorized, codeTokenRequired, "tag "+strconv.Quote(name)+" requires a token: send Authorization: Bearer <token>")
	case errors.Is(err, segment.ErrTokenInvalid):
		s.writeError(ctx, fasthttp.StatusForbidden, codeTokenInvalid, "the token is not valid for tag "+strconv.Quote(name))
	case errors.Is(err, segment.ErrCountAboveMax):
		// "max" stays the node's --max-batch; "tag_max" is the tag's
		// ceiling, so that a client that merged several callers can
		// ask in parts (one caller asking for more is refused).
		tagMax := 0
		if ce := (*segment.CountAboveMaxError)(nil); errors.As(err, &ce) {
			tagMax = int(ce.Max)
		}
		writeErrorJSON(ctx, fasthttp.StatusBadRequest, errorBody{Error: errorDetail{Code: codeInvalidCount, Message: err.Error(), Max: s.maxBatch, TagMax: tagMax}})
	case errors.Is(err, segment.ErrUnknownTag):
		s.writeError(ctx, fasthttp.StatusNotFound, codeUnknownTag, "no tag "+strconv.Quote(name)+": create it with snowflakectl segment create")
	case errors.Is(err, segment.ErrInvalidTag):
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidTag, err.Error())
	case errors.Is(err, segment.ErrPeriodExhausted):
		s.unavailable(ctx, codePeriodExhausted, codePeriodExhausted, "segment", err.Error())
	case errors.Is(err, segment.ErrExhausted):
		s.unavailable(ctx, codeTagExhausted, codeTagExhausted, "segment", err.Error())
	case errors.Is(err, segment.ErrTokensUnconfirmed):
		// ZooKeeper does not answer and the tag's hashes are older
		// than --token-stale-limit: no token is honoured, so that a
		// rotation reaches a node cut off from ZooKeeper.
		s.unavailable(ctx, codeTokensUnconfirmed, codeTokensUnconfirmed, "segment", err.Error())
	default: // unavailable, closing
		s.unavailable(ctx, codeSegmentUnavailable, codeSegmentUnavailable, "segment", err.Error())
	}
}

// writePeriod writes a reset tag's numbers in its format: text, one a
// line; JSON, for one {"id_str":…,"period":…,"number":…}, for many an
// array of the texts.
func writePeriod(ctx *fasthttp.RequestCtx, bt *batch, p segment.Period, asJSON, many bool) {
	out := bt.out[:0]
	ct := ctText
	switch {
	case asJSON && !many:
		ct = ctJSON
		out = append(out, `{"id_str":"`...)
		out = p.AppendID(out, bt.ids[0])
		out = append(out, `","period":"`...)
		out = append(out, p.Date()...)
		out = append(out, `","number":`...)
		out = strconv.AppendInt(out, bt.ids[0], 10)
		out = append(out, '}')
	case asJSON:
		ct = ctJSON
		out = append(out, '[')
		for i, n := range bt.ids {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, '"')
			out = p.AppendID(out, n)
			out = append(out, '"')
		}
		out = append(out, ']')
	default:
		for _, n := range bt.ids {
			out = p.AppendID(out, n)
			if many {
				out = append(out, '\n')
			}
		}
	}
	writeBatchBody(ctx, bt, out, ct)
}

// serveTagRequired answers GET /segment and GET /api/segment/get: 400, the
// tag is missing.
func (s *Server) serveTagRequired(ctx *fasthttp.RequestCtx, _ []byte) {
	s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidTag, "tag is required: use "+string(ctx.Path())+"/{tag}")
}

// serveReadyzSegment answers GET /readyz/segment: 200 while segment mode
// can load ranges, whatever the clock guard says; 503 otherwise (404 when
// the node runs standalone).
func (s *Server) serveReadyzSegment(ctx *fasthttp.RequestCtx) {
	switch {
	case s.cfg.Segments == nil:
		s.writeError(ctx, fasthttp.StatusNotFound, codeSegmentsOff, msgSegmentsOff)
	case s.cfg.Segments.Ready():
		writeBody(ctx, fasthttp.StatusOK, ctJSON, bodySegmentReady)
	default:
		ctx.Response.Header.SetCanonical(hdrRetryAfter, s.retryAfter)
		s.writeJSON(ctx, fasthttp.StatusServiceUnavailable, readyBody{
			State: "out_of_service", Reason: "zk_unavailable", Detail: "segment mode cannot reach ZooKeeper to load ranges",
		})
	}
}

// apiTokenOK checks the node-wide token of a request to a snowflake
// endpoint when Config.APITokens is set (false: answered, 400, 401 or 403).
func (s *Server) apiTokenOK(ctx *fasthttp.RequestCtx, ep endpoint.Endpoint) bool {
	if s.cfg.APITokens == nil {
		return true
	}
	switch ep {
	case endpoint.ID, endpoint.IDs, endpoint.Leaf, endpoint.UUID:
	default:
		return true
	}
	token, ok := s.segmentToken(ctx, false)
	switch {
	case !ok:
		return false
	case len(token) == 0:
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="snowflaked"`)
		s.writeError(ctx, fasthttp.StatusUnauthorized, codeTokenRequired, "this node requires a token for "+string(ctx.Path())+": send Authorization: Bearer <token>")
		return false
	case !s.cfg.APITokens.Match(token, time.Now()):
		s.writeError(ctx, fasthttp.StatusForbidden, codeTokenInvalid, "the token is not one of this node's API tokens")
		return false
	}
	return true
}
