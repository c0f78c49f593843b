package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// borrowClock is the rollback section of GET /clock.
type borrowClock struct {
	State        string `json:"state"`
	Reason       string `json:"reason"`
	LastIssuedMs int64  `json:"last_issued_ms"`
	FenceMs      int64  `json:"fence_ms"`
	Rollback     struct {
		Policy          string  `json:"policy"`
		IDsAheadMs      float64 `json:"ids_ahead_ms"`
		HeadroomMs      int64   `json:"headroom_ms"`
		Borrowed        int64   `json:"borrowed_ids"`
		BorrowExhausted int64   `json:"borrow_exhausted_refusals"`
	} `json:"rollback"`
}

// checkAhead fails the test unless /clock's lead of the IDs over the clock
// fits a step back of step taken just after an ID was issued at mark: the
// lead is at least step less the time since mark, and at most step (the
// IDs rise no faster than the clock when borrowing). The time since mark
// is measured, not assumed, so a slow machine moves the bound, not the
// verdict: a test held up past the step's end rightly reads no lead.
func checkAhead(t *testing.T, what string, c borrowClock, step time.Duration, mark time.Time) {
	t.Helper()
	const slackMs = 50 // the clock's milliseconds against the test's
	least := float64((step - time.Since(mark)).Milliseconds()) - slackMs
	if least <= 0 {
		t.Logf("/clock %s came after the step's end: its lead (%.0fms) is not checked", what, c.Rollback.IDsAheadMs)
	}
	if c.Rollback.IDsAheadMs < least || c.Rollback.IDsAheadMs > float64(step.Milliseconds())+slackMs {
		t.Fatalf("/clock %s: %+v, want IDs ahead of the clock by between %.0fms and %dms", what, c, least, step.Milliseconds())
	}
}

func (p *proc) borrowClock() borrowClock {
	p.t.Helper()
	code, body := p.get("/clock")
	var c borrowClock
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil {
		p.t.Fatalf("/clock: %d %s", code, body)
	}
	return c
}

// loadCap is the most IDs a second each load caller takes: three take at
// most 450,000 a second, 11% of the default layout's 4,096,000. What borrow
// can ride out depends on the load's share of capacity (a rollback of D is
// served while D times that share is within the fence's lead), so the test
// caps it rather than let a fast machine make 5s too large.
const loadCap = 150_000

// startLoad asks a node for IDs from three callers until they finish: two
// ask /id, one /ids?count=100, each pausing between requests so as to take
// at most loadCap IDs a second.
func startLoad(addr string) []*collector {
	var load []*collector
	for _, batch := range []int{1, 1, 100} {
		path := "/id"
		if batch > 1 {
			path = "/ids?count=" + strconv.Itoa(batch)
		}
		load = append(load, collectPath(addr, path, time.Duration(batch)*time.Second/loadCap))
	}
	return load
}

// finishLoad stops the callers and checks what they got: every request
// answered 200, no ID twice, each caller's IDs rising (checkIDs). It
// returns all the IDs.
func finishLoad(t *testing.T, load []*collector) []int64 {
	t.Helper()
	var lists [][]int64
	for _, c := range load {
		lists = append(lists, c.finish(t))
		if c.errs > 0 || len(c.statuses) > 0 {
			t.Fatalf("through a 5s rollback with borrow: %d transport errors (%v), answers not 200 by status %v, the first at %s: %q",
				c.errs, c.firstErr, c.statuses, c.errAt[0].Format("15:04:05.000"), c.bodies)
		}
	}
	checkIDs(t, lists...)
	return slices.Concat(lists...)
}

// With --rollback-policy borrow a 5s rollback under steady load is served
// without a refusal: no ID twice, each caller's IDs rising, the IDs ahead
// of the clock by about the rollback, which /clock and /metrics show. A
// kill -9 while borrowing, and a restart with the clock still behind,
// reissue nothing: the restart waits for the clock to pass the fence the
// dead process persisted.
func TestIntegration_ChaosBorrowRidesOutARollback(t *testing.T) {
	dir := t.TempDir()
	args := nodeArgs(dir, 7, "--rollback-policy", "borrow")
	p := startNode(t, binChaos, args)
	p.waitReadyz(http.StatusOK, readyTimeout)

	load := startLoad(p.addr)
	time.Sleep(time.Second)
	// An ID issued just before the step back sets the lead's start.
	mark := time.Now()
	p.ids(1)
	p.setOffset("-5s")
	rolledBack := time.Now()
	// Through the rollback and until the clock has caught up, with room.
	time.Sleep(2 * time.Second)
	mid := p.borrowClock()
	checkAhead(t, "2s into the rollback", mid, 5*time.Second, mark)
	time.Sleep(4 * time.Second)
	ids := finishLoad(t, load)
	t.Logf("%d IDs through a 5s rollback (%s of load after it), no refusal, none twice, each caller's rising",
		len(ids), time.Since(rolledBack).Round(time.Millisecond))
	if mid.Rollback.Policy != "borrow" || mid.State != "in_service" || mid.Rollback.Borrowed == 0 {
		t.Fatalf("/clock 2s into the rollback: %+v, want in service and borrowing", mid)
	}
	t.Logf("2s into the rollback: IDs %.0fms ahead of the clock, %dms of headroom left, %d IDs borrowed",
		mid.Rollback.IDsAheadMs, mid.Rollback.HeadroomMs, mid.Rollback.Borrowed)
	// With the load stopped the clock catches up within the lead left
	// (at most 5s); then nothing is ahead and nothing was refused.
	caughtUp := p.borrowClock()
	for deadline := time.Now().Add(10 * time.Second); caughtUp.Rollback.IDsAheadMs != 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		caughtUp = p.borrowClock()
	}
	if caughtUp.Rollback.IDsAheadMs != 0 || caughtUp.Rollback.BorrowExhausted != 0 || caughtUp.State != "in_service" {
		t.Fatalf("/clock 10s after the load stopped: %+v, want in service, nothing ahead, nothing refused", caughtUp)
	}
	_, metrics := p.get("/metrics")
	for _, want := range []string{`snowflaked_rollback_policy{policy="borrow"} 1`, `snowflaked_transitions_total{reason="borrow_exhausted"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if !strings.Contains(metrics, "snowflaked_ids_borrowed_total ") || strings.Contains(metrics, "snowflaked_ids_borrowed_total 0\n") {
		t.Errorf("/metrics counts no borrowed IDs")
	}

	// kill -9 in a second rollback, with IDs borrowed ahead of the clock.
	// An ID issued just before the step back sets the lead's start.
	mark = time.Now()
	p.ids(1)
	p.setOffset("-10s")
	before := p.ids(1000)
	c := p.borrowClock()
	checkAhead(t, "in the second rollback", c, 5*time.Second, mark)
	p.signal(syscall.SIGKILL)
	p.exitCode()
	// The restart's clock is as far behind: while it reads before the
	// fence the dead process persisted (at or past c.FenceMs), it may not
	// serve.
	start := time.Now()
	q := startNode(t, binChaos, args, "SNOWFLAKED_CHAOS_CLOCK_OFFSET=-10s")
	code, body := q.get("/id")
	// Taken after the answer: if the clock then was still behind, it was
	// behind when the node answered.
	answered := time.Now()
	switch behind := answered.Add(-10*time.Second).UnixMilli() < c.FenceMs; {
	case code == http.StatusOK && behind:
		t.Fatalf("the restart served %s with its clock behind the fence the dead process persisted", body)
	case !behind:
		t.Logf("the restart took %s to answer: its clock had passed the fence, so serving at once was allowed", answered.Sub(start).Round(time.Millisecond))
	}
	q.waitReadyz(http.StatusOK, 30*time.Second)
	after := q.ids(1000)
	if after[0] <= slices.Max(append(ids, before...)) {
		t.Fatalf("after the restart, ID %d is not above every ID before (%d)", after[0], slices.Max(append(ids, before...)))
	}
	t.Logf("kill -9 with IDs %.0fms ahead of the clock (persisted fence %dms past the last issued ID): back in service %s after the restart",
		c.Rollback.IDsAheadMs, c.FenceMs-c.LastIssuedMs, time.Since(start).Round(time.Millisecond))

	// A clean stop while borrowing: the final fence is the last issued ID,
	// so the restart waits only for the clock to pass it.
	mark = time.Now()
	q.ids(1)
	q.setOffset("-14s")
	before = q.ids(1000)
	c = q.borrowClock()
	checkAhead(t, "in the third rollback", c, 4*time.Second, mark)
	q.signal(syscall.SIGTERM)
	if code := q.exitCode(); code != 0 {
		t.Fatalf("exit %d on SIGTERM while borrowing", code)
	}
	start = time.Now()
	r := startNode(t, binChaos, args, "SNOWFLAKED_CHAOS_CLOCK_OFFSET=-14s")
	r.waitReadyz(http.StatusOK, 30*time.Second)
	if first := r.ids(1)[0]; first <= before[len(before)-1] {
		t.Fatalf("after a clean restart, ID %d is not above the last before %d", first, before[len(before)-1])
	}
	t.Logf("clean stop with IDs %.0fms ahead of the clock: back in service %s after the restart",
		c.Rollback.IDsAheadMs, time.Since(start).Round(time.Millisecond))
}
