package client

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// calls are the client's calls, each asking for one or a few IDs, for
// tests that run every path alike.
var calls = []struct {
	name    string
	call    func(ctx context.Context, c *Client) error
	batched bool // merged with others (else its own request, never queued)
}{
	{"Next", func(ctx context.Context, c *Client) error { _, err := c.Next(ctx); return err }, true},
	{"NextN", func(ctx context.Context, c *Client) error { _, err := c.NextN(ctx, 3); return err }, true},
	{"NextSegment", func(ctx context.Context, c *Client) error { _, err := c.NextSegment(ctx, "orders"); return err }, true},
	{"NextGene", func(ctx context.Context, c *Client) error { _, err := c.NextGene(ctx, 42); return err }, false},
	{"NextUUID", func(ctx context.Context, c *Client) error { _, err := c.NextUUID(ctx); return err }, false},
}

// No node left: a *NoNodeError that is ErrNoNode, holds each node's
// failure (errors.Is finds the refused connection through it) and names the
// nodes it did not try; on every path.
func TestNoNodeError(t *testing.T) {
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			down := startFake(t, 1, unavailable)
			refused := closedAddr(t)
			spare := startFake(t, 3, nil)
			c := newClient(t, Config{Servers: []string{down.addr, refused, spare.addr}, Attempts: 2})
			err := tc.call(context.Background(), c)
			var nn *NoNodeError
			if !errors.Is(err, ErrNoNode) || !errors.As(err, &nn) {
				t.Fatalf("err %v (%T), want a *NoNodeError", err, err)
			}
			if len(nn.Causes) != 2 || !strings.HasPrefix(nn.Causes[0].Error(), down.addr+": 503 out_of_service") || !strings.HasPrefix(nn.Causes[1].Error(), refused+": ") {
				t.Fatalf("causes %q, want %s's 503 then %s's refusal", nn.Causes, down.addr, refused)
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("errors.Is(err, ECONNREFUSED) = false for %v", err)
			}
			if !slices.Equal(nn.NotTried, []string{spare.addr}) {
				t.Errorf("NotTried %q, want %s", nn.NotTried, spare.addr)
			}
			for _, want := range []string{"no snowflaked node available for ", down.addr, refused, spare.addr + ": not tried"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// A refusal is a *RejectedError that is ErrRejected, with the node's status
// and code, or the code a node would answer when the client refuses the
// call itself; never retried on another node.
func TestRejectedError(t *testing.T) {
	refuse := func(status int, body string) func(http.ResponseWriter, *http.Request, int) bool {
		return func(w http.ResponseWriter, _ *http.Request, _ int) bool { writeBody(w, status, body); return true }
	}
	tests := []struct {
		name     string
		behave   func(http.ResponseWriter, *http.Request, int) bool // nil: a good node
		call     func(ctx context.Context, c *Client) error
		byNode   bool // the node refused (else the client)
		status   int
		code     string
		contains string
	}{
		{"400 invalid_count", refuse(400, `{"error":{"code":"invalid_count","message":"count 5 is above --max-batch 4"}}`),
			func(ctx context.Context, c *Client) error { _, err := c.NextN(ctx, 5); return err }, true, 400, "invalid_count", "above --max-batch 4"},
		{"404 unknown_tag", refuse(404, `{"error":{"code":"unknown_tag","message":"no tag orders"}}`),
			func(ctx context.Context, c *Client) error { _, err := c.NextSegment(ctx, "orders"); return err }, true, 404, "unknown_tag", "no tag orders"},
		{"400 gene_off", geneAnswer(true),
			func(ctx context.Context, c *Client) error { _, err := c.NextGene(ctx, 7); return err }, true, 400, "gene_off", "no gene bits"},
		{"400 without a JSON body", refuse(400, "bad request"),
			func(ctx context.Context, c *Client) error { _, err := c.NextUUID(ctx); return err }, true, 400, "", `"bad request"`},
		{"NextN(0)", nil, func(ctx context.Context, c *Client) error { _, err := c.NextN(ctx, 0); return err }, false, 0, "invalid_count", "want 1.."},
		{"NextSegment bad tag", nil, func(ctx context.Context, c *Client) error { _, err := c.NextSegment(ctx, "a/b"); return err }, false, 0, "invalid_tag", `tag "a/b"`},
		{"NextGene gene over 2^63-1", nil, func(ctx context.Context, c *Client) error { _, err := c.NextGene(ctx, 1<<63); return err }, false, 0, "invalid_gene", "2^63-1"},
		{"NextGeneN too many", nil, func(ctx context.Context, c *Client) error { _, err := c.NextGeneN(ctx, 1, 5000); return err }, false, 0, "invalid_count", "1..1000"},
		{"NextUUIDN(0)", nil, func(ctx context.Context, c *Client) error { _, err := c.NextUUIDN(ctx, 0); return err }, false, 0, "invalid_count", "want 1..1000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := startFake(t, 1, tc.behave)
			b := startFake(t, 2, nil)
			c := newClient(t, Config{Servers: []string{a.addr, b.addr}})
			err := tc.call(context.Background(), c)
			var re *RejectedError
			if !errors.Is(err, ErrRejected) || !errors.As(err, &re) {
				t.Fatalf("err %v (%T), want a *RejectedError", err, err)
			}
			wantNode := ""
			if tc.byNode {
				wantNode = a.addr
			}
			if re.Node != wantNode || re.Status != tc.status || re.Code != tc.code || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("%+v (%q), want node %q status %d code %q, mentioning %q", *re, err, wantNode, tc.status, tc.code, tc.contains)
			}
			if errors.Is(err, ErrNoNode) {
				t.Fatalf("%v is also ErrNoNode", err)
			}
			if b.requests.Load() != 0 {
				t.Fatalf("a rejected call was retried on another node")
			}
		})
	}
}

// A call whose context ends returns the context's error, as the context
// gives it (context.Canceled or context.DeadlineExceeded), whether it ends
// before the call, during a request to a node that hangs, during the
// failover to the next one, or while the call waits queued behind another;
// on every path. The cancellations happen when a node gets the request (or
// when the call is queued): no timing is guessed.
func TestContextErrors(t *testing.T) {
	const (
		good = iota
		refuse
		hang
		hangAndCancel // cancels the call's context when the request arrives
	)
	tests := []struct {
		name     string
		deadline bool   // the context has a 150ms deadline (else it is cancelled)
		nodes    [2]int // the two nodes' behaviours
		queued   bool   // another call holds the only slot on the first node; the call's context is cancelled once it is queued
		before   bool   // cancelled before the call
		want     error
	}{
		{"cancelled before", false, [2]int{good, good}, false, true, context.Canceled},
		{"deadline on a node that hangs", true, [2]int{hang, hang}, false, false, context.DeadlineExceeded},
		{"cancelled on a node that hangs", false, [2]int{hangAndCancel, hang}, false, false, context.Canceled},
		{"deadline during the failover", true, [2]int{refuse, hang}, false, false, context.DeadlineExceeded},
		{"cancelled during the failover", false, [2]int{refuse, hangAndCancel}, false, false, context.Canceled},
		{"deadline while queued", true, [2]int{hang, hang}, true, false, context.DeadlineExceeded},
		{"cancelled while queued", false, [2]int{hang, hang}, true, false, context.Canceled},
	}
	for _, call := range calls {
		for _, tc := range tests {
			if tc.queued && !call.batched {
				continue
			}
			t.Run(call.name+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				if tc.deadline {
					ctx, cancel = context.WithTimeout(context.Background(), 150*time.Millisecond)
				}
				defer cancel()
				release := make(chan struct{})
				t.Cleanup(func() { close(release) })
				var addrs []string
				for i, kind := range tc.nodes {
					var behave func(http.ResponseWriter, *http.Request, int) bool
					switch kind {
					case refuse:
						behave = unavailable
					case hang:
						behave = hangUntil(release)
					case hangAndCancel:
						behave = func(w http.ResponseWriter, r *http.Request, n int) bool {
							cancel()
							return hangUntil(release)(w, r, n)
						}
					}
					addrs = append(addrs, startFake(t, int64(i+1), behave).addr)
				}
				// A request ends within Timeout: after the deadline, so that
				// the deadline is what ends the call; soon after a
				// cancellation, which a call alone sees when its request
				// ends.
				timeout := 100 * time.Millisecond
				if tc.deadline {
					timeout = 5 * time.Second
				}
				c := newClient(t, Config{Servers: addrs, Timeout: timeout, MaxInFlight: 1, StallAfter: time.Hour})
				if tc.queued {
					b := c.ids
					if call.name == "NextSegment" {
						var err error
						if b, err = c.segment("orders"); err != nil {
							t.Fatal(err)
						}
					}
					go func() { _, _ = b.fetch(context.Background(), 1) }() // holds the slot
					eventually(t, "the slot is taken", func() bool {
						b.mu.Lock()
						defer b.mu.Unlock()
						return b.inFlight == 1
					})
					if !tc.deadline {
						go func() {
							for range 1000 { // bounded: 5s
								if b.waiting() > 0 {
									cancel()
									return
								}
								time.Sleep(5 * time.Millisecond)
							}
						}()
					}
				}
				if tc.before {
					cancel()
				}
				err := call.call(ctx, c)
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
			})
		}
	}
}
