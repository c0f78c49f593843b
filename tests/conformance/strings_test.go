package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// encodings are the string ID encodings of format=.
var encodings = []string{"base62", "base58", "base36", "base32"}

// widths63 and widths128 are each encoding's width for 63 and 128 bits.
var (
	widths63  = map[string]int{"base62": 11, "base58": 11, "base36": 13, "base32": 13}
	widths128 = map[string]int{"base62": 22, "base58": 22, "base36": 25, "base32": 26}
)

// idBits is the bits of an ID of the suite's layout.
func (w *world) idBits() uint { return w.layout.TimeBits + w.layout.WorkerBits + w.layout.SequenceBits }

// node0 GETs path of the cluster's first node and returns the status and
// the body without a trailing newline.
func (w *world) node0(path string) (int, string) {
	code, body := get(plainHTTP, "http://"+w.nodes[0].addr+path, "")
	return code, strings.TrimSuffix(body, "\n")
}

// jsonString reads a string field of a JSON object ("" when absent).
func jsonString(t *testing.T, body, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	s, _ := m[field].(string)
	return s
}

// caseStringIDs: the client's encoding of an ID or UUID is what the node
// reads with /decode/{s}?format=, the client reads what /id and /uuid write
// with format=, and both refuse the same bad strings for the same reason.
func caseStringIDs(t *testing.T, w *world, d *driver) {
	d.open(map[string]any{"nodes": w.proxied()})
	bits := w.idBits()
	ids := append(d.ok(map[string]any{"op": "next_ids", "n": 3}).IDs, "1", strconv.FormatUint(1<<bits-1, 10))
	for _, enc := range encodings {
		t.Run(enc, func(t *testing.T) {
			// Client → node: the node decodes the client's string as the ID.
			for _, id := range ids {
				s := d.ok(map[string]any{"op": "encode", "kind": "id", "value": id, "encoding": enc, "bits": bits}).Text
				if bits == 63 && len(s) != widths63[enc] {
					t.Errorf("encode %s in %s = %q: want %d characters", id, enc, s, widths63[enc])
				}
				code, got := w.node0("/decode/" + url.PathEscape(s) + "?format=" + enc)
				_, want := w.node0("/decode/" + id)
				if code != http.StatusOK || got != want {
					t.Errorf("the client encodes %s in %s as %q; the node decodes that as %d %s, want %s", id, enc, s, code, got, want)
				}
				if back := d.ok(map[string]any{"op": "decode_string", "kind": "id", "text": s, "encoding": enc, "bits": bits}).Value; back != id {
					t.Errorf("decode_string(%q, %s) = %s, want %s", s, enc, back, id)
				}
			}
			// Node → client: an ID and a UUID the node wrote in enc.
			code, s := w.node0("/id?format=" + enc)
			if code != http.StatusOK {
				t.Fatalf("GET /id?format=%s: %d %s", enc, code, s)
			}
			v := d.ok(map[string]any{"op": "decode_string", "kind": "id", "text": s, "encoding": enc, "bits": bits}).Value
			if _, dec := w.node0("/decode/" + url.PathEscape(s) + "?format=" + enc); jsonString(t, dec, "id") != v {
				t.Errorf("the client reads the node's %s ID %q as %s; the node's /decode says %s", enc, s, v, dec)
			}
			if again := d.ok(map[string]any{"op": "encode", "kind": "id", "value": v, "encoding": enc, "bits": bits}).Text; again != s {
				t.Errorf("encode(%s, %s) = %q, the node wrote %q", v, enc, again, s)
			}
			code, s = w.node0("/uuid?format=" + enc)
			if code != http.StatusOK {
				t.Fatalf("GET /uuid?format=%s: %d %s", enc, code, s)
			}
			u := d.ok(map[string]any{"op": "decode_string", "kind": "uuid", "text": s, "encoding": enc}).Value
			if _, dec := w.node0("/decode/" + url.PathEscape(s) + "?format=" + enc); jsonString(t, dec, "uuid") != u {
				t.Errorf("the client reads the node's %s UUID %q as %s; the node's /decode says %s", enc, s, u, dec)
			}
			if again := d.ok(map[string]any{"op": "encode", "kind": "uuid", "value": u, "encoding": enc}).Text; again != s || len(s) != widths128[enc] {
				t.Errorf("encode(%s, %s) = %q, the node wrote %q (want %d characters)", u, enc, again, s, widths128[enc])
			}
			// Bad strings: the client's typed error and the node's 400.
			last := string(alphabetLast(enc))
			for _, bad := range []struct{ kind, s string }{
				{"width", s[:len(s)-1]},
				{"width", s + s[:1]},
				{"character", "-" + s[1:]},
				{"character", "-"},
				{"range", strings.Repeat(last, widths63[enc])},
			} {
				if bad.kind == "range" && bits != 63 {
					continue
				}
				a := d.do(map[string]any{"op": "decode_string", "kind": "id", "text": bad.s, "encoding": enc, "bits": bits}, nil)
				if a.Error == nil || a.Error.Type != "encoding" || a.Error.Code != bad.kind {
					t.Errorf("decode_string(%q, %s): %v %q, want the encoding error %q", bad.s, enc, a.Error, a.Value, bad.kind)
				}
				if code, body := w.node0("/decode/" + url.PathEscape(bad.s) + "?format=" + enc); code != http.StatusBadRequest || !strings.Contains(body, `"invalid_id"`) {
					t.Errorf("the node decodes %q (%s) as %d %s, want 400 invalid_id", bad.s, enc, code, body)
				}
			}
		})
	}
}

// alphabetLast is each encoding's largest digit.
func alphabetLast(enc string) byte {
	return map[string]byte{"base62": 'z', "base58": 'z', "base36": 'z', "base32": 'Z'}[enc]
}

// caseBounds: the client's bounds are the node's /bounds, and a range the
// node refuses is the client's rejected invalid_range.
func caseBounds(t *testing.T, w *world, d *driver) {
	d.open(map[string]any{"nodes": w.proxied()})
	now := time.Now().UnixMilli()
	epoch := w.layout.Epoch.UnixMilli()
	day := int64(24 * time.Hour / time.Millisecond)
	for _, r := range [][2]int64{{now - 3600_000, now}, {epoch, epoch + 1}, {epoch + day + 123, epoch + 2*day + 7}} {
		a := d.ok(map[string]any{"op": "bounds", "from_ms": r[0], "to_ms": r[1]})
		code, body := w.node0(fmt.Sprintf("/bounds?from=%d&to=%d", r[0], r[1]))
		if code != http.StatusOK {
			t.Fatalf("GET /bounds?from=%d&to=%d: %d %s", r[0], r[1], code, body)
		}
		var want boundsAnswer
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatalf("/bounds: %v: %s", err, body)
		}
		if a.Bounds == nil || *a.Bounds != want {
			t.Errorf("bounds(%d, %d) = %+v; the node's /bounds says %+v", r[0], r[1], a.Bounds, want)
		}
	}
	for _, r := range [][2]int64{{now, now - 1000}, {now, now}, {epoch - 1000, epoch + 1000}} {
		a := d.do(map[string]any{"op": "bounds", "from_ms": r[0], "to_ms": r[1], "deadline_ms": 5000}, nil)
		if a.Error == nil || a.Error.Type != "rejected" || a.Error.Status != http.StatusBadRequest || a.Error.Code != "invalid_range" {
			t.Errorf("bounds(%d, %d): %v, want rejected 400 invalid_range", r[0], r[1], a.Error)
		}
	}
}

// caseSegmentText: a tag's IDs as text are the node's lines: decimal IDs,
// or with format= strings of the encoding's width that the node decodes.
func caseSegmentText(t *testing.T, w *world, d *driver) {
	d.open(map[string]any{"nodes": w.proxied()})
	_, direct := w.node0("/segment/plain?count=3")
	if len(strings.Split(direct, "\n")) != 3 {
		t.Fatalf("GET /segment/plain?count=3: %q", direct)
	}
	texts := d.ok(map[string]any{"op": "next_segment_text", "tag": "plain", "n": 5}).Texts
	if len(texts) != 5 {
		t.Fatalf("next_segment_text(plain, 5) = %q", texts)
	}
	ids := parseIDs(t, texts) // decimal, as the node's lines
	increasing(t, "next_segment_text(plain, 5)", ids)
	for _, enc := range encodings {
		texts := d.ok(map[string]any{"op": "next_segment_text", "tag": "plain", "n": 3, "format": enc}).Texts
		if len(texts) != 3 || !slices.IsSorted(texts) {
			t.Fatalf("next_segment_text(plain, 3, %s) = %q: want 3 strings, sorted as the IDs", enc, texts)
		}
		for _, s := range texts {
			code, dec := w.node0("/decode/" + url.PathEscape(s) + "?format=" + enc)
			if len(s) != widths63[enc] || code != http.StatusOK {
				t.Errorf("next_segment_text(plain, 3, %s) gave %q: the node decodes it as %d %s", enc, s, code, dec)
			}
			if v := d.ok(map[string]any{"op": "decode_string", "kind": "id", "text": s, "encoding": enc, "bits": 63}).Value; jsonString(t, dec, "id") != v {
				t.Errorf("%s dense ID %q: the client reads %s, the node %s", enc, s, v, dec)
			}
		}
	}
	a := d.do(map[string]any{"op": "next_segment_text", "tag": "nosuchtag", "n": 1}, nil)
	if a.Error == nil || a.Error.Type != "rejected" || a.Error.Status != http.StatusNotFound || a.Error.Code != "unknown_tag" {
		t.Errorf("next_segment_text(nosuchtag): %v, want rejected 404 unknown_tag", a.Error)
	}
}
