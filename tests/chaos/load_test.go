package chaos

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fakeNode serves /id and /ids with IDs of one worker from a counter; with
// dupEvery > 0 every dupEvery-th request repeats the previous answer's last
// ID first (a broken generator), and with down set it answers 503.
type fakeNode struct {
	t        *testing.T
	srv      *httptest.Server
	worker   int64
	dupEvery int64
	down     atomic.Bool

	mu   sync.Mutex
	next int64 // next sequence number
	reqs int64
	last int64
}

func startFakeNode(t *testing.T, worker, dupEvery int64) *fakeNode {
	t.Helper()
	f := &fakeNode{t: t, worker: worker, dupEvery: dupEvery, next: 1}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Listener = ln
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"out_of_service","message":"x","reason":"clock_rollback","state":"out_of_service"}}`))
		return
	}
	count := 1
	if r.URL.Path == "/ids" {
		var err error
		if count, err = strconv.Atoi(r.URL.Query().Get("count")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	f.mu.Lock()
	f.reqs++
	var b strings.Builder
	for i := range count {
		id := snowflake.DefaultLayout().Compose(1000+f.next/4096, f.worker, f.next%4096)
		if i == 0 && f.dupEvery > 0 && f.reqs%f.dupEvery == 0 && f.last != 0 {
			id = f.last
		} else {
			f.next++
		}
		f.last = id
		b.WriteString(strconv.FormatInt(id, 10) + "\n")
	}
	f.mu.Unlock()
	_, _ = w.Write([]byte(b.String()))
}

type fakeTarget struct {
	name string
	f    *fakeNode
}

func (ft fakeTarget) Name() string     { return ft.name }
func (ft fakeTarget) Addr() string     { return ft.f.srv.Listener.Addr().String() }
func (ft fakeTarget) Incarnation() int { return 0 }

// waitUntil polls cond every 5ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	pollUntil(t, timeout, 5*time.Millisecond, what, cond)
}

// pollUntil polls cond every period until it holds; it fails the test
// after timeout.
func pollUntil(t *testing.T, timeout, period time.Duration, what string, cond func() bool) {
	t.Helper()
	testsupport.Poll(t, timeout, period, what, cond)
}

func TestLoadAgainstFakeNodes(t *testing.T) {
	tests := []struct {
		name      string
		dupEvery  int64
		wantProbs bool
	}{
		{"correct nodes: no problem", 0, false},
		{"a node repeating an ID is caught", 7, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := startFakeNode(t, 1, tc.dupEvery), startFakeNode(t, 2, 0)
			c := NewChecker(snowflake.DefaultLayout())
			load := StartLoad(c, []Target{fakeTarget{"a", a}, fakeTarget{"b", b}},
				LoadConfig{ClientsPerNode: 4, Rate: 500, MaxCount: 20, Seed: 1, MaxDuration: time.Minute})
			t.Cleanup(func() { _ = load.Stop() })
			waitUntil(t, 20*time.Second, "200 answers from each node", func() bool {
				return c.Counts("a").OK >= 200 && c.Counts("b").OK >= 200
			})

			// Paused: nothing reaches a; then it answers 503s with a reason.
			if err := load.Pause("a"); err != nil {
				t.Fatal(err)
			}
			before := c.Counts("a")
			a.down.Store(true)
			waitUntil(t, 20*time.Second, "b keeps being served while a is paused", func() bool {
				return c.Counts("b").OK >= 400
			})
			if d := c.Counts("a").Sub(before); d.OK != 0 || d.Errors() != 0 {
				t.Errorf("paused node got requests: %s", d)
			}
			if err := load.Resume("a"); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 20*time.Second, "503s from a", func() bool { return c.Counts("a").Unavailable["clock_rollback"] >= 10 })
			a.down.Store(false)
			if err := load.Stop(); err != nil {
				t.Fatal(err)
			}
			if err := load.Pause("nobody"); err == nil {
				t.Error("Pause of an unknown node: no error")
			}

			r := c.Verify()
			if r.IDs < 400 {
				t.Errorf("only %d IDs checked", r.IDs)
			}
			if tc.wantProbs {
				if r.Count(ProblemDuplicate) == 0 {
					t.Fatalf("repeated IDs not caught: %s", r)
				}
				return
			}
			if !r.OK() {
				t.Fatalf("problems with correct nodes: %s", r)
			}
			if got := c.Counts("a").Other; got != 0 {
				t.Errorf("%d unexpected answers", got)
			}
		})
	}
}

func TestParseIDs(t *testing.T) {
	tests := []struct {
		body string
		want int
		err  bool
	}{
		{"1\n2\n3\n", 3, false},
		{"42", 1, false},
		{"", 0, false},
		{"1\nx\n", 0, true},
	}
	for _, tc := range tests {
		got, err := parseIDs([]byte(tc.body))
		if (err != nil) != tc.err || len(got) != tc.want {
			t.Errorf("parseIDs(%q) = %v, %v", tc.body, got, err)
		}
	}
}
