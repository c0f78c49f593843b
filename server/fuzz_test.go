package server

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fuzzMaxBatch keeps fuzzed batches small.
const fuzzMaxBatch = 50

// call runs the handler in-process on a fresh RequestCtx. path is the
// path the handler saw, after fasthttp's decoding and normalization.
func call(f *fixture, method, uri string) (r response, path string) {
	ctx := newRequestCtx(method, uri)
	f.srv.Handler()(ctx)
	return response{
		status:      ctx.Response.StatusCode(),
		contentType: string(ctx.Response.Header.ContentType()),
		retryAfter:  string(ctx.Response.Header.Peek("Retry-After")),
		body:        append([]byte(nil), ctx.Response.Body()...),
	}, string(ctx.Path())
}

// hasCTL reports whether s holds an ASCII control byte. fasthttp's server
// refuses such a request URI before calling the handler (its ErrorHandler
// answers, see TestMalformedRequestIsJSON), so in-process fuzzing skips them.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// validCount is the oracle for ?count=.
func validCount(s string) (int, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" || len(s) > 10 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= fuzzMaxBatch
}

// FuzzQuery fuzzes the query of /ids and /id: never a panic; 200 or a
// documented 400; errors are JSON; when the query is well formed the answer
// matches an oracle.
func FuzzQuery(f *testing.F) {
	for _, s := range []struct {
		count, format string
		flags         uint8
		raw           string
	}{
		{"5", "", 1, ""}, {"5", "json", 3, ""}, {"0", "", 1, ""}, {"-1", "text", 3, ""},
		{"50", "json", 3, ""}, {"51", "", 1, ""}, {"99999999999999999999", "", 1, ""},
		{"", "xml", 2, ""}, {"+3", "", 1, ""}, {"1e2", "", 1, ""}, {"3", "", 1, "x=1"},
		{"", "json", 6, ""}, {"", "", 4, "format=json&format=text"}, {"\x00", "\xff", 3, "%zz&&=&count"},
	} {
		f.Add(s.count, s.format, s.flags, s.raw)
	}
	fx := newFixture(f, snowflake.DefaultLayout(), func(c *Config) { c.MaxBatch = fuzzMaxBatch })
	// flags: bit 0 sends count, bit 1 sends format, bit 2 asks /id instead
	// of /ids; raw is appended to the query unescaped.
	f.Fuzz(func(t *testing.T, count, format string, flags uint8, raw string) {
		path := "/ids"
		if flags&4 != 0 {
			path = "/id"
		}
		var q []string
		if flags&1 != 0 {
			q = append(q, "count="+url.QueryEscape(count))
		}
		if flags&2 != 0 {
			q = append(q, "format="+url.QueryEscape(format))
		}
		if raw != "" {
			q = append(q, raw)
		}
		uri := path
		if len(q) > 0 {
			uri += "?" + strings.Join(q, "&")
		}
		if hasCTL(uri) {
			t.Skip("the server rejects control bytes in the URI before routing")
		}
		r, _ := call(fx, "GET", uri)
		switch r.status {
		case 200:
		case 400:
			e := decodeError(t, r)
			switch e.Code {
			case "invalid_count", "invalid_format", "invalid_parameter":
			default:
				t.Fatalf("%q: undocumented error code %q", uri, e.Code)
			}
		default:
			t.Fatalf("%q: status %d (%s)", uri, r.status, r.body)
		}
		if raw != "" {
			return // no oracle for arbitrary queries
		}

		// The oracle, for well-formed queries.
		wantStatus, wantCode, n := queryOracle(path, count, format, flags)
		if r.status != wantStatus {
			t.Fatalf("%q: status %d, want %d (%s)", uri, r.status, wantStatus, r.body)
		}
		if wantStatus != 200 {
			if e := decodeError(t, r); e.Code != wantCode {
				t.Fatalf("%q: code %q, want %q", uri, e.Code, wantCode)
			}
			return
		}
		if ids := bodyIDs(t, uri, r.body, flags&2 != 0 && format == "json", path == "/ids"); len(ids) != n {
			t.Fatalf("%q: %d IDs, want %d", uri, len(ids), n)
		}
	})
}

// queryOracle is what a well-formed query of FuzzQuery (see its flags)
// must get: the status, the error code of a 400, and how many IDs a 200
// holds.
func queryOracle(path, count, format string, flags uint8) (status int, code string, n int) {
	formatOK := flags&2 == 0 || format == "text" || format == "json"
	n, countOK := validCount(count)
	if path == "/id" {
		n = 1
	}
	switch {
	case path == "/id" && flags&1 != 0:
		return 400, "invalid_parameter", 0
	case !formatOK:
		return 400, "invalid_format", 0
	case path == "/ids" && (flags&1 == 0 || !countOK):
		return 400, "invalid_count", 0
	}
	return 200, "", n
}

// bodyIDs returns the IDs of a 200 of /id or (batch) /ids, in text or JSON.
func bodyIDs(t *testing.T, uri string, body []byte, asJSON, batch bool) []string {
	t.Helper()
	var ids []string
	switch {
	case asJSON && batch:
		if err := json.Unmarshal(body, &ids); err != nil {
			t.Fatalf("%q: body %s: %v", uri, body, err)
		}
	case asJSON:
		var v struct {
			ID    int64  `json:"id"`
			IDStr string `json:"id_str"`
		}
		if err := json.Unmarshal(body, &v); err != nil || strconv.FormatInt(v.ID, 10) != v.IDStr {
			t.Fatalf("%q: body %s: %v", uri, body, err)
		}
		ids = []string{v.IDStr}
	default:
		ids = strings.Fields(string(body))
	}
	return ids
}

// FuzzDecodePath fuzzes /decode/{id}: never a panic; 200 or 400 invalid_id
// (or whatever endpoint answers when fasthttp's path normalization leaves
// /decode, e.g. "/decode/..%2Fid" is GET /id); a 200 body agrees with
// Layout.Decode.
func FuzzDecodePath(f *testing.F) {
	for _, s := range []string{
		"0", "1", "123456789", "9223372036854775807", "9223372036854775808", "-1", "-", "+1", "",
		"abc", "1.5", "1/2", "../id", "%31", "00000000000000000000000000001", " 1", "1\x00", "\xff",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	layout := snowflake.DefaultLayout()
	fx := newFixture(f, layout, nil)
	f.Fuzz(func(t *testing.T, id string, raw bool) {
		uri := "/decode/" + url.PathEscape(id)
		if raw {
			uri = "/decode/" + id
		}
		if hasCTL(uri) {
			t.Skip("the server rejects control bytes in the URI before routing")
		}
		r, path := call(fx, "GET", uri)
		if !strings.HasPrefix(path, "/decode") {
			// fasthttp decoded and normalized the path out of /decode
			// (e.g. "..%2Fid" → "/id"): another endpoint answered.
			if r.status >= 500 {
				t.Fatalf("%q → %q: status %d (%s)", uri, path, r.status, r.body)
			}
			return
		}
		switch r.status {
		case 200:
			checkDecoded(t, layout, uri, r)
		case 400:
			if e := decodeError(t, r); e.Code != "invalid_id" {
				t.Fatalf("%q: code %q", uri, e.Code)
			}
		default:
			t.Fatalf("%q: status %d (%s)", uri, r.status, r.body)
		}
		// Oracle for plain digit strings (and a minus before digits).
		if id != "" && strings.Trim(id, "0123456789") == "" {
			n, err := strconv.ParseInt(id, 10, 64)
			wantStatus := 200
			if err != nil {
				wantStatus = 400
			}
			if r.status != wantStatus {
				t.Fatalf("%q: status %d, want %d (%s)", uri, r.status, wantStatus, r.body)
			}
			if wantStatus == 200 && !strings.HasPrefix(string(r.body), `{"id":"`+strconv.FormatInt(n, 10)+`"`) {
				t.Fatalf("%q: body %s", uri, r.body)
			}
		}
		if len(id) > 1 && id[0] == '-' && strings.Trim(id[1:], "0123456789") == "" && r.status != 400 {
			t.Fatalf("%q: negative ID answered %d", uri, r.status)
		}
	})
}

// checkDecoded checks a 200 answer r of /decode (asked as uri): JSON whose
// fields are layout's decoding of its id.
func checkDecoded(t *testing.T, layout snowflake.Layout, uri string, r response) {
	t.Helper()
	if r.contentType != "application/json" {
		t.Fatalf("%q: content type %q", uri, r.contentType)
	}
	var got struct {
		ID          string `json:"id"`
		TimestampMS int64  `json:"timestamp_ms"`
		Time        string `json:"time"`
		WorkerID    int64  `json:"worker_id"`
		Sequence    int64  `json:"sequence"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("%q: body %s: %v", uri, r.body, err)
	}
	n, err := strconv.ParseInt(got.ID, 10, 64)
	if err != nil {
		t.Fatalf("%q: id %q: %v", uri, got.ID, err)
	}
	p, err := layout.Decode(n)
	if err != nil || p.WorkerID != got.WorkerID || p.Sequence != got.Sequence || p.UnixMilli() != got.TimestampMS {
		t.Fatalf("%q: body %s disagrees with Decode: %+v %v", uri, r.body, p, err)
	}
}
