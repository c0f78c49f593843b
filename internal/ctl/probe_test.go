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
			[]string{"after 0.0s: 503 Service Unavailable", `"reason":"prev_holder_fence","detail":"9s left"`}},
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
			if n := strings.Count(stderr.String(), "\n"); tc.name == "wait until ready" && n != 1 {
				t.Errorf("a countdown is one answer: %d lines on stderr, want 1:\n%s", n, stderr.String())
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
