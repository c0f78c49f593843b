package client

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// boundsAnswer answers /bounds like a node of the default layout, checking
// that from and to came as Unix milliseconds.
func boundsAnswer(t *testing.T) func(w http.ResponseWriter, r *http.Request, _ int) bool {
	return func(w http.ResponseWriter, r *http.Request, _ int) bool {
		if r.URL.Path != "/bounds" {
			return false // IDs as any fake node
		}
		q := r.URL.Query()
		from, err1 := strconv.ParseInt(q.Get("from"), 10, 64)
		to, err2 := strconv.ParseInt(q.Get("to"), 10, 64)
		if err1 != nil || err2 != nil || len(q) != 2 {
			t.Errorf("/bounds query %q", r.URL.RawQuery)
		}
		if from >= to {
			writeBody(w, 400, `{"error":{"code":"invalid_range","message":"the range is reversed"}}`)
			return true
		}
		const epoch = 1704067200000
		f := time.UnixMilli(from).UTC().Format("2006-01-02T15:04:05.000Z")
		tt := time.UnixMilli(to).UTC().Format("2006-01-02T15:04:05.000Z")
		writeBody(w, 200, `{"from":"`+f+`","to":"`+tt+`","from_ms":`+strconv.FormatInt(from, 10)+`,"to_ms":`+strconv.FormatInt(to, 10)+
			`,"min_id":"`+strconv.FormatInt((from-epoch)<<22, 10)+`","max_id":"`+strconv.FormatInt((to-epoch)<<22-1, 10)+
			`","min_uuid":"019b76da-a800-7000-8000-000000000000","max_uuid":"019b76da-abe7-7fff-bfff-ffffffffffff"}`)
		return true
	}
}

// Bounds asks a node with failover and returns its answer; a refused range
// is ErrRejected invalid_range; a node answering garbage is failed over.
func TestBounds(t *testing.T) {
	down := startFake(t, 1, unavailable)
	garbage := startFake(t, 2, func(w http.ResponseWriter, r *http.Request, _ int) bool {
		if r.URL.Path != "/bounds" {
			return false
		}
		writeBody(w, 200, `{"from":"x","min_id":"5","max_id":"3"}`)
		return true
	})
	good := startFake(t, 3, boundsAnswer(t))
	c := newClient(t, Config{Servers: []string{down.addr, garbage.addr, good.addr}, Subset: 3, Attempts: 3})
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(time.Second)
	for range 3 {
		b, err := c.Bounds(context.Background(), from, to)
		if err != nil {
			t.Fatalf("Bounds: %v", err)
		}
		want := Bounds{From: from, To: to, MinID: (1767225600000 - 1704067200000) << 22, MaxID: (1767225601000-1704067200000)<<22 - 1,
			MinUUID: "019b76da-a800-7000-8000-000000000000", MaxUUID: "019b76da-abe7-7fff-bfff-ffffffffffff"}
		if b != want {
			t.Fatalf("Bounds = %+v, want %+v", b, want)
		}
	}
	// The IDs of a node of the default layout fall in them.
	id := DefaultLayout()
	p, err := id.Decode((1767225600500 - 1704067200000) << 22)
	if err != nil || p.Time().Before(from) || !p.Time().Before(to) {
		t.Fatalf("decode: %+v, %v", p, err)
	}
	var rej *RejectedError
	if _, err := c.Bounds(context.Background(), to, from); !errors.As(err, &rej) || rej.Code != "invalid_range" {
		t.Errorf("a reversed range: %v, want ErrRejected invalid_range", err)
	}
	// A node that fails Bounds is not taken out for IDs.
	only := newClient(t, Config{Servers: []string{garbage.addr}})
	if _, err := only.Bounds(context.Background(), from, to); !errors.Is(err, ErrNoNode) {
		t.Errorf("Bounds from a node answering garbage: %v, want ErrNoNode", err)
	}
	if _, err := only.NextN(context.Background(), 3); err != nil {
		t.Errorf("NextN from the node that failed Bounds: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Bounds(ctx, from, to); !errors.Is(err, context.Canceled) {
		t.Errorf("Bounds with a cancelled context: %v", err)
	}
}

func TestParseBounds(t *testing.T) {
	ok := `{"from":"2026-01-01T00:00:00.000Z","to":"2026-01-01T00:00:01.000Z","from_ms":1767225600000,"to_ms":1767225601000,"min_id":"1","max_id":"2"}`
	b, err := parseBounds([]byte(ok))
	if err != nil || b.MinUUID != "" || b.MinID != 1 || b.MaxID != 2 || b.From.UnixMilli() != 1767225600000 {
		t.Fatalf("parseBounds(no uuids) = %+v, %v", b, err)
	}
	for _, bad := range []string{
		`{`,
		`{"from_ms":1,"to_ms":2,"min_id":"x","max_id":"2"}`,
		`{"from_ms":1,"to_ms":2,"min_id":"3","max_id":"2"}`,
		`{"from_ms":2,"to_ms":2,"min_id":"1","max_id":"2"}`,
		`{"from_ms":1,"to_ms":2,"min_id":"1","max_id":"2","min_uuid":"019b76da-a800-7000-8000-000000000000"}`,
		`{"from_ms":1,"to_ms":2,"min_id":"1","max_id":"2","min_uuid":"nope","max_uuid":"nope"}`,
	} {
		if _, err := parseBounds([]byte(bad)); err == nil {
			t.Errorf("parseBounds(%s): no error", bad)
		}
	}
}
