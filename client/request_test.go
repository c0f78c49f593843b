package client

import (
	"slices"
	"testing"
)

// A node's answer: snowflake IDs must increase; a tag's dense IDs (an
// opaque tag's are in no order) must only be distinct.
func TestParseIDs(t *testing.T) {
	for _, tc := range []struct {
		body       string
		n          int
		increasing bool
		want       []int64
	}{
		{"1\n2\n3\n", 3, true, []int64{1, 2, 3}},
		{"3\n1\n2\n", 3, true, nil},
		{"83920211\n10293847\n55555555\n", 3, false, []int64{83920211, 10293847, 55555555}},
		{"7\n9\n7\n", 3, false, nil},
		{"1\n2\n", 3, false, nil},
		{"1\nx\n", 2, false, nil},
	} {
		got, err := parseIDs([]byte(tc.body), tc.n, tc.increasing)
		if (tc.want == nil) != (err != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("parseIDs(%q, %d, increasing %v) = %v, %v; want %v", tc.body, tc.n, tc.increasing, got, err, tc.want)
		}
	}
}
