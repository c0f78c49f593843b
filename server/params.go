package server

import (
	"math"
	"strconv"

	"github.com/valyala/fasthttp"
)

// Query parameters.
const (
	paramCount  = "count"
	paramFormat = "format"
)

// checkParams answers 400 invalid_parameter unless every query parameter
// is known1 or known2 ("" for none) and none is repeated: a typo such as
// ?cout=5 is an error, not a silent default.
func (s *Server) checkParams(ctx *fasthttp.RequestCtx, args *fasthttp.Args, known1, known2 string) bool {
	n := 0
	if known1 != "" && args.Has(known1) {
		n++
	}
	if known2 != "" && args.Has(known2) {
		n++
	}
	if args.Len() == n { // each known one present at most once, nothing else
		return true
	}
	// Slow path: name the culprit.
	seen := map[string]bool{}
	for k := range args.All() {
		name := string(k)
		switch {
		case name != known1 && name != known2 || name == "":
			s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidParameter,
				"unknown query parameter "+quote(k)+": "+allowedParams(known1, known2))
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

func allowedParams(known1, known2 string) string {
	switch {
	case known1 != "" && known2 != "":
		return "allowed are " + known1 + " and " + known2
	case known1 != "":
		return "allowed is " + known1
	}
	return "none are allowed"
}

// format reads ?format=: text (the default) or json.
func (s *Server) format(ctx *fasthttp.RequestCtx, args *fasthttp.Args) (asJSON, ok bool) {
	if !args.Has(paramFormat) {
		return false, true
	}
	v := args.Peek(paramFormat)
	switch string(v) {
	case "text":
		return false, true
	case "json":
		return true, true
	}
	s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidFormat,
		"format "+quote(v)+" is not supported: use text or json")
	return false, false
}

// count reads ?count=, which must be a whole number from 1 to MaxBatch.
func (s *Server) count(ctx *fasthttp.RequestCtx, args *fasthttp.Args) (int, bool) {
	if !args.Has(paramCount) {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidCount,
			"count is required: a whole number from 1 to "+strconv.Itoa(s.maxBatch))
		return 0, false
	}
	v := args.Peek(paramCount)
	n, ok := parseCount(v, s.maxBatch)
	if !ok {
		s.writeError(ctx, fasthttp.StatusBadRequest, codeInvalidCount,
			"count "+quote(v)+" is not a whole number from 1 to "+strconv.Itoa(s.maxBatch))
		return 0, false
	}
	return n, true
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
		return 0, "id is required: use " + pathDecode + "/{id} with a decimal ID"
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
