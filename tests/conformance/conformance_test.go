package conformance

import (
	"fmt"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// deadlineSlack is how far past a caller's deadline its answer may come
// back through the driver (a busy machine, a race build); the hung nodes'
// own request timeout is beyond deadline plus slack, so a client that
// ignores the caller's deadline fails.
const deadlineSlack = 2 * time.Second

// loadThreads is how many callers fetch at once while a node is killed.
const loadThreads = 16

// callsPerThread is each caller's calls in the kill -9 case:
// CONFORMANCE_CALLS, else 300 (100,000 IDs in all is
// CONFORMANCE_CALLS=6250).
func callsPerThread(t *testing.T) int {
	t.Helper()
	v := os.Getenv("CONFORMANCE_CALLS")
	if v == "" {
		return 300
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 || n > 1_000_000 {
		t.Fatalf("CONFORMANCE_CALLS=%q: want a whole number from 10 to 1000000", v)
	}
	return n
}

// Every client, run through the same cases against the same real nodes.
func TestConformance(t *testing.T) {
	clients := selectedClients(t)
	doc := loadSpec(t)
	w := startWorld(t)
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			d := c.start(t)
			desc := d.ok(map[string]any{"op": "describe"})
			if desc.Client != c.name {
				t.Fatalf("driver describes client %q, want %q", desc.Client, c.name)
			}
			t.Run("follows openapi.yaml", func(t *testing.T) { checkDescribed(t, doc, desc.Routes, desc.Codes) })
			w.recordedAll() // forget what an earlier client made
			t.Run("unique and increasing", func(t *testing.T) { caseUnique(t, w, d) })
			t.Run("decode", func(t *testing.T) { caseDecode(t, w, d) })
			t.Run("count above max-batch clamped", func(t *testing.T) { caseClamp(t, w, d) })
			t.Run("gene", func(t *testing.T) { caseGene(t, w, d) })
			t.Run("uuid", func(t *testing.T) { caseUUID(t, w, d) })
			t.Run("segment", func(t *testing.T) { caseSegment(t, w, d) })
			t.Run("tag token", func(t *testing.T) { caseTagToken(t, w, d) })
			t.Run("string IDs", func(t *testing.T) { caseStringIDs(t, w, d) })
			t.Run("bounds", func(t *testing.T) { caseBounds(t, w, d) })
			t.Run("segment text", func(t *testing.T) { caseSegmentText(t, w, d) })
			t.Run("reset tag", func(t *testing.T) { caseResetTag(t, w, d) })
			t.Run("requests follow openapi.yaml", func(t *testing.T) { checkRecorded(t, doc, desc.Routes, w.recordedAll()) })
			t.Run("tls", func(t *testing.T) { caseTLS(t, w, d) })
			t.Run("all nodes down", func(t *testing.T) { caseAllDown(t, d) })
			t.Run("kill -9 under load", func(t *testing.T) { caseKill(t, w, d) })
			t.Run("bootstrap drops a node that leaves", func(t *testing.T) { caseBootstrap(t, w, d) })
			d.ok(map[string]any{"op": "close"})
		})
	}
}

// checker checks a client's IDs: positive, never seen before, and within
// one worker increasing along one caller's calls.
type checker struct {
	t      reporter
	layout client.Layout
	seen   map[int64]bool
}

func newChecker(t reporter, w *world) *checker {
	return &checker{t: t, layout: w.layout, seen: map[int64]bool{}}
}

// reporter is what the checks report to: a *testing.T, or in the suite's
// own tests a recorder that shows each check can fail.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// caller checks one caller's IDs, in the order its calls returned them.
func (c *checker) caller(ids []int64) {
	c.t.Helper()
	last := map[int64]int64{} // worker → last ID
	dups := 0
	for _, id := range ids {
		if c.seen[id] {
			if dups++; dups <= 5 {
				c.t.Errorf("ID %d handed out twice", id)
			}
		}
		c.seen[id] = true
		p, err := c.layout.Decode(id)
		if err != nil {
			c.t.Fatalf("ID %d: %v", id, err)
		}
		if prev, ok := last[p.WorkerID]; ok && id <= prev {
			c.t.Errorf("worker %d: ID %d after %d in one caller's calls: not increasing", p.WorkerID, id, prev)
		}
		last[p.WorkerID] = id
	}
	if dups > 0 {
		c.t.Errorf("%d duplicates", dups)
	}
}

// increasing fails unless ids strictly increase.
func increasing(t reporter, what string, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("%s: ID %d at %d after %d: not increasing", what, ids[i], i, ids[i-1])
		}
	}
}

func caseUnique(t *testing.T, w *world, d *driver) {
	d.open(map[string]any{"nodes": w.proxied()})
	ck := newChecker(t, w)
	var one []int64
	for range 30 {
		a := d.ok(map[string]any{"op": "next_id"})
		if len(a.IDs) != 1 {
			t.Fatalf("next_id gave %d IDs", len(a.IDs))
		}
		one = append(one, parseIDs(t, a.IDs)...)
	}
	ck.caller(one)
	for _, n := range []int{1, 7, 50} {
		a := d.ok(map[string]any{"op": "next_ids", "n": n})
		ids := parseIDs(t, a.IDs)
		if len(ids) != n {
			t.Fatalf("next_ids(%d) gave %d IDs", n, len(ids))
		}
		increasing(t, fmt.Sprintf("next_ids(%d)", n), ids)
		ck.caller(ids)
	}
	a := d.do(map[string]any{"op": "next_ids", "n": 0}, nil)
	if a.Error == nil || a.Error.Type != "rejected" {
		t.Errorf("next_ids(0): %v, want the client's typed refusal (rejected)", a.Error)
	}
}

func caseDecode(t *testing.T, w *world, d *driver) {
	a := d.ok(map[string]any{"op": "next_ids", "n": 5})
	ids := append(a.IDs, "1", strconv.FormatInt(1<<62, 10))
	for _, id := range ids {
		code, body := get(plainHTTP, "http://"+w.nodes[0].addr+"/decode/"+id, "")
		if code != http.StatusOK {
			t.Fatalf("GET /decode/%s: %d %s", id, code, body)
		}
		dec := d.ok(map[string]any{"op": "decode", "id": id, "layout": w.layoutJSON()}).Decoded
		for _, f := range []string{"timestamp_ms", "worker_id", "sequence", "gene"} {
			want := jsonField(t, body, f)
			if got := dec[f]; got == nil || *got != want {
				t.Errorf("decode %s: %s %v, the node's /decode says %d (%s)", id, f, deref(got), want, body)
			}
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return "absent"
	}
	return *p
}

// jsonField reads an integer field of a flat JSON object.
func jsonField(t *testing.T, body, field string) int64 {
	t.Helper()
	i := strings.Index(body, `"`+field+`":`)
	if i < 0 {
		t.Fatalf("%s has no %q", body, field)
	}
	rest := body[i+len(field)+3:]
	end := strings.IndexAny(rest, ",}")
	v, err := strconv.ParseInt(strings.TrimSpace(rest[:end]), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", body, field, err)
	}
	return v
}

func caseClamp(t *testing.T, w *world, d *driver) {
	d.open(map[string]any{"nodes": w.proxied()})
	w.recordedNew()
	ck := newChecker(t, w)
	for range 3 {
		a := d.ok(map[string]any{"op": "next_ids", "n": 250})
		ids := parseIDs(t, a.IDs)
		if len(ids) != 250 {
			t.Fatalf("next_ids(250) gave %d IDs from nodes of --max-batch %d", len(ids), nodeMax)
		}
		slices.Sort(ids)
		ck.caller(ids)
	}
	above := 0
	for _, r := range w.recordedNew() {
		q, _ := urlQuery(r.rawQuery)
		if n, _ := strconv.Atoi(q["count"]); n > nodeMax {
			above++
		}
	}
	// Each node may refuse once before the client learns its limit.
	if above > len(w.nodes) {
		t.Errorf("%d requests asked for more than %d IDs after a node named its max: the client did not keep the limit", above, nodeMax)
	}
}

// urlQuery reads a raw query of unique keys.
func urlQuery(raw string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out, nil
}

func caseGene(t *testing.T, w *world, d *driver) {
	d.open(map[string]any{"nodes": w.proxied()})
	mod := new(big.Int).Lsh(big.NewInt(1), geneBits)
	for _, key := range []string{"0", "7", "9223372036854775807", "4611686018427387906"} {
		a := d.ok(map[string]any{"op": "next_gene", "key": key})
		ids := parseIDs(t, a.IDs)
		k, _ := new(big.Int).SetString(key, 10)
		if len(ids) != 1 || ids[0]%(1<<geneBits) != new(big.Int).Mod(k, mod).Int64() {
			t.Errorf("next_gene(%s) = %v: want one ID ending in the key's low %d bits", key, ids, geneBits)
		}
	}
}

func caseUUID(t *testing.T, w *world, d *driver) {
	d.open(map[string]any{"nodes": w.proxied()})
	seen := map[string]bool{}
	for range 10 {
		u := d.ok(map[string]any{"op": "next_uuid"}).UUID
		p, err := client.Parse(u)
		if err != nil || u != strings.ToLower(u) || p[6]>>4 != 7 || p[8]>>6 != 2 {
			t.Fatalf("next_uuid = %q: want a canonical version 7 UUID with the RFC variant (%v)", u, err)
		}
		if seen[u] {
			t.Fatalf("UUID %s handed out twice", u)
		}
		seen[u] = true
	}
}

func caseSegment(t *testing.T, w *world, d *driver) {
	d.open(map[string]any{"nodes": w.proxied()})
	var all []int64
	for range 5 {
		all = append(all, parseIDs(t, d.ok(map[string]any{"op": "next_segment", "tag": "plain"}).IDs)...)
	}
	batch := parseIDs(t, d.ok(map[string]any{"op": "next_segment", "tag": "plain", "n": 20}).IDs)
	if len(batch) != 20 {
		t.Fatalf("next_segment(plain, 20) gave %d IDs", len(batch))
	}
	increasing(t, "next_segment(plain, 20)", batch)
	all = append(all, batch...)
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(all) {
		t.Errorf("dense IDs repeat: %v", all)
	}
	a := d.do(map[string]any{"op": "next_segment", "tag": "nosuchtag"}, nil)
	if a.Error == nil || a.Error.Type != "rejected" || a.Error.Status != http.StatusNotFound || a.Error.Code != "unknown_tag" {
		t.Errorf("next_segment(nosuchtag): %v, want rejected 404 unknown_tag", a.Error)
	}
}

func caseTagToken(t *testing.T, w *world, d *driver) {
	for _, tc := range []struct {
		name   string
		tokens map[string]any
		status int
		code   string
	}{
		{"no token", nil, http.StatusUnauthorized, "token_required"},
		{"wrong token", map[string]any{"secret": "not-the-token-0123456789abcdefghijklmnopq"}, http.StatusForbidden, "token_invalid"},
		{"the token", map[string]any{"secret": w.secretToken}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := map[string]any{"nodes": w.proxied()}
			if tc.tokens != nil {
				cfg["tag_tokens"] = tc.tokens
			}
			d.open(cfg)
			a := d.do(map[string]any{"op": "next_segment", "tag": "secret", "n": 3, "deadline_ms": 5000}, nil)
			if tc.status == 0 {
				if a.Error != nil || len(a.IDs) != 3 {
					t.Fatalf("next_segment(secret, 3) with its token: %v %v", a.IDs, a.Error)
				}
				return
			}
			if a.Error == nil || a.Error.Type != "rejected" || a.Error.Status != tc.status || a.Error.Code != tc.code {
				t.Fatalf("next_segment(secret): %v, want rejected %d %s", a.Error, tc.status, tc.code)
			}
			// The plain tag takes no token, whatever the client holds.
			if a := d.do(map[string]any{"op": "next_segment", "tag": "plain"}, nil); a.Error != nil {
				t.Errorf("next_segment(plain): %v", a.Error)
			}
		})
	}
}

func caseTLS(t *testing.T, w *world, d *driver) {
	full := map[string]any{"ca": w.pki.CA, "cert": w.pki.ClientCert, "key": w.pki.ClientKey}
	for _, tc := range []struct {
		name     string
		tls      map[string]any
		token    string
		wantType string
		status   int
		code     string
	}{
		{"client certificate and token", full, w.apiToken, "", 0, ""},
		{"client certificate, no token", full, "", "rejected", http.StatusUnauthorized, "token_required"},
		{"client certificate, wrong token", full, "wrong-token-0123456789abcdefghijklmnopqrstu", "rejected", http.StatusForbidden, "token_invalid"},
		{"no client certificate", map[string]any{"ca": w.pki.CA}, w.apiToken, "no_node", 0, ""},
		{"a CA that signed nothing of the node's", map[string]any{"ca": w.pki.OtherCA, "cert": w.pki.ClientCert, "key": w.pki.ClientKey}, w.apiToken, "no_node", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := map[string]any{"nodes": []string{w.tlsNode.addr}, "tls": tc.tls}
			if tc.token != "" {
				cfg["api_token"] = tc.token
			}
			d.open(cfg)
			a := d.do(map[string]any{"op": "next_ids", "n": 10, "deadline_ms": 5000}, nil)
			if tc.wantType == "" {
				if a.Error != nil || len(a.IDs) != 10 {
					t.Fatalf("next_ids(10) over mutual TLS: %v %v", a.IDs, a.Error)
				}
				increasing(t, "next_ids(10) over TLS", parseIDs(t, a.IDs))
				return
			}
			if a.Error == nil || a.Error.Type != tc.wantType || a.Error.Status != tc.status || a.Error.Code != tc.code {
				t.Fatalf("next_ids(10): %v, want %s %d %q", a.Error, tc.wantType, tc.status, tc.code)
			}
		})
	}
}

func caseAllDown(t *testing.T, d *driver) {
	t.Run("refused", func(t *testing.T) {
		nodes := []string{testsupport.ClosedAddr(t), testsupport.ClosedAddr(t), testsupport.ClosedAddr(t)}
		d.open(map[string]any{"nodes": nodes})
		for _, op := range []string{"next_id", "next_ids"} {
			start := time.Now()
			a := d.do(map[string]any{"op": op, "n": 5, "deadline_ms": 1500}, nil)
			took := time.Since(start)
			if a.Error == nil || a.Error.Type != "no_node" {
				t.Errorf("%s with every node refusing: %v, want no_node", op, a.Error)
			}
			if took > 1500*time.Millisecond+deadlineSlack {
				t.Errorf("%s with every node refusing answered after %s, past its 1.5s deadline", op, took)
			}
		}
	})
	t.Run("hung", func(t *testing.T) {
		nodes := []string{hungListener(t), hungListener(t), hungListener(t)}
		d.open(map[string]any{"nodes": nodes, "timeout_ms": 5000})
		start := time.Now()
		a := d.do(map[string]any{"op": "next_id", "deadline_ms": 700}, nil)
		took := time.Since(start)
		if a.Error == nil || (a.Error.Type != "deadline" && a.Error.Type != "no_node") {
			t.Errorf("next_id with every node hung: %v, want the typed deadline (or no_node) error", a.Error)
		}
		if took > 700*time.Millisecond+deadlineSlack {
			t.Errorf("next_id with every node hung answered after %s, past its 0.7s deadline", took)
		}
	})
}

func caseKill(t *testing.T, w *world, d *driver) {
	victim := w.startClusterNode(t, "victim-"+d.name)
	_, clock := get(plainHTTP, "http://"+victim.addr+"/clock", "")
	victimWorker := jsonField(t, clock, "worker_id")
	d.open(map[string]any{"nodes": []string{w.nodes[0].addr, w.nodes[1].addr, victim.addr}})
	calls := callsPerThread(t)
	killed := false
	a := d.do(map[string]any{"op": "load", "threads": loadThreads, "calls": calls, "call": "next_id",
		"deadline_ms": 10000, "mark": loadThreads * calls / 3}, func(ev string) {
		if ev == "mark" && !killed {
			killed = true
			if err := victim.p.Signal(syscall.SIGKILL); err != nil {
				t.Errorf("kill -9 %s: %v", victim.addr, err)
			}
		}
	})
	if a.Error != nil {
		t.Fatalf("load: %v", a.Error)
	}
	if !killed {
		t.Fatal("the driver never reported the mark: nothing was killed")
	}
	if len(a.Failures) > 0 {
		t.Errorf("%d of %d calls failed while one node of three was killed; first: %s", len(a.Failures), a.Calls, &a.Failures[0])
	}
	if a.Calls != int64(loadThreads*calls) || len(a.Threads) != loadThreads {
		t.Fatalf("load made %d calls in %d threads, want %d in %d", a.Calls, len(a.Threads), loadThreads*calls, loadThreads)
	}
	ck := newChecker(t, w)
	total, fromVictim := 0, 0
	for _, th := range a.Threads {
		ids := parseIDs(t, th)
		ck.caller(ids)
		total += len(th)
		for _, id := range ids {
			if p, _ := w.layout.Decode(id); p.WorkerID == victimWorker {
				fromVictim++
			}
		}
	}
	// The node killed must have served some of the calls, or nothing was
	// proven about a node dying under the client.
	if fromVictim == 0 {
		t.Errorf("none of the %d IDs came from the node killed (worker %d): the client never used it", total, victimWorker)
	}
	if total != loadThreads*calls-len(a.Failures) {
		t.Errorf("%d IDs from %d calls of one ID", total, loadThreads*calls)
	}
	t.Logf("%s: %d callers, %d IDs (%d from the node killed), %d failed calls, node %s killed after a third of the calls",
		d.name, loadThreads, total, fromVictim, len(a.Failures), victim.addr)
}

func caseBootstrap(t *testing.T, w *world, d *driver) {
	leaver := w.startClusterNode(t, "leaver-"+d.name)
	d.open(map[string]any{"bootstrap": []string{w.nodes[0].addr}, "bootstrap_interval_ms": 300})
	holds := func(addr string) bool {
		return slices.Contains(d.ok(map[string]any{"op": "nodes"}).Nodes, addr)
	}
	testsupport.Poll(t, 30*time.Second, 100*time.Millisecond, "the bootstrap list to hold the new node", func() bool { return holds(leaver.addr) })
	if ids := d.ok(map[string]any{"op": "next_ids", "n": 10}).IDs; len(ids) != 10 {
		t.Fatalf("next_ids(10) through bootstrap gave %d", len(ids))
	}
	if err := leaver.p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := leaver.p.Wait(30 * time.Second); err != nil {
		t.Fatalf("the leaving node did not stop: %v", err)
	}
	testsupport.Poll(t, 30*time.Second, 100*time.Millisecond, "the bootstrap list to drop the node that left", func() bool { return !holds(leaver.addr) })
	for range 5 {
		if a := d.do(map[string]any{"op": "next_ids", "n": 10, "deadline_ms": 5000}, nil); a.Error != nil {
			t.Fatalf("next_ids after a node left: %v", a.Error)
		}
	}
}
