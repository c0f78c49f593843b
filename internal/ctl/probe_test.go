package ctl

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"state":"in_service"}`))
	})
	mux.HandleFunc("/out", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"state":"out_of_service","reason":"clock_rollback"}`))
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/readyz", http.StatusFound)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select { // answers only after the client gave up (bounded)
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	var asked atomic.Int32 // /later answers 503 three times (a countdown), then 200
	mux.HandleFunc("/later", func(w http.ResponseWriter, r *http.Request) {
		if n := asked.Add(1); n <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"state":"out_of_service","reason":"prev_holder_fence","detail":"%ds left"}`, 10-n)
			return
		}
		w.Write([]byte(`{"state":"in_service"}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/readyz"
	closed.Close()

	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut string
		wantErr []string
	}{
		{"ready", []string{srv.URL + "/readyz"}, 0, `200 OK: {"state":"in_service"}`, nil},
		{"ready quiet", []string{"--quiet", srv.URL + "/readyz"}, 0, "", nil},
		{"out of service", []string{srv.URL + "/out"}, 1, "", []string{"503 Service Unavailable", `"reason":"clock_rollback"`}},
		{"not found", []string{srv.URL + "/nope"}, 1, "", []string{"404 Not Found"}},
		{"redirect is not followed", []string{srv.URL + "/moved"}, 1, "", []string{"302 Found"}},
		{"timeout", []string{"--timeout", "200ms", srv.URL + "/hang"}, 1, "", []string{"Timeout"}},
		{"connection refused", []string{closedURL}, 1, "", []string{"connection refused"}},
		{"no url", nil, 2, "", []string{"want exactly one URL"}},
		{"two urls", []string{srv.URL, srv.URL}, 2, "", []string{"want exactly one URL"}},
		{"not http", []string{"ftp://x/readyz"}, 2, "", []string{"not an http(s) URL"}},
		{"no host", []string{"http:///readyz"}, 2, "", []string{"not an http(s) URL"}},
		{"bad timeout", []string{"--timeout", "0s", srv.URL}, 2, "", []string{"--timeout 0s"}},
		{"bad wait", []string{"--wait", "-1s", srv.URL}, 2, "", []string{"--wait -1s must not be negative"}},
		{"bad wait unit", []string{"--wait", "3", srv.URL}, 2, "", []string{"--wait"}},
		{"wait until ready", []string{"--wait", "5s", srv.URL + "/later"}, 0, `200 OK: {"state":"in_service"}`,
			[]string{"waiting up to 5s for a 2xx answer from " + srv.URL + "/later; now: 503 Service Unavailable",
				`"reason":"prev_holder_fence","detail":"9s left"`, "snowflakectl probe: 2xx after "}},
		{"wait runs out", []string{"--wait", "500ms", srv.URL + "/out"}, 1, "",
			[]string{"no 2xx answer within --wait 500ms; the last: 503 Service Unavailable", `"reason":"clock_rollback"`}},
		{"wait for a node not up yet", []string{"--wait", "300ms", closedURL}, 1, "", []string{"connection refused"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"probe"}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, stdout.String(), stderr.String())
			}
			if n := strings.Count(stderr.String(), "\n"); tc.name == "wait until ready" && n != 2 {
				t.Errorf("a countdown is one answer: %d lines on stderr, want 2 (waiting, done):\n%s", n, stderr.String())
			}
			if strings.TrimSpace(stdout.String()) != tc.wantOut {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.wantOut)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr %q does not contain %q", stderr.String(), s)
				}
			}
		})
	}
}

// probe --wait through a node's start: 30 answers whose countdown changes
// its numbers, units and session ID (9.5s, 900ms, 0x1f…) make one line
// when it starts waiting and one when it is done, not a line an answer; a
// changed reason is reported, at most every probeReportEvery.
func TestProbeWaitPrintsStartAndEnd(t *testing.T) {
	oldInterval, oldEvery := probeInterval, probeReportEvery
	probeInterval, probeReportEvery = 5*time.Millisecond, time.Hour
	t.Cleanup(func() { probeInterval, probeReportEvery = oldInterval, oldEvery })
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := asked.Add(1)
		if n > 30 {
			w.Write([]byte(`{"state":"in_service"}`))
			return
		}
		left := time.Duration(31-n) * 300 * time.Millisecond
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"state":"starting","reason":"starting","detail":"waiting for the lease on worker ID 3, held by session 0x%x; up to %v more"}`, 0x1f00+n*37, left)
	}))
	t.Cleanup(srv.Close)
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"probe", "--wait", "10s", srv.URL + "/readyz"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "waiting up to 10s for a 2xx answer") || !strings.Contains(lines[0], "up to 9s more") ||
		!strings.HasPrefix(lines[1], "snowflakectl probe: 2xx after ") {
		t.Errorf("stderr, want a line when waiting starts and one when done:\n%s", stderr.String())
	}
	if strings.TrimSpace(stdout.String()) != `200 OK: {"state":"in_service"}` {
		t.Errorf("stdout %q", stdout.String())
	}

	// Another reason is news: reported, at most every probeReportEvery.
	probeReportEvery = 0
	asked.Store(0)
	reasons := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := asked.Add(1)
		switch {
		case n > 20:
			w.Write([]byte(`{"state":"in_service"}`))
		case n > 10:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"state":"out_of_service","reason":"clock_behind_fence","detail":"%dms to go"}`, 100-n)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"state":"starting","reason":"starting","detail":"claim: %d"}`, n)
		}
	}))
	t.Cleanup(reasons.Close)
	stderr.Reset()
	if code := Main([]string{"probe", "--quiet", "--wait", "10s", reasons.URL}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), "\n"); n != 3 || !strings.Contains(stderr.String(), "clock_behind_fence") {
		t.Errorf("stderr, want waiting, the new reason and done (3 lines):\n%s", stderr.String())
	}
}

// A port that closes a plain-HTTP request without a word, as a node
// serving HTTPS does, gets a probe answer that names HTTPS, not a bare
// EOF.
func TestProbePlainHTTPToAClosingPortNamesHTTPS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for range 10 { // bounded: the probe makes one request
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			_, _ = c.Read(buf)
			_ = c.Close()
		}
	}()
	code, _, errOut := runCtl("probe", "--timeout", "2s", "http://"+ln.Addr().String()+"/readyz")
	if code != exitFailure || !strings.Contains(errOut, "if it serves HTTPS, --tls-cert, use https://") {
		t.Errorf("probe of a port that closes plain HTTP: exit %d, %q; want exit 1 naming HTTPS", code, errOut)
	}
}
