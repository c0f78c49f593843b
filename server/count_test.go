package server

import (
	"encoding/json"
	"testing"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// An invalid_count answer carries the node's --max-batch as "max", on
// every endpoint that takes a count; no other error carries it.
func TestCountErrorCarriesMax(t *testing.T) {
	const maxBatch = 50
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.MaxBatch = maxBatch
		c.Segments = &fakeSegments{ready: true}
	}).serve(t)
	tests := []struct {
		uri  string
		code string
		max  int
	}{
		{"/ids?count=51", wire.CodeInvalidCount, maxBatch},
		{"/ids?count=0", wire.CodeInvalidCount, maxBatch},
		{"/ids", wire.CodeInvalidCount, maxBatch},
		{"/ids?count=abc", wire.CodeInvalidCount, maxBatch},
		{"/uuids?count=51", wire.CodeInvalidCount, maxBatch},
		{"/segment/orders?count=51", wire.CodeInvalidCount, maxBatch},
		{"/ids?count=2&format=xml", wire.CodeInvalidFormat, 0},
		{"/ids?cout=2", wire.CodeInvalidParameter, 0},
	}
	for _, tc := range tests {
		t.Run(tc.uri, func(t *testing.T) {
			r := f.do(t, "GET", tc.uri)
			var body struct {
				Error map[string]json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(r.body, &body); err != nil || r.status != 400 {
				t.Fatalf("GET %s: %d %s (%v)", tc.uri, r.status, r.body, err)
			}
			var e wire.ErrorBody
			if err := json.Unmarshal(r.body, &e); err != nil {
				t.Fatal(err)
			}
			_, hasMax := body.Error["max"]
			if e.Error.Code != tc.code || e.Error.Max != tc.max || hasMax != (tc.max != 0) {
				t.Fatalf("GET %s: %s; want code %s and max %d", tc.uri, r.body, tc.code, tc.max)
			}
		})
	}
}
