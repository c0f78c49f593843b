package server

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/idtext"
	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// Query parameters (see client/wire).
const (
	paramCount  = wire.ParamCount
	paramFormat = wire.ParamFormat
	paramGene   = wire.ParamGene
)

// checkParams answers 400 invalid_parameter unless every query parameter
// is one of known ("" for none) and none is repeated: a typo such as
// ?cout=5 is an error, not a silent default.
func (s *Server) checkParams(ctx *fasthttp.RequestCtx, args *fasthttp.Args, known ...string) bool {
	n := 0
	for _, k := range known {
		if k != "" && args.Has(k) {
			n++
		}
	}
	if args.Len() == n { // each known one present at most once, nothing else
		return true
	}
	// Slow path: name the culprit.
	seen := map[string]bool{}
	for k := range args.All() {
		name := string(k)
		switch {
		case name == "" || !slices.Contains(known, name):
			s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidParameter,
				"unknown query parameter "+quote(k)+": "+allowedParams(known))
			return false
		case seen[name]:
			s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidParameter,
				"query parameter "+quote(k)+" is given more than once")
			return false
		}
		seen[name] = true
	}
	return true // not reached: Len differs from the count of known names
}

func allowedParams(known []string) string {
	var names []string
	for _, k := range known {
		if k != "" {
			names = append(names, k)
		}
	}
	switch len(names) {
	case 0:
		return "none are allowed"
	case 1:
		return "allowed is " + names[0]
	}
	return "allowed are " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// gene reads ?gene=G: a decimal 0..2^63-1 (e.g. a user ID). It returns -1
// without one; 400 invalid_gene for a bad value, gene_off when the layout
// has no gene bits.
func (s *Server) gene(ctx *fasthttp.RequestCtx, args *fasthttp.Args) (int64, bool) {
	if !args.Has(paramGene) {
		return -1, true
	}
	v := args.Peek(paramGene)
	g, msg := parseID(v)
	if msg != "" {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidGene,
			"gene "+quote(v)+" is not a decimal number from 0 to "+strconv.FormatInt(math.MaxInt64, 10))
		return 0, false
	}
	if s.cfg.IDs.Layout().GeneBits == 0 {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeGeneOff,
			"this cluster has no gene bits (--gene-bits 0): IDs cannot carry a gene")
		return 0, false
	}
	return g, true
}

// form is how an answer writes its IDs or UUIDs: decimal (or canonical)
// text, JSON, or text in a fixed-width encoding of client/idtext.
type form struct {
	json bool
	// enc, when not 0, writes each ID (of bits bits) or UUID in it.
	enc  idtext.Encoding
	bits uint
}

// Value sizes in bits of what the server encodes besides its layout's IDs.
const denseBits = 63 // a tag's dense IDs: any positive int64

// formatsAll and formatsPlain name the values of format, for invalid_format.
const (
	formatsAll   = "text, json, base62, base58, base36 or base32"
	formatsPlain = "text or json"
)

// format reads ?format=: text (the default), json, or where encodings
// are allowed (bits > 0, the size of the IDs) base62, base58, base36 or
// base32.
func (s *Server) format(ctx *fasthttp.RequestCtx, args *fasthttp.Args, bits uint) (form, bool) {
	if !args.Has(paramFormat) {
		return form{}, true
	}
	v := args.Peek(paramFormat)
	switch string(v) {
	case "text":
		return form{}, true
	case "json":
		return form{json: true}, true
	}
	accepted := formatsPlain
	if bits > 0 {
		if e, ok := idtext.ParseBytes(v); ok {
			return form{enc: e, bits: bits}, true
		}
		accepted = formatsAll
	}
	s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidFormat,
		"format "+quote(v)+" is not supported: use "+accepted)
	return form{}, false
}

// count reads ?count=, which must be a whole number from 1 to MaxBatch.
// Its error carries MaxBatch as "max", so that a client that asked for too
// many can ask again for fewer.
func (s *Server) count(ctx *fasthttp.RequestCtx, args *fasthttp.Args) (int, bool) {
	if !args.Has(paramCount) {
		s.countError(ctx, "count is required: a whole number from 1 to "+strconv.Itoa(s.maxBatch))
		return 0, false
	}
	v := args.Peek(paramCount)
	n, ok := parseCount(v, s.maxBatch)
	if !ok {
		s.countError(ctx, "count "+quote(v)+" is not a whole number from 1 to "+strconv.Itoa(s.maxBatch))
		return 0, false
	}
	return n, true
}

// countError answers 400 invalid_count with msg and the node's MaxBatch.
func (s *Server) countError(ctx *fasthttp.RequestCtx, msg string) {
	writeErrorJSON(ctx, fasthttp.StatusBadRequest, errorBody{Error: errorDetail{Code: codeInvalidCount, Message: msg, Max: s.maxBatch}})
}

// parseCount parses ASCII decimal digits (no sign, no spaces) into a value
// from 1 to limit. limit must be at most MaxBatchLimit, so n never overflows.
func parseCount(v []byte, limit int) (int, bool) {
	if len(v) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
		if n > limit {
			return 0, false
		}
	}
	return n, n >= 1
}

// parseID parses the {id} of /decode/{id}: ASCII decimal digits only, at
// most math.MaxInt64. On failure it returns a message for the client.
func parseID(v []byte) (int64, string) {
	if len(v) == 0 {
		return 0, "id is required: use /decode/{id} with a decimal ID"
	}
	if v[0] == '-' {
		if allDigits(v[1:]) {
			return 0, "id " + quote(v) + " is negative"
		}
		return 0, "id " + quote(v) + " is not a decimal number"
	}
	if !allDigits(v) {
		return 0, "id " + quote(v) + " is not a decimal number"
	}
	var n int64
	for _, c := range v {
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, "id " + quote(v) + " is too big: IDs are at most " + strconv.FormatInt(math.MaxInt64, 10)
		}
		n = n*10 + d
	}
	return n, ""
}

// allDigits reports whether v is non-empty and only ASCII digits.
func allDigits(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
