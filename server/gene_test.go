package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// ?gene=G: every ID ends in G's low gene bits, /decode reports the gene;
// bad values and a layout without gene bits are 400s naming the problem.
func TestGeneParameter(t *testing.T) {
	l := snowflake.DefaultLayout()
	l.GeneBits = 8
	f := newFixture(t, l, nil).serve(t)
	const user = 1234567890123 // a user ID; its low 8 bits are 203
	mask := int64(1)<<8 - 1
	r := f.do(t, fasthttp.MethodGet, "/id?gene="+strconv.Itoa(user))
	id, err := strconv.ParseInt(string(r.body), 10, 64)
	if r.status != 200 || err != nil || id&mask != user&mask {
		t.Fatalf("/id?gene=%d: %d %s (ends in %d, want %d)", user, r.status, r.body, id&mask, user&mask)
	}
	r = f.do(t, fasthttp.MethodGet, "/ids?count=300&gene=7&format=json")
	var ids []string
	if err := json.Unmarshal(r.body, &ids); err != nil || r.status != 200 || len(ids) != 300 {
		t.Fatalf("/ids?count=300&gene=7: %d %.200s", r.status, r.body)
	}
	prev := int64(0)
	for _, s := range ids {
		v, _ := strconv.ParseInt(s, 10, 64)
		if v&mask != 7 || v <= prev {
			t.Fatalf("id %d after %d: ends in %d, want 7, increasing", v, prev, v&mask)
		}
		prev = v
	}
	r = f.do(t, fasthttp.MethodGet, "/decode/"+strconv.FormatInt(id, 10))
	if r.status != 200 || !strings.Contains(string(r.body), `"gene":203`) {
		t.Errorf("/decode of a gene ID: %d %s", r.status, r.body)
	}

	for _, tc := range []struct{ uri, code, msg string }{
		{"/id?gene=-1", codeInvalidGene, `gene "-1" is not a decimal number from 0 to 9223372036854775807`},
		{"/id?gene=abc", codeInvalidGene, "not a decimal number"},
		{"/id?gene=", codeInvalidGene, "not a decimal number"},
		{"/ids?count=2&gene=9223372036854775808", codeInvalidGene, "not a decimal number"},
		{"/id?gene=1&gene=2", codeInvalidParameter, "more than once"},
		{"/id?gen=1", codeInvalidParameter, "allowed are format and gene"},
		{"/ids?count=1&cout=1", codeInvalidParameter, "allowed are count, format and gene"},
	} {
		r := f.do(t, fasthttp.MethodGet, tc.uri)
		e := decodeError(t, r)
		if r.status != 400 || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: %d %s %q, want 400 %s %q", tc.uri, r.status, e.Code, e.Message, tc.code, tc.msg)
		}
	}

	// No gene bits: gene_off.
	off := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	for _, uri := range []string{"/id?gene=5", "/ids?count=3&gene=5"} {
		r := off.do(t, fasthttp.MethodGet, uri)
		if e := decodeError(t, r); r.status != 400 || e.Code != codeGeneOff {
			t.Errorf("%s without gene bits: %d %s", uri, r.status, e.Code)
		}
	}
	if r := off.do(t, fasthttp.MethodGet, "/decode/12345"); strings.Contains(string(r.body), "gene") {
		t.Errorf("/decode without gene bits mentions a gene: %s", r.body)
	}
}
