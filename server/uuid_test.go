package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/uuidv7"
)

// /uuid and /uuids hand out version 7 UUIDs made from this node's IDs,
// increasing; /decode/{uuid} gives the ID back; bad input is a 400.
func TestUUIDEndpoints(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	codec, err := uuidv7.NewCodec(snowflake.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	r := f.do(t, fasthttp.MethodGet, "/uuid")
	one := string(r.body)
	u, err := uuidv7.Parse(one)
	if r.status != 200 || err != nil || len(one) != 36 || one != strings.ToLower(one) || one[14] != '7' {
		t.Fatalf("/uuid: %d %q (%v)", r.status, one, err)
	}
	id, err := codec.Decode(u)
	if p, _ := snowflake.DefaultLayout().Decode(id); err != nil || p.WorkerID != testWorker || time.Since(p.Time) > time.Minute {
		t.Fatalf("/uuid %s decodes to %d (%+v), %v", one, id, p, err)
	}

	checkUUIDsAfter(t, f, one)

	r = f.do(t, fasthttp.MethodGet, "/decode/"+one)
	var d struct {
		UUID     string `json:"uuid"`
		ID       string `json:"id"`
		WorkerID int64  `json:"worker_id"`
	}
	if err := json.Unmarshal(r.body, &d); err != nil || r.status != 200 || d.UUID != one || d.WorkerID != testWorker || d.ID == "" {
		t.Fatalf("/decode/%s: %d %s", one, r.status, r.body)
	}

	for _, tc := range []struct{ uri, code string }{
		{"/decode/00000000-0000-4000-8000-000000000000", codeInvalidUUID}, // version 4
		{"/decode/0190b2d4-7c3e-7abc-0def-0123456789ab", codeInvalidUUID}, // variant 0
		{"/decode/zzzzzzzz-7c3e-7abc-8def-0123456789ab", codeInvalidUUID},
		{"/uuids", codeInvalidCount},
		{"/uuids?count=0", codeInvalidCount},
		{"/uuid?count=2", codeInvalidParameter},
		{"/uuids?count=2&format=xml", codeInvalidFormat},
	} {
		r := f.do(t, fasthttp.MethodGet, tc.uri)
		if e := decodeError(t, r); r.status != 400 || e.Code != tc.code {
			t.Errorf("%s: %d %s %q, want 400 %s", tc.uri, r.status, e.Code, e.Message, tc.code)
		}
	}

	// Out of service: 503, like /id.
	f.check.Fail("test")
	if r := f.do(t, fasthttp.MethodGet, "/uuid"); r.status != 503 {
		t.Errorf("/uuid out of service: %d", r.status)
	}
}

// checkUUIDsAfter checks /uuids (text and JSON) and /uuid?format=json
// after the UUID one: each increasing on the one before.
func checkUUIDsAfter(t *testing.T, f *fixture, one string) {
	t.Helper()
	r := f.do(t, fasthttp.MethodGet, "/uuids?count=500")
	lines := strings.Fields(string(r.body))
	if r.status != 200 || len(lines) != 500 {
		t.Fatalf("/uuids?count=500: %d, %d lines", r.status, len(lines))
	}
	prev := one
	for _, l := range lines {
		if l <= prev {
			t.Fatalf("%s after %s: not increasing", l, prev)
		}
		prev = l
	}
	r = f.do(t, fasthttp.MethodGet, "/uuids?count=3&format=json")
	var arr []string
	if err := json.Unmarshal(r.body, &arr); err != nil || len(arr) != 3 || arr[0] <= prev {
		t.Fatalf("/uuids json: %s, %v", r.body, err)
	}
	r = f.do(t, fasthttp.MethodGet, "/uuid?format=json")
	var obj struct{ UUID string }
	if err := json.Unmarshal(r.body, &obj); err != nil || obj.UUID <= arr[2] {
		t.Fatalf("/uuid json: %s, %v", r.body, err)
	}
}

// A layout with more than 42 worker and sequence bits makes no UUIDs.
func TestUUIDOff(t *testing.T) {
	wide, err := snowflake.ParseLayout("20/22/21", "2024-01-01T00:00:00Z", "1h", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, wide, nil).serve(t)
	for _, uri := range []string{"/uuid", "/uuids?count=2", "/decode/0190b2d4-7c3e-7abc-8def-0123456789ab"} {
		r := f.do(t, fasthttp.MethodGet, uri)
		if e := decodeError(t, r); r.status != 400 || e.Code != codeUUIDOff || !strings.Contains(e.Message, "at most 42") {
			t.Errorf("%s: %d %s %q", uri, r.status, e.Code, e.Message)
		}
	}
}
