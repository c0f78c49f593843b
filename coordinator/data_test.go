package coordinator

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestDecodeForever(t *testing.T) {
	const maxID = 3
	for _, tc := range []struct {
		name    string
		data    string
		key     string
		seq     int64
		wantID  int64
		wantErr string
	}{
		{"explicit id", `{"worker_id":2,"node_key":"k","addr":"h:1","last_ts":5,"fence":9,"updated":5}`, "k", 7, 2, ""},
		{"null id, seq fits", `{"worker_id":null,"node_key":"k","last_ts":5}`, "k", 3, 3, ""},
		{"absent id, seq fits", `{"node_key":"k"}`, "k", 0, 0, ""},
		{"null id, seq too big", `{"worker_id":null,"node_key":"k"}`, "k", 4, noWorker, ""},
		{"evicted", `{"worker_id":-1,"node_key":"k","prev_worker_id":1}`, "k", 1, noWorker, ""},
		{"unknown fields ignored", `{"worker_id":1,"node_key":"k","future":{"x":1}}`, "k", 9, 1, ""},
		{"version", `{"worker_id":1,"node_key":"k","version":"v1.2.3"}`, "k", 9, 1, ""},
		{"id out of range", `{"worker_id":4,"node_key":"k"}`, "k", 1, noWorker, "outside the cluster's worker IDs 0-3"},
		{"id very negative", `{"worker_id":-2,"node_key":"k"}`, "k", 1, noWorker, "outside"},
		{"key mismatch", `{"worker_id":1,"node_key":"other"}`, "k", 1, noWorker, "node key"},
		{"negative fence", `{"worker_id":1,"node_key":"k","fence":-5}`, "k", 1, noWorker, "negative"},
		{"garbage", `garbage`, "k", 1, noWorker, "not forever-node JSON"},
		{"empty", ``, "k", 1, noWorker, "no data"},
		{"wrong type", `{"worker_id":"1","node_key":"k"}`, "k", 1, noWorker, "not forever-node JSON"},
		{"float id", `{"worker_id":1.5,"node_key":"k"}`, "k", 1, noWorker, "not forever-node JSON"},
		{"array", `[1,2]`, "k", 1, noWorker, "not forever-node JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, id, err := decodeForever([]byte(tc.data), tc.key, tc.seq, WorkerRange{0, maxID})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
			}
			if id != tc.wantID {
				t.Fatalf("worker ID = %d, want %d", id, tc.wantID)
			}
		})
	}
}

func TestDecodeLeaseAndHolder(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		ok         bool
		holder     string
	}{
		{"good", `{"node_key":"k1","addr":"h:1","session_id":"0x1"}`, true, `node key "k1" at h:1 (session 0x2a)`},
		{"no key", `{"addr":"h:1"}`, false, "unknown holder"},
		{"garbage", `\x00\x01`, false, "unknown holder"},
		{"empty", ``, false, "unknown holder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeLease([]byte(tc.data))
			if (err == nil) != tc.ok {
				t.Fatalf("decodeLease err = %v, want ok=%v", err, tc.ok)
			}
			if h := describeHolder([]byte(tc.data), &zk.Stat{EphemeralOwner: 42}); !strings.Contains(h, tc.holder) {
				t.Fatalf("holder %q, want it to contain %q", h, tc.holder)
			}
		})
	}
}

func TestDecodeAlive(t *testing.T) {
	for _, tc := range []struct {
		data string
		ok   bool
	}{
		{"127.0.0.1:8080", true},
		{"node-1.example:80", true},
		{"[::1]:80", true},
		{"", false},
		{"nohost", false},
		{"h:notaport", false},
		{"h:1 extra", false},
		{strings.Repeat("a", 400) + ":1", false},
	} {
		t.Run(tc.data, func(t *testing.T) {
			if _, err := decodeAlive([]byte(tc.data)); (err == nil) != tc.ok {
				t.Fatalf("decodeAlive(%q) err = %v, want ok=%v", tc.data, err, tc.ok)
			}
		})
	}
}

func TestScanFree(t *testing.T) {
	const maxID, now = 3, snowflake.UnixMilli(1_000_000_000)
	node := func(id int64, lastTS snowflake.UnixMilli) *foreverNode {
		return &foreverNode{workerID: id, data: foreverData{LastTS: lastTS, Updated: lastTS}}
	}
	s := &scan{
		leased: map[int64]bool{0: true},
		claimers: map[int64][]*foreverNode{
			0: {node(0, now-5_000_000)},                   // leased: not free
			1: {node(1, now-10)},                          // fresh: not free
			2: {node(2, now-5_000_000)},                   // stale: free
			3: {node(3, now-5_000_000), node(3, now-100)}, // one claimer fresh: not free
		},
	}
	ids, _ := s.free(WorkerRange{0, maxID}, now, 3600e9)
	if len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("free = %v, want [2]", ids)
	}
	s.claimers[2][0].data.LastTS = now
	ids, summary := s.free(WorkerRange{0, maxID}, now, 3600e9)
	if len(ids) != 0 {
		t.Fatalf("free = %v, want none", ids)
	}
	if !strings.Contains(summary, "all 4 worker IDs of the cluster's range 0-3 are taken: 1 hold a lease, 3 more reported") {
		t.Fatalf("summary %q", summary)
	}
	delete(s.claimers, 3) // unclaimed and unleased: free
	if ids, _ = s.free(WorkerRange{0, maxID}, now, 3600e9); len(ids) != 1 || ids[0] != 3 {
		t.Fatalf("free = %v, want [3]", ids)
	}
}

// A range maps sequence numbers from its low end and keeps explicit and
// recycled worker IDs inside it.
func TestWorkerRange(t *testing.T) {
	r := WorkerRange{512, 515}
	for _, tc := range []struct {
		data    string
		seq     int64
		wantID  int64
		wantErr string
	}{
		{`{"node_key":"k"}`, 0, 512, ""},
		{`{"node_key":"k"}`, 3, 515, ""},
		{`{"node_key":"k"}`, 4, noWorker, ""}, // past the range: it recycles one
		{`{"worker_id":514,"node_key":"k"}`, 9, 514, ""},
		{`{"worker_id":3,"node_key":"k"}`, 3, noWorker, "outside the cluster's worker IDs 512-515"},
	} {
		if _, id, err := decodeForever([]byte(tc.data), "k", tc.seq, r); id != tc.wantID || (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s seq %d: id %d, err %v; want %d, %q", tc.data, tc.seq, id, err, tc.wantID, tc.wantErr)
		}
	}
	s := &scan{leased: map[int64]bool{512: true}, claimers: map[int64][]*foreverNode{}}
	if ids, _ := s.free(r, 1_000_000, 1); !slices.Equal(ids, []int64{513, 514, 515}) {
		t.Errorf("free in %s: %v", r, ids)
	}
	for _, tc := range []struct {
		in   string
		want WorkerRange
		err  bool
	}{
		{"", WorkerRange{}, false}, {"0-511", WorkerRange{0, 511}, false}, {" 512-1023 ", WorkerRange{512, 1023}, false},
		{"5-4", WorkerRange{}, true}, {"-1-4", WorkerRange{}, true}, {"4", WorkerRange{}, true}, {"a-b", WorkerRange{}, true},
	} {
		got, err := ParseWorkerRange(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("ParseWorkerRange(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestForeverDataBytes: a forever znode's body decodes into foreverData and
// encodes back byte for byte, its times as plain integers (milliseconds
// since the Unix epoch), so typed times change nothing on the wire.
func TestForeverDataBytes(t *testing.T) {
	body := `{"worker_id":3,"node_key":"pod-0","addr":"10.0.0.1:8080","last_ts":1700000000000,"fence":1700000030000,` +
		`"updated":1700000000001,"version":"v1.2.3","token":"9c1d","prev_token":"8b0c","prev_fence":1699999999999,` +
		`"recycled_from":"/a","recycled_to":"/b","prev_worker_id":2,"stopped":true,"retired":1700000000002,"reason":"ntp_offset"}`
	var d foreverData
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	if d.Fence != 1_700_000_030_000 || d.PrevFence != 1_699_999_999_999 || d.Retired != 1_700_000_000_002 || d.LastTS != 1_700_000_000_000 {
		t.Fatalf("decoded %+v: times differ from the body's", d)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != body {
		t.Fatalf("re-encoded body differs:\n got %s\nwant %s", b, body)
	}
}
