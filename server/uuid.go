package server

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/idtext"
	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/uuidv7"
)

// uuidReady answers 400 uuid_off when the layout cannot make UUIDs (more
// than uuidv7.MaxFieldBits worker and sequence bits).
func (s *Server) uuidReady(ctx *fasthttp.RequestCtx) bool {
	if s.uuidErr == nil {
		return true
	}
	s.writeError(ctx, fasthttp.StatusBadRequest, codeUUIDOff, s.uuidErr.Error())
	return false
}

// randomWords returns n random 64-bit words from crypto/rand.
func randomWords(n int) []uint64 {
	b := make([]byte, 8*n)
	_, _ = rand.Read(b) // never fails (crypto/rand's documented contract since Go 1.24)
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out
}

// serveUUID answers GET /uuid[?format=text|json|base62|…]: one UUIDv7
// made from a fenced snowflake ID of this node.
func (s *Server) serveUUID(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	if !s.checkParams(ctx, args, paramFormat) {
		return
	}
	f, ok := s.format(ctx, args, idtext.UUIDBits)
	if !ok || !s.uuidReady(ctx) {
		return
	}
	if st, out := s.notInService(); out {
		s.outOfService(ctx, st)
		return
	}
	id, err := s.cfg.IDs.Next()
	if err != nil {
		s.idError(ctx, err)
		return
	}
	s.obs.IssuedIDs(1)
	u := s.uuids.Encode(id, randomWords(1)[0])
	var buf [64]byte
	b := buf[:0]
	ct := ctText
	if f.json {
		b = append(b, `{"uuid":"`...)
		b = u.AppendText(b)
		b = append(b, `"}`...)
		ct = ctJSON
	} else {
		b = appendUUID(b, u, f)
	}
	writeBody(ctx, fasthttp.StatusOK, ct, b)
}

// appendUUID appends u as text: canonical, or in f's encoding.
func appendUUID(b []byte, u uuidv7.UUID, f form) []byte {
	if f.enc != 0 {
		if out, err := f.enc.AppendUUID(b, u); err == nil {
			return out
		}
	}
	return u.AppendText(b)
}

// serveUUIDs answers GET /uuids?count=N[&format=text|json|base62|…]: N
// UUIDs, one a line or a JSON array, increasing (as strings too: every
// encoding keeps the order).
func (s *Server) serveUUIDs(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	if !s.checkParams(ctx, args, paramCount, paramFormat) {
		return
	}
	f, ok := s.format(ctx, args, idtext.UUIDBits)
	if !ok {
		return
	}
	n, ok := s.count(ctx, args)
	if !ok || !s.uuidReady(ctx) {
		return
	}
	if st, out := s.notInService(); out {
		s.outOfService(ctx, st)
		return
	}
	ids, stop := s.appendBatch(ctx, make([]int64, 0, n), n, -1)
	if stop {
		return
	}
	s.obs.IssuedIDs(len(ids))
	random := randomWords(len(ids))
	out := make([]byte, 0, len(ids)*39+2)
	ct := ctText
	if f.json {
		ct = ctJSON
		out = append(out, '[')
	}
	for i, id := range ids {
		u := s.uuids.Encode(id, random[i])
		if f.json {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, '"')
			out = u.AppendText(out)
			out = append(out, '"')
		} else {
			out = appendUUID(out, u, f)
			out = append(out, '\n')
		}
	}
	if f.json {
		out = append(out, ']')
	}
	writeBody(ctx, fasthttp.StatusOK, ct, out)
}

// serveDecodeUUID answers GET /decode/{uuid}: the snowflake ID a UUID of
// this cluster was made from, and its parts.
func (s *Server) serveDecodeUUID(ctx *fasthttp.RequestCtx, raw []byte) {
	if !s.uuidReady(ctx) {
		return
	}
	u, err := uuidv7.Parse(string(raw))
	if err != nil {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidUUID, err.Error())
		return
	}
	s.writeDecodedUUID(ctx, u)
}

// writeDecodedUUID answers /decode of a UUID read already: its snowflake
// ID and parts, or 400 invalid_uuid.
func (s *Server) writeDecodedUUID(ctx *fasthttp.RequestCtx, u uuidv7.UUID) {
	id, err := s.uuids.Decode(u)
	if err != nil {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidUUID, err.Error())
		return
	}
	p, err := s.cfg.IDs.Layout().Decode(id)
	if err != nil {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidUUID, "uuid "+u.String()+": "+err.Error())
		return
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"uuid":"`...)
	b = u.AppendText(b)
	b = append(b, `",`...)
	b = appendParts(b, p)
	writeBody(ctx, fasthttp.StatusOK, ctJSON, b)
}

// isUUIDText reports whether raw has the shape of a canonical UUID (it is
// not a decimal ID).
func isUUIDText(raw []byte) bool { return wire.IsUUIDText(raw) }
