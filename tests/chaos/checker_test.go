package chaos

import (
	"errors"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// id composes an ID of the default layout.
func id(tick, worker, seq int64) int64 { return snowflake.DefaultLayout().Compose(tick, worker, seq) }

const ms = time.Millisecond

func TestCheckerFindsEachKindOfProblem(t *testing.T) {
	const w1, w2 = 1, 2
	tests := []struct {
		name    string
		batches []Batch
		want    map[string]int64 // problems expected; nil: none
	}{
		{
			name: "clean interleaved clients and a clean restart",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(10, w1, 0), id(10, w1, 1)}},
				{Node: "a", Client: 1, Sent: 1 * ms, Recv: 3 * ms, IDs: []int64{id(10, w1, 2)}},
				{Node: "a", Client: 0, Sent: 4 * ms, Recv: 5 * ms, IDs: []int64{id(11, w1, 0)}},
				{Node: "b", Client: 2, Sent: 4 * ms, Recv: 5 * ms, IDs: []int64{id(10, w2, 0)}},
				{Node: "a", Incarnation: 1, Client: 1, Sent: 9 * ms, Recv: 10 * ms, IDs: []int64{id(20, w1, 0)}},
			},
		},
		{
			name: "duplicate across two clients",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 3 * ms, IDs: []int64{id(10, w1, 0), id(10, w1, 1)}},
				{Node: "a", Client: 1, Sent: 2 * ms, Recv: 3 * ms, IDs: []int64{id(10, w1, 1)}},
			},
			want: map[string]int64{ProblemDuplicate: 1},
		},
		{
			name: "one client sees an ID go backwards across two answers",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(10, w1, 5)}},
				{Node: "a", Client: 0, Sent: 3 * ms, Recv: 4 * ms, IDs: []int64{id(10, w1, 4)}},
			},
			// Also real-time: the first answer was in before the second request.
			want: map[string]int64{ProblemStreamOrder: 1, ProblemRealtimeOrder: 1},
		},
		{
			name: "IDs not increasing within one answer",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(10, w1, 5), id(10, w1, 5), id(10, w1, 6)}},
			},
			want: map[string]int64{ProblemStreamOrder: 1, ProblemDuplicate: 1},
		},
		{
			name: "answer received before another client's request, with a higher ID",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(10, w1, 9)}},
				{Node: "a", Client: 1, Sent: 3 * ms, Recv: 4 * ms, IDs: []int64{id(10, w1, 8)}},
			},
			want: map[string]int64{ProblemRealtimeOrder: 1},
		},
		{
			name: "overlapping requests may come back in either order",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 4 * ms, IDs: []int64{id(10, w1, 9)}},
				{Node: "a", Client: 1, Sent: 3 * ms, Recv: 5 * ms, IDs: []int64{id(10, w1, 8)}},
			},
		},
		{
			name: "after a restart an ID at or below one issued before",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(50, w1, 0)}},
				// Another client, and sent before the first answer was in:
				// only the restart check can catch it.
				{Node: "a", Incarnation: 1, Client: 1, Sent: 1 * ms, Recv: 9 * ms, IDs: []int64{id(40, w1, 0)}},
			},
			want: map[string]int64{ProblemRestartFloor: 1},
		},
		{
			name: "a batch of unknown incarnation is left out of the restart check",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(50, w1, 0)}},
				{Node: "a", Incarnation: -1, Client: 1, Sent: 1 * ms, Recv: 9 * ms, IDs: []int64{id(40, w1, 0)}},
			},
		},
		{
			name: "two nodes issue IDs of one worker",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(10, w1, 0)}},
				{Node: "b", Client: 1, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(11, w1, 0)}},
			},
			want: map[string]int64{ProblemWorker: 1},
		},
		{
			name: "one answer mixes workers",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(10, w1, 0), id(10, w2, 1)}},
			},
			want: map[string]int64{ProblemWorker: 1},
		},
		{
			name: "zero and negative IDs",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{0, -7, id(10, w1, 0)}},
			},
			want: map[string]int64{ProblemInvalidID: 2},
		},
		{
			name: "an empty 200",
			batches: []Batch{
				{Node: "a", Client: 0, Sent: 1 * ms, Recv: 2 * ms},
			},
			want: map[string]int64{ProblemBadBody: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(snowflake.DefaultLayout())
			var ids int64
			for _, b := range tc.batches {
				c.Record(b)
				ids += int64(len(b.IDs))
			}
			r := c.Verify()
			if r.IDs != ids {
				t.Errorf("IDs checked %d, want %d", r.IDs, ids)
			}
			if len(r.Problems) != len(tc.want) {
				t.Fatalf("problems %v, want %v\n%s", r.Problems, tc.want, r)
			}
			for k, v := range tc.want {
				if r.Problems[k] != v {
					t.Errorf("%s: %d, want %d\n%s", k, r.Problems[k], v, r)
				}
			}
			if r.OK() != (len(tc.want) == 0) {
				t.Errorf("OK() = %v with problems %v", r.OK(), r.Problems)
			}
		})
	}
}

func TestCheckerDuplicateAmongManyIDs(t *testing.T) {
	c := NewChecker(snowflake.DefaultLayout())
	const n = 20000
	for client := range 4 {
		var ids []int64
		for i := range int64(n) {
			ids = append(ids, id(1000+i, int64(client), 0))
		}
		c.Record(Batch{Node: string(rune('a' + client)), Client: client, Sent: 1 * ms, Recv: 2 * ms, IDs: ids})
	}
	if r := c.Verify(); !r.OK() || r.IDs != 4*n || r.Workers != 4 {
		t.Fatalf("clean data: %s", r)
	}
	// One ID again, in a later answer to another client of node c.
	c.Record(Batch{Node: "c", Client: 9, Sent: 1 * ms, Recv: 2 * ms, IDs: []int64{id(1000+n/2, 2, 0)}})
	r := c.Verify()
	if r.Count(ProblemDuplicate) != 1 || !strings.Contains(r.String(), "issued twice") {
		t.Fatalf("duplicate not found: %s", r)
	}
}

func TestParseUnavailable(t *testing.T) {
	tests := []struct {
		name, body, reason string
		ok                 bool
	}{
		{"out of service", `{"error":{"code":"out_of_service","message":"m","reason":"clock_rollback","state":"out_of_service"}}`, "clock_rollback", true},
		{"generator rollback", `{"error":{"code":"clock_rollback","message":"m","reason":"clock_rollback","state":"in_service"}}`, "clock_rollback", true},
		{"fence reached", `{"error":{"code":"fence_reached","message":"m","reason":"fence_reached","state":"in_service"}}`, "fence_reached", true},
		{"peer offset", `{"error":{"code":"out_of_service","reason":"peer_offset","state":"starting"}}`, "peer_offset", true},
		{"no reason", `{"error":{"code":"out_of_service","message":"m","reason":"","state":"in_service"}}`, "", false},
		{"unknown reason", `{"error":{"code":"out_of_service","reason":"bad_luck"}}`, "bad_luck", false},
		{"unknown code", `{"error":{"code":"teapot","reason":"clock_rollback"}}`, "clock_rollback", false},
		{"code and reason differ", `{"error":{"code":"fence_reached","reason":"clock_rollback"}}`, "clock_rollback", false},
		{"not JSON", `Service Unavailable`, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reason, err := ParseUnavailable([]byte(tc.body))
			if (err == nil) != tc.ok || reason != tc.reason {
				t.Errorf("ParseUnavailable = %q, %v; want %q, ok %v", reason, err, tc.reason, tc.ok)
			}
		})
	}
}

func TestCheckerRecordFailure(t *testing.T) {
	good := `{"error":{"code":"out_of_service","reason":"ntp_offset","state":"out_of_service"}}`
	tests := []struct {
		name       string
		status     int
		retryAfter string
		body       string
		problem    string // "" for none
	}{
		{"documented 503", 503, "1", good, ""},
		{"503 without Retry-After", 503, "", good, ProblemBadReason},
		{"503 with an undocumented reason", 503, "1", `{"error":{"code":"out_of_service","reason":"gremlins"}}`, ProblemBadReason},
		{"500", 500, "", `{"error":{"code":"internal"}}`, ProblemBadStatus},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(snowflake.DefaultLayout())
			c.RecordFailure("a", tc.status, tc.retryAfter, []byte(tc.body))
			r := c.Verify()
			if got := len(r.Problems); (tc.problem == "" && got != 0) || (tc.problem != "" && r.Count(tc.problem) != 1) {
				t.Fatalf("problems %v, want %q", r.Problems, tc.problem)
			}
			counts := c.Counts("a")
			if counts.Errors() != 1 {
				t.Errorf("errors counted %d, want 1: %s", counts.Errors(), counts)
			}
			if tc.problem == "" && counts.Unavailable["ntp_offset"] != 1 {
				t.Errorf("503 by reason %v, want ntp_offset 1", counts.Unavailable)
			}
		})
	}
}

func TestCheckerRecordReadyz(t *testing.T) {
	tests := []struct {
		body string
		ok   bool
	}{
		{`{"state":"out_of_service","reason":"clock_rollback","detail":"x"}`, true},
		{`{"state":"starting","reason":"starting"}`, true},
		{`{"state":"out_of_service","reason":""}`, false},
		{`{"state":"out_of_service","reason":"nope"}`, false},
		{`not json`, false},
	}
	for _, tc := range tests {
		c := NewChecker(snowflake.DefaultLayout())
		c.RecordReadyz("a", []byte(tc.body))
		if got := c.Verify().OK(); got != tc.ok {
			t.Errorf("RecordReadyz(%s): ok %v, want %v", tc.body, got, tc.ok)
		}
	}
}

func TestNodeCountsSub(t *testing.T) {
	c := NewChecker(snowflake.DefaultLayout())
	c.RecordTransportError("a")
	before := c.Counts("a")
	c.Record(Batch{Node: "a", IDs: []int64{id(1, 1, 1), id(1, 1, 2)}})
	c.RecordFailure("a", 503, "1", []byte(`{"error":{"code":"clock_rollback","reason":"clock_rollback"}}`))
	c.RecordBadBody("a", errors.New("two IDs for count=3"))
	d := c.Counts("a").Sub(before)
	if d.OK != 1 || d.IDs != 2 || d.Transport != 0 || d.Other != 1 || d.Unavailable["clock_rollback"] != 1 || d.Errors() != 2 {
		t.Errorf("delta %s", d)
	}
}
