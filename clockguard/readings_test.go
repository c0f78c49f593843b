package clockguard

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

func TestBuildReport(t *testing.T) {
	fc := clocktest.NewFake(t0)
	g := newGuard(t)
	rb := NewRollback(g, &fakeBehinder{behind: time.Second}, time.Millisecond)
	w, err := NewWatcher(fc, WatcherConfig{OnRollback: func(d time.Duration, _ time.Time) { rb.Trip(d, "watcher") }, Log: testLogger(t)})
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	const ntpServer = "ntp.example:123"
	q := &fakeQuerier{answers: map[string]answerFunc{ntpServer: offsetAnswer(20 * time.Millisecond)}}
	n, err := NewNTP(g, fc, NTPConfig{Servers: []string{ntpServer}, Querier: q, Log: testLogger(t), MinGap: time.Nanosecond})
	if err != nil {
		t.Fatalf("NewNTP: %v", err)
	}
	tp := startTimePeer(t, fc, 40*time.Millisecond)
	p := newTestPeers(t, g, fc, &staticPeers{peers: []Peer{{WorkerID: 7, Addr: tp.addr}}}, PeersConfig{})

	ctx := context.Background()
	if _, err := n.checkNow(ctx); err != nil {
		t.Fatalf("NTP checkNow: %v", err)
	}
	if _, err := p.checkNow(ctx); err != nil {
		t.Fatalf("Peers checkNow: %v", err)
	}
	if !g.Ready() {
		t.Fatalf("not in service: %+v", g.Status())
	}
	w.Step()
	fc.Advance(20 * time.Millisecond)
	fc.StepWall(-2 * time.Second)
	w.Step()
	q.set(ntpServer, offsetAnswer(2*time.Second))
	if _, err := n.checkNow(ctx); !errors.Is(err, errNTPOffset) {
		t.Fatalf("NTP checkNow = %v, want errNTPOffset", err)
	}

	r := BuildReadings(g, w, n, p)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	t.Logf("report: %s", b)
	checkReportJSON(t, b, ntpServer)
}

// checkReportJSON checks the readings' JSON TestBuildReport built: the
// rollback state, the failing checks, the transitions and each source's
// figures.
func checkReportJSON(t *testing.T, b []byte, ntpServer string) {
	t.Helper()
	var got struct {
		State       string            `json:"state"`
		Reason      string            `json:"reason"`
		Detail      string            `json:"detail"`
		Since       time.Time         `json:"since"`
		Failing     map[string]string `json:"failing"`
		Transitions map[string]int64  `json:"transitions"`
		Watcher     map[string]any    `json:"watcher"`
		NTP         struct {
			Last map[string]any `json:"last"`
		} `json:"ntp"`
		Peers struct {
			Median int64            `json:"median_offset_ns"`
			Peers  []map[string]any `json:"peers"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if got.State != "out_of_service" || got.Reason != string(health.ReasonClockRollback) ||
		got.Detail != "watcher: clock 2s behind the last issued ID" || got.Since.IsZero() {
		t.Fatalf("state fields: %+v", got)
	}
	if len(got.Failing) != 2 || !strings.Contains(got.Failing["ntp_offset"], "offset +2s from ntp.example:123") ||
		got.Failing["clock_rollback"] == "" {
		t.Fatalf("failing = %v", got.Failing)
	}
	// NewRollback passes at once (in service), NewNTP's pending checks move
	// the guard back to starting, the first rounds put it in service again.
	wantTransitions := map[string]int64{"in_service": 2, "starting": 1, "clock_rollback": 1}
	if len(got.Transitions) != len(wantTransitions) {
		t.Fatalf("transitions = %v, want %v", got.Transitions, wantTransitions)
	}
	for k, v := range wantTransitions {
		if got.Transitions[k] != v {
			t.Fatalf("transitions = %v, want %v", got.Transitions, wantTransitions)
		}
	}
	if got.Watcher["backward_steps"] != 1.0 || got.Watcher["largest_backward_step_ns"] != float64(2*time.Second) {
		t.Fatalf("watcher = %v", got.Watcher)
	}
	if got.NTP.Last["offset_ns"] != float64(2*time.Second) || got.NTP.Last["server"] != ntpServer {
		t.Fatalf("ntp last = %v", got.NTP.Last)
	}
	if got.Peers.Median != int64(20*time.Millisecond) || len(got.Peers.Peers) != 1 || got.Peers.Peers[0]["worker_id"] != 7.0 {
		t.Fatalf("peers = %+v", got.Peers)
	}
}

func TestBuildReportGuardOnly(t *testing.T) {
	g := newGuard(t)
	g.Check(health.ReasonLeaseLost).Pass()
	b, err := json.Marshal(BuildReadings(g, nil, nil, nil))
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	for _, want := range []string{`"state":"in_service"`, `"reason":""`, `"failing":{}`, `"transitions":{"in_service":1}`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("report %s lacks %s", b, want)
		}
	}
	for _, absent := range []string{`"watcher"`, `"ntp"`, `"peers"`} {
		if strings.Contains(string(b), absent) {
			t.Fatalf("report %s has %s though it was not wired", b, absent)
		}
	}
}
