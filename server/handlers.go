package server

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/idtext"
	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Constant response pieces, as package-level []byte so that setting them
// costs no conversion.
var (
	ctText          = []byte("text/plain; charset=utf-8")
	ctJSON          = []byte("application/json")
	hdrCacheControl = []byte("Cache-Control")
	valNoStore      = []byte("no-store")
	hdrAllow        = []byte("Allow")
	valAllow        = []byte("GET, HEAD")
	hdrRetryAfter   = []byte("Retry-After")
	bodyHealthz     = []byte(`{"status":"ok"}`)
	bodyInService   = []byte(`{"state":"in_service"}`)
)

// finish runs after every request: it turns a panic into a logged 500 and
// reports the request to the observer.
func (s *Server) finish(ctx *fasthttp.RequestCtx, ep *endpoint.Endpoint) {
	if r := recover(); r != nil {
		if e := s.log.Error(); e != nil { // nil when sampled out: skip the stack trace
			e.Interface("panic", r).Bytes("method", ctx.Method()).Bytes("path", ctx.Path()).
				Bytes("stack", debug.Stack()).Msg("request handler panicked")
		}
		ctx.Response.Reset()
		s.writeError(ctx, fasthttp.StatusInternalServerError, codeInternal, "internal error")
	}
	s.obs.Request(*ep, ctx.Response.StatusCode())
}

// allowed marks the response uncacheable (an ID must never be served twice
// by a cache) and answers 405 unless the method is GET or HEAD.
func (s *Server) allowed(ctx *fasthttp.RequestCtx, path string) bool {
	ctx.Response.Header.SetCanonical(hdrCacheControl, valNoStore)
	if ctx.IsGet() || ctx.IsHead() {
		return true
	}
	ctx.Response.Header.SetCanonical(hdrAllow, valAllow)
	s.writeError(ctx, fasthttp.StatusMethodNotAllowed, codeMethodNotAllowed,
		"method "+quote(ctx.Method())+" is not allowed on "+path+": use GET or HEAD")
	return false
}

// serveID answers GET /id[?format=text|json|base62|base58|base36|base32][&gene=G].
func (s *Server) serveID(ctx *fasthttp.RequestCtx) {
	var f form
	gene := int64(-1)
	// Keep the common case (no query) free of parsing and look-ups: the
	// URI is parsed already, its query string is not.
	if args := queryArgs(ctx); args != nil && args.Len() > 0 {
		if !s.checkParams(ctx, args, paramFormat, paramGene) {
			return
		}
		var ok bool
		if f, ok = s.format(ctx, args, s.idBits); !ok {
			return
		}
		if gene, ok = s.gene(ctx, args); !ok {
			return
		}
	}
	s.issueOne(ctx, f, gene)
}

// queryArgs returns the request's query arguments, parsed, or nil without
// parsing when the query string is empty (no arguments).
func queryArgs(ctx *fasthttp.RequestCtx) *fasthttp.Args {
	if len(ctx.URI().QueryString()) == 0 {
		return nil
	}
	return ctx.QueryArgs()
}

// serveLeaf answers GET /api/snowflake/get/{key} like Meituan Leaf: the
// decimal ID as the whole body. The key is ignored, and so is any query
// but format=base62|base58|base36|base32, which encodes the ID (format=text
// and format=json leave it decimal, as Leaf answers; another format is
// 400 invalid_format).
func (s *Server) serveLeaf(ctx *fasthttp.RequestCtx, key []byte) {
	if len(key) == 0 {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidKey, "key is required: use /api/snowflake/get/{key}")
		return
	}
	var f form
	if args := queryArgs(ctx); args != nil && args.Has(paramFormat) {
		var ok bool
		if f, ok = s.format(ctx, args, s.idBits); !ok {
			return
		}
		f.json = false // Leaf answers text
	}
	s.issueOne(ctx, f, -1)
}

// issueOne issues one ID (carrying gene unless it is -1) and writes it in
// form f.
func (s *Server) issueOne(ctx *fasthttp.RequestCtx, f form, gene int64) {
	if st, out := s.notInService(); out {
		s.outOfService(ctx, st)
		return
	}
	var id int64
	var err error
	if gene < 0 {
		id, err = s.cfg.IDs.Next()
	} else {
		id, err = s.cfg.IDs.NextGene(uint64(gene))
	}
	if err != nil {
		s.idError(ctx, err)
		return
	}
	s.obs.IssuedIDs(1)
	s.writeOne(ctx, id, f)
}

// writeOne answers 200 with one ID: decimal text,
// {"id":…,"id_str":"…"}, or the ID in f's encoding.
func (s *Server) writeOne(ctx *fasthttp.RequestCtx, id int64, f form) {
	var buf [64]byte
	b := buf[:0]
	ct := ctText
	switch {
	case f.json:
		b = append(b, `{"id":`...)
		b = appendID(b, id)
		b = append(b, `,"id_str":"`...)
		b = appendID(b, id)
		b = append(b, `"}`...)
		ct = ctJSON
	case f.enc != 0:
		b = appendEncoded(b, id, f)
	default:
		b = appendID(b, id)
	}
	writeBody(ctx, fasthttp.StatusOK, ct, b)
}

// appendEncoded appends id in f's encoding. An ID never exceeds its
// size (the layout's IDs are below 2^idBits, dense IDs are positive
// int64s), so the encoder never fails; were it to, the ID goes decimal
// rather than not at all.
func appendEncoded(b []byte, id int64, f form) []byte {
	out, err := f.enc.AppendUint(b, uint64(id), f.bits)
	if err != nil {
		return appendID(b, id)
	}
	return out
}

// batch holds the buffers of one /ids request. They are pooled, and the
// response body is the batch's own buffer (no copy): the batch rides along
// as a user value of the request and goes back to the pool in Close, which
// fasthttp calls when it resets the request after writing the response.
// A caller that never resets the request leaves the batch to the GC.
type batch struct {
	pool *sync.Pool
	ids  []int64
	out  []byte
}

// batchKey is the user-value key of a request's batch.
type batchKey struct{}

// Close returns the batch to its pool; fasthttp calls it once the response
// has been written.
func (b *batch) Close() error {
	b.ids, b.out = b.ids[:0], b.out[:0]
	b.pool.Put(b)
	return nil
}

// serveIDs answers GET /ids?count=N[&format=text|json|base62|…][&gene=G].
func (s *Server) serveIDs(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	if !s.checkParams(ctx, args, paramCount, paramFormat, paramGene) {
		return
	}
	f, ok := s.format(ctx, args, s.idBits)
	if !ok {
		return
	}
	n, ok := s.count(ctx, args)
	if !ok {
		return
	}
	gene, ok := s.gene(ctx, args)
	if !ok {
		return
	}
	if st, out := s.notInService(); out {
		s.outOfService(ctx, st)
		return
	}
	bt := s.batches.Get().(*batch)
	ids, stop := s.appendBatch(ctx, bt.ids[:0], n, gene)
	bt.ids = ids // keep the grown buffer
	if stop {
		_ = bt.Close()
		return
	}
	s.obs.IssuedIDs(len(ids))
	writeBatch(ctx, bt, f)
}

// writeBatch answers 200 with bt.ids as a list (one a line, decimal or in
// f's encoding, or a JSON array of strings), in the batch's own buffer:
// the batch goes back to the pool after the response is written.
func writeBatch(ctx *fasthttp.RequestCtx, bt *batch, f form) {
	out := bt.out[:0]
	ct := ctText
	switch {
	case f.json:
		ct = ctJSON
		out = append(out, '[')
		for i, id := range bt.ids {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, '"')
			out = appendID(out, id)
			out = append(out, '"')
		}
		out = append(out, ']')
	case f.enc != 0:
		for _, id := range bt.ids {
			out = appendEncoded(out, id, f)
			out = append(out, '\n')
		}
	default:
		for _, id := range bt.ids {
			out = appendID(out, id)
			out = append(out, '\n')
		}
	}
	writeBatchBody(ctx, bt, out, ct)
}

// writeBatchBody answers 200 with out, the batch's body (bt.out's
// storage), of content type ct; bt goes back to its pool once the
// response is written.
func writeBatchBody(ctx *fasthttp.RequestCtx, bt *batch, out, ct []byte) {
	bt.out = out
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentTypeBytes(ct)
	ctx.Response.SetBodyRaw(out)
	ctx.SetUserValue(batchKey{}, bt) // closed (back to the pool) after the response is written
}

// appendBatch appends n IDs to dst one tick's worth at a time, and between
// ticks checks that the node is still in service and that the batch is
// within its time bound: a batch spanning many ticks must not go on issuing
// after the node left service. When it stops (an error, out of service, too
// slow) it has answered the request and returns stop; the IDs it reserved
// are dropped, never issued by anyone.
func (s *Server) appendBatch(ctx *fasthttp.RequestCtx, dst []int64, n int, gene int64) (ids []int64, stop bool) {
	orig := len(dst)
	var start time.Duration
	for len(dst)-orig < n {
		if len(dst) > orig {
			if st, out := s.notInService(); out {
				s.outOfService(ctx, st)
				return dst[:orig], true
			}
			if took := s.cfg.Clock.Mono() - start; took > s.batchBound {
				s.unavailable(ctx, codeBatchTimeout, codeBatchTimeout, s.cfg.Guard.Status().State.String(),
					fmt.Sprintf("a batch of %d IDs took longer than %v (%d IDs per tick of %v): ask for fewer", n, s.batchBound, s.perTick, s.cfg.IDs.Layout().Unit))
				return dst[:orig], true
			}
		} else {
			start = s.cfg.Clock.Mono()
		}
		var err error
		if gene < 0 {
			dst, err = s.cfg.IDs.AppendN(dst, min(n-(len(dst)-orig), s.perTick))
		} else {
			dst, err = s.cfg.IDs.AppendNGene(dst, min(n-(len(dst)-orig), s.perTick), uint64(gene))
		}
		if err != nil {
			s.idError(ctx, err)
			return dst[:orig], true
		}
	}
	return dst, false
}

// serveDecode answers GET /decode/{id} and GET /decode/{uuid}, and with
// ?format=base62|base58|base36|base32 either one in that encoding.
func (s *Server) serveDecode(ctx *fasthttp.RequestCtx, raw []byte) {
	if args := queryArgs(ctx); args != nil && args.Has(paramFormat) {
		v := args.Peek(paramFormat)
		if string(v) != "text" && string(v) != "json" { // those two: the plain forms, as ever
			e, ok := idtext.ParseBytes(v)
			if !ok {
				s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidFormat,
					"format "+quote(v)+" is not supported on /decode: use base62, base58, base36 or base32 (text, json or none: a decimal ID or a canonical UUID)")
				return
			}
			s.serveDecodeEncoded(ctx, raw, e)
			return
		}
	}
	if isUUIDText(raw) {
		s.serveDecodeUUID(ctx, raw)
		return
	}
	id, msg := parseID(raw)
	if msg != "" {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidID, msg)
		return
	}
	s.writeDecodedID(ctx, id)
}

// writeDecodedID answers /decode with the parts of id in the node's
// layout (400 invalid_id when it is not one of it).
func (s *Server) writeDecodedID(ctx *fasthttp.RequestCtx, id int64) {
	p, err := s.cfg.IDs.Layout().Decode(id)
	if err != nil {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidID, err.Error())
		return
	}
	var buf [192]byte
	b := appendParts(append(buf[:0], '{'), p)
	writeBody(ctx, fasthttp.StatusOK, ctJSON, b)
}

// serveDecodeEncoded answers GET /decode/{s}?format=<e>: s is an ID of
// the layout or a UUID, told apart by its width (never the same: an ID
// has at most 63 bits, a UUID 128).
func (s *Server) serveDecodeEncoded(ctx *fasthttp.RequestCtx, raw []byte, e idtext.Encoding) {
	str := string(raw)
	idWidth, uuidWidth := e.Width(s.idBits), e.Width(idtext.UUIDBits)
	widths := " (in " + e.String() + " an ID of this layout, " + strconv.FormatUint(uint64(s.idBits), 10) +
		" bits, has " + strconv.Itoa(idWidth) + " characters, a UUID " + strconv.Itoa(uuidWidth) + ")"
	if len(raw) == 0 {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidID, "id is required: use /decode/{id}?"+paramFormat+"="+e.String()+widths)
		return
	}
	if len(raw) == uuidWidth {
		u, err := e.DecodeUUID(str)
		if err != nil {
			s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidID, err.Error()+widths)
			return
		}
		if s.uuidReady(ctx) {
			s.writeDecodedUUID(ctx, u)
		}
		return
	}
	v, err := e.DecodeUint(str, s.idBits)
	if err != nil {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidID, err.Error()+widths)
		return
	}
	s.writeDecodedID(ctx, int64(v))
}

// appendParts appends a decoded ID's fields and the closing brace of the
// object: "id":"…","timestamp_ms":…,"time":"…","worker_id":…,"sequence":…
// and "gene":… when the layout has gene bits.
func appendParts(b []byte, p snowflake.Parts) []byte {
	b = append(b, `"id":"`...)
	b = strconv.AppendInt(b, p.ID, 10)
	b = append(b, `","timestamp_ms":`...)
	b = strconv.AppendInt(b, p.Time.UnixMilli(), 10)
	b = append(b, `,"time":"`...)
	b = p.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","worker_id":`...)
	b = strconv.AppendInt(b, p.WorkerID, 10)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, p.Sequence, 10)
	if p.Gene != nil {
		b = append(b, `,"gene":`...)
		b = strconv.AppendInt(b, *p.Gene, 10)
	}
	return append(b, '}')
}

// serveReadyz answers GET /readyz.
func (s *Server) serveReadyz(ctx *fasthttp.RequestCtx) {
	st, out := s.notInService()
	if !out {
		writeBody(ctx, fasthttp.StatusOK, ctJSON, bodyInService)
		return
	}
	ctx.Response.Header.SetCanonical(hdrRetryAfter, s.retryAfter)
	s.writeJSON(ctx, fasthttp.StatusServiceUnavailable, readyBody{
		State: st.State.String(), Reason: string(st.Reason), Detail: st.Detail,
	})
}

// readyBody is the 503 body of /readyz.
type readyBody struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// serveTime answers GET /time from the injected clock.
func (s *Server) serveTime(ctx *fasthttp.RequestCtx) {
	ns := s.cfg.Clock.WallNanos()
	ms := floorMilli(ns)
	var buf [64]byte
	b := append(buf[:0], `{"unix_ms":`...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, `,"unix_ns":`...)
	b = strconv.AppendInt(b, ns, 10)
	b = append(b, '}')
	writeBody(ctx, fasthttp.StatusOK, ctJSON, b)
}

// minimalClockInfo is the body of /clock when Config.ClockInfo is nil.
type minimalClockInfo struct {
	NowMS  int64  `json:"now_ms"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// serveClock answers GET /clock.
func (s *Server) serveClock(ctx *fasthttp.RequestCtx) {
	var report any
	if s.cfg.ClockInfo != nil {
		report = s.cfg.ClockInfo()
	} else {
		st := s.cfg.Guard.Status()
		report = minimalClockInfo{
			NowMS: floorMilli(s.cfg.Clock.WallNanos()), State: st.State.String(), Reason: string(st.Reason),
		}
	}
	s.writeJSON(ctx, fasthttp.StatusOK, report)
}

// serveClusterNodes answers GET /cluster/nodes: a wire.ClusterNodesBody
// of Config.ClusterNodes' list, {"nodes":[]} without one.
func (s *Server) serveClusterNodes(ctx *fasthttp.RequestCtx) {
	var nodes []wire.ClusterNode
	if s.cfg.ClusterNodes != nil {
		nodes = s.cfg.ClusterNodes(ctx.LocalAddr())
	}
	if nodes == nil {
		nodes = []wire.ClusterNode{}
	}
	s.writeJSON(ctx, fasthttp.StatusOK, wire.ClusterNodesBody{Nodes: nodes})
}

// floorMilli converts Unix nanoseconds to Unix milliseconds, rounding down
// (also before 1970).
func floorMilli(ns int64) int64 {
	ms := ns / int64(time.Millisecond)
	if ns%int64(time.Millisecond) < 0 {
		ms--
	}
	return ms
}

// writeJSON marshals v as the body; a value that cannot be marshaled is a
// bug of the caller's, answered with a logged 500.
func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.log.Error().Err(err).Bytes("path", ctx.Path()).Msg("cannot marshal response")
		s.writeError(ctx, fasthttp.StatusInternalServerError, codeInternal, "internal error: cannot encode the response")
		return
	}
	writeBody(ctx, status, ctJSON, body)
}

// writeBody sets the status, content type and body (copied).
func writeBody(ctx *fasthttp.RequestCtx, status int, contentType, body []byte) {
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentType)
	ctx.SetBody(body)
}
