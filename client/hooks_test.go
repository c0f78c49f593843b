package client

import (
	"context"
	"sync"
	"testing"
	"time"
)

// The hooks get one event each, its fields named: a request's node, count,
// status, error and duration; a batch's IDs; a failover's node and error.
func TestHooksReportEvents(t *testing.T) {
	good := startFake(t, 1, nil)
	down := closedAddr(t)
	var mu sync.Mutex
	var requests []RequestEvent
	var batches []BatchEvent
	var failovers []FailoverEvent
	c := newClient(t, Config{Servers: []string{down, good.addr}, Hooks: Hooks{
		Request:  func(e RequestEvent) { mu.Lock(); requests = append(requests, e); mu.Unlock() },
		Batch:    func(e BatchEvent) { mu.Lock(); batches = append(batches, e); mu.Unlock() },
		Failover: func(e FailoverEvent) { mu.Lock(); failovers = append(failovers, e); mu.Unlock() },
	}})
	if _, err := c.NextN(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) != 2 || len(batches) != 1 || len(failovers) != 1 {
		t.Fatalf("events: %d requests, %d batches, %d failovers; want 2, 1, 1", len(requests), len(batches), len(failovers))
	}
	tests := []struct {
		name string
		got  RequestEvent
		node string
		code int
		err  bool
	}{
		{"refused", requests[0], down, 0, true},
		{"served", requests[1], good.addr, 200, false},
	}
	for _, tc := range tests {
		e := tc.got
		if e.Node != tc.node || e.Count != 3 || e.Status != tc.code || (e.Err != nil) != tc.err || e.Duration <= 0 || e.Duration > time.Minute {
			t.Errorf("%s: %+v; want node %s, count 3, status %d, error %v, a duration", tc.name, e, tc.node, tc.code, tc.err)
		}
	}
	if batches[0].IDs != 3 {
		t.Errorf("batch: %+v, want 3 IDs", batches[0])
	}
	if f := failovers[0]; f.Node != down || f.Err == nil || f.Err != requests[0].Err {
		t.Errorf("failover: %+v, want node %s and the request's error %v", f, down, requests[0].Err)
	}
}
