package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/client/idtext"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/uuidv7"
)

// decodeParts is the body of a /decode answer.
type decodeParts struct {
	UUID string `json:"uuid"`
	ID   string `json:"id"`
}

// TestEncodedFormats: /id, /ids, Leaf's path, /uuid and /uuids answer in
// every encoding, text/plain, in the encoding's width for the layout, and
// /decode?format= gives back what /decode of the plain form does.
func TestEncodedFormats(t *testing.T) {
	for _, layout := range []snowflake.Layout{snowflake.DefaultLayout(), snowflake.JS53Layout()} {
		f := newFixture(t, layout, nil).serve(t)
		idBits := layout.TimeBits + layout.WorkerBits + layout.SequenceBits
		for _, e := range idtext.Encodings {
			name := layout.String() + "/" + e.String()
			t.Run(name, func(t *testing.T) {
				for _, uri := range []string{"/id?format=" + e.String(), "/api/snowflake/get/k?format=" + e.String(), "/ids?count=50&format=" + e.String()} {
					r := f.do(t, "GET", uri)
					if r.status != 200 || r.contentType != "text/plain; charset=utf-8" {
						t.Fatalf("GET %s: %d %s %s", uri, r.status, r.contentType, r.body)
					}
					lines := strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n")
					var ids []int64
					for _, l := range lines {
						if len(l) != e.Width(idBits) {
							t.Fatalf("GET %s: %q is %d wide, want %d", uri, l, len(l), e.Width(idBits))
						}
						v, err := e.DecodeUint(l, idBits)
						if err != nil {
							t.Fatalf("GET %s: %q: %v", uri, l, err)
						}
						ids = append(ids, int64(v))
						d := f.do(t, "GET", "/decode/"+l+"?format="+e.String())
						plain := f.do(t, "GET", "/decode/"+strconv.FormatUint(v, 10))
						if d.status != 200 || !bytes.Equal(d.body, plain.body) {
							t.Fatalf("/decode/%s?format=%s: %d %s, want %s", l, e, d.status, d.body, plain.body)
						}
					}
					if !slices.IsSorted(lines) || !slices.IsSorted(ids) {
						t.Errorf("GET %s: lines or IDs not increasing: %q", uri, lines)
					}
				}
				for _, uri := range []string{"/uuid?format=" + e.String(), "/uuids?count=20&format=" + e.String()} {
					r := f.do(t, "GET", uri)
					if r.status != 200 || r.contentType != "text/plain; charset=utf-8" {
						t.Fatalf("GET %s: %d %s %s", uri, r.status, r.contentType, r.body)
					}
					lines := strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n")
					for _, l := range lines {
						u, err := e.DecodeUUID(l)
						if err != nil {
							t.Fatalf("GET %s: %q: %v", uri, l, err)
						}
						if u[6]>>4 != 7 {
							t.Fatalf("GET %s: %q is %x, not version 7", uri, l, u)
						}
						d := f.do(t, "GET", "/decode/"+l+"?format="+e.String())
						plain := f.do(t, "GET", "/decode/"+uuidv7.UUID(u).String())
						if d.status != 200 || !bytes.Equal(d.body, plain.body) {
							t.Fatalf("/decode/%s?format=%s: %d %s, want %s", l, e, d.status, d.body, plain.body)
						}
						var p decodeParts
						if err := json.Unmarshal(d.body, &p); err != nil || p.UUID != uuidv7.UUID(u).String() {
							t.Fatalf("/decode/%s?format=%s: %s", l, e, d.body)
						}
					}
					if !slices.IsSorted(lines) {
						t.Errorf("GET %s: not increasing as strings: %q", uri, lines)
					}
				}
			})
		}
	}
}

// TestFormatErrors: a bad format names the values the endpoint accepts;
// /decode's bad strings name the encoding, the widths and the character.
func TestFormatErrors(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	tests := []struct {
		name, uri string
		status    int
		code      string
		msgHas    []string
	}{
		{"id base64", "/id?format=base64", 400, "invalid_format", []string{`"base64"`, "text, json, base62, base58, base36 or base32"}},
		{"ids Base62", "/ids?count=2&format=Base62", 400, "invalid_format", []string{`"Base62"`, "base62"}},
		{"uuid base16", "/uuid?format=base16", 400, "invalid_format", []string{`"base16"`, "base32"}},
		{"uuids hex", "/uuids?count=2&format=hex", 400, "invalid_format", []string{`"hex"`, "base32"}},
		{"leaf xml", "/api/snowflake/get/k?format=xml", 400, "invalid_format", []string{`"xml"`, "base62"}},
		{"decode base64", "/decode/abc?format=base64", 400, "invalid_format", []string{`"base64"`, "base62, base58, base36 or base32"}},
		{"decode short", "/decode/abc?format=base62", 400, "invalid_id", []string{"base62", `"abc"`, "3 characters", "has 11 characters, a UUID 22"}},
		{"decode bad char", "/decode/0000000000-?format=base62", 400, "invalid_id", []string{"base62", `'-' at position 11`, "has 11 characters, a UUID 22"}},
		{"decode base58 zero", "/decode/0000000000A?format=base58", 400, "invalid_id", []string{"base58", `'0' at position 1`}},
		{"decode uuid bad char", "/decode/000000000000000000000_?format=base62", 400, "invalid_id", []string{`'_' at position 22`}},
		{"decode past 2^63", "/decode/zzzzzzzzzzz?format=base62", 400, "invalid_id", []string{"2^63 or more"}},
		{"decode base32 U", "/decode/000000000000U?format=base32", 400, "invalid_id", []string{"'U'", "base32"}},
		{"decode empty", "/decode/?format=base36", 400, "invalid_id", []string{"required", "13 characters"}},
		{"decode uuid not v7", "/decode/0000000000000000000000?format=base62", 400, "invalid_uuid", []string{"version 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "GET", tt.uri)
			e := decodeError(t, r)
			if r.status != tt.status || e.Code != tt.code {
				t.Fatalf("GET %s: %d %s, want %d %s", tt.uri, r.status, r.body, tt.status, tt.code)
			}
			for _, s := range tt.msgHas {
				if !strings.Contains(e.Message, s) {
					t.Errorf("GET %s: message %q lacks %q", tt.uri, e.Message, s)
				}
			}
		})
	}
}

// TestFormatPlainKept: what the plain formats did they still do: Leaf's
// path answers decimal with format=text or json, /decode reads the
// decimal and canonical forms with format=text or json.
func TestFormatPlainKept(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	for _, uri := range []string{"/api/snowflake/get/k?format=json", "/api/snowflake/get/k?format=text", "/api/snowflake/get/k?format=base62&other=1"} {
		r := f.do(t, "GET", uri)
		want := allDigits(r.body)
		if strings.Contains(uri, "base62") {
			want = len(r.body) == 11
		}
		if r.status != 200 || r.contentType != "text/plain; charset=utf-8" || !want {
			t.Errorf("GET %s: %d %s %q", uri, r.status, r.contentType, r.body)
		}
	}
	id := strconv.FormatInt(snowflake.DefaultLayout().Compose(1000, 3, 9), 10)
	plain := f.do(t, "GET", "/decode/"+id)
	for _, q := range []string{"?format=text", "?format=json"} {
		if r := f.do(t, "GET", "/decode/"+id+q); r.status != 200 || !bytes.Equal(r.body, plain.body) {
			t.Errorf("/decode/%s%s: %d %s, want %s", id, q, r.status, r.body, plain.body)
		}
	}
}
