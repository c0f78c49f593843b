package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/node"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	testproc "codeberg.org/snowflaked/snowflaked/tests/proc"
)

func TestIntegration_StandaloneServes(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, binSnowflaked, nodeArgs(dir, 7))
	p.waitReadyz(http.StatusOK, readyTimeout)

	if code, body := p.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	code, body := p.get("/id")
	if code != http.StatusOK {
		t.Fatalf("/id: %d %s", code, body)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(body), 10, 64)
	if err != nil || id <= 0 {
		t.Fatalf("/id body %q: %v", body, err)
	}
	ms, worker := decodeMs(id)
	if worker != 7 {
		t.Errorf("worker of %d is %d, want 7", id, worker)
	}
	if d := time.Since(time.UnixMilli(ms)); d < -time.Second || d > time.Minute {
		t.Errorf("ID time %s is %s away from now", time.UnixMilli(ms), d)
	}
	batch := p.ids(1000)
	if batch[0] <= id {
		t.Errorf("/ids started at %d, not after /id's %d", batch[0], id)
	}
	code, body = p.get("/clock")
	var rep struct {
		Mode     string `json:"mode"`
		WorkerID int64  `json:"worker_id"`
		FenceMs  int64  `json:"fence_ms"`
		LastMs   int64  `json:"last_issued_ms"`
		State    string `json:"state"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil {
		t.Fatalf("/clock: %d %s", code, body)
	}
	lastMs, _ := decodeMs(batch[len(batch)-1])
	if rep.Mode != "standalone" || rep.WorkerID != 7 || rep.State != "in_service" || rep.LastMs < lastMs || rep.FenceMs <= rep.LastMs {
		t.Errorf("/clock report %+v (last ID at %d)", rep, lastMs)
	}
	// snowflakectl decodes what the server issued.
	exit, out, errOut := ctl(t, "decode", strconv.FormatInt(id, 10), "--json")
	if exit != 0 || !strings.Contains(out, `"worker_id":7`) || !strings.Contains(out, `"timestamp_ms":`+strconv.FormatInt(ms, 10)) {
		t.Errorf("snowflakectl decode: exit %d, %q %q", exit, out, errOut)
	}
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

func TestIntegration_RestartAfterSIGTERMReissuesNothingAndWaitsForNothing(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, binSnowflaked, nodeArgs(dir, 3))
	p.waitReadyz(http.StatusOK, readyTimeout)
	// SIGTERM arrives while requests are running: those in flight finish,
	// and the fence written at exit covers every ID handed out.
	c := collect(p.addr)
	c.waitFor(t, 10000)
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM; stderr:\n%s", code, p.Output())
	}
	before := c.finish(t)
	maxBefore := slices.Max(before)
	// The stop wrote the exact last issued time as the fence.
	e, err := cachefile.Load(filepath.Join(dir, "cache.json"))
	if err != nil {
		t.Fatal(err)
	}
	// It covers every ID received, and it is not the running fence (now +
	// fence-ahead) but the last issued time, which is already past.
	if lastMs, _ := decodeMs(maxBefore); e.Fence < snowflake.UnixMilli(lastMs) || e.Fence > snowflake.UnixMilliOf(time.Now()) {
		t.Errorf("fence after SIGTERM %d, want the last issued time (last ID received at %d, now %d)", e.Fence, lastMs, time.Now().UnixMilli())
	}

	restart := time.Now()
	q := startNode(t, binSnowflaked, nodeArgs(dir, 3))
	wait, _ := q.waitReadyz(http.StatusOK, readyTimeout)
	t.Logf("clean restart: process start to /readyz 200 in %s (of which /readyz polling %s)", time.Since(restart), wait)
	if m, ok := q.FindLog("clock is behind the fence: waiting for it before serving"); ok {
		t.Errorf("a clean restart waited for the fence: %v", m)
	}
	if m := q.waitStarted(); snowflake.UnixMilli(int64(number(t, m, "fence_ms"))) != e.Fence {
		t.Errorf("restart took fence %v, want %d", m["fence_ms"], e.Fence)
	}
	after := q.ids(2000)
	if after[0] <= maxBefore {
		t.Fatalf("ID reissued or backwards: first after restart %d <= last before %d", after[0], maxBefore)
	}
}

// collector hammers /ids until stopped and keeps every ID it fully received
// (in the order received: one request at a time, so per worker they must
// increase). It counts transport errors and non-200 answers.
type collector struct {
	mu        sync.Mutex
	ids       []int64
	errs      int         // transport errors (connection refused, reset, timeout)
	firstErr  error       // the first of them
	statuses  map[int]int // non-200 answers by status
	bodies    []string    // the first few non-200 bodies
	malformed string      // the first field of a 200 answer that is not an ID
	errAt     []time.Time // when each error or non-200 answer came
	stop      chan struct{}
	done      chan struct{}
}

func collect(addr string) *collector { return collectPath(addr, "/ids?count=500", 0) }

// collectPath is collect with another request path (/id, /ids?count=N) and
// a pause between requests (0: none).
func collectPath(addr, path string, pause time.Duration) *collector {
	c := &collector{stop: make(chan struct{}), done: make(chan struct{}), statuses: map[int]int{}}
	go func() {
		defer close(c.done)
		cl := &http.Client{Timeout: 5 * time.Second}
		for i := 0; i < 1000000; i++ { // bounded; stops long before
			select {
			case <-c.stop:
				return
			case <-time.After(pause):
			}
			resp, err := cl.Get("http://" + addr + path)
			if err != nil {
				c.mu.Lock()
				c.errs++
				if c.firstErr == nil {
					c.firstErr = err
				}
				c.errAt = append(c.errAt, time.Now())
				c.mu.Unlock()
				continue
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				c.mu.Lock()
				c.statuses[resp.StatusCode]++
				c.errAt = append(c.errAt, time.Now())
				if len(c.bodies) < 5 {
					c.bodies = append(c.bodies, string(b))
				}
				c.mu.Unlock()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				continue
			}
			var got []int64
			for _, f := range strings.Fields(string(b)) {
				id, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					c.mu.Lock()
					if c.malformed == "" {
						c.malformed = f
					}
					c.mu.Unlock()
					continue
				}
				got = append(got, id)
			}
			c.mu.Lock()
			c.ids = append(c.ids, got...)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) count() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.ids) }

// waitFor waits until the collector holds at least n IDs.
func (c *collector) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d IDs in 30s", c.count())
		}
		time.Sleep(pollEvery)
	}
}

func (c *collector) finish(t *testing.T) []int64 {
	t.Helper()
	close(c.stop)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("collector did not stop")
	}
	if c.malformed != "" {
		t.Fatalf("a 200 answer held %q, not an ID", c.malformed)
	}
	return c.ids
}

func TestIntegration_RestartAfterKill9ReissuesNothing(t *testing.T) {
	dir := t.TempDir()
	const fenceAhead = 3 * time.Second
	p := startNode(t, binSnowflaked, nodeArgs(dir, 9, "--fence-ahead", fenceAhead.String()))
	p.waitReadyz(http.StatusOK, readyTimeout)
	c := collect(p.addr)
	c.waitFor(t, 20000)
	p.signal(syscall.SIGKILL)
	killedAt := time.Now()
	p.exitCode()
	before := c.finish(t)
	maxBefore := slices.Max(before)
	maxBeforeMs, _ := decodeMs(maxBefore)

	q := startNode(t, binSnowflaked, nodeArgs(dir, 9, "--fence-ahead", fenceAhead.String()))
	startLine := q.waitStarted()
	fence := int64(number(t, startLine, "fence_ms"))
	q.waitReadyz(http.StatusOK, readyTimeout)
	readyAfterKill := time.Since(killedAt)
	after := q.ids(2000)
	firstAfterMs, _ := decodeMs(after[0])
	t.Logf("kill -9 after %d IDs: last ID at %d, fence %d (%d ms ahead of it); ready %s after the kill; first new ID at %d",
		len(before), maxBeforeMs, fence, fence-maxBeforeMs, readyAfterKill, firstAfterMs)

	if after[0] <= maxBefore {
		t.Fatalf("ID reissued or backwards after kill -9: %d <= %d", after[0], maxBefore)
	}
	// The fence covered every ID issued, and nothing after restart is at or
	// before it: the restart waited exactly for the fence.
	if fence < maxBeforeMs {
		t.Errorf("fence %d is before the last issued ID's time %d", fence, maxBeforeMs)
	}
	if firstAfterMs <= fence {
		t.Errorf("first ID after restart at %d, not after the fence %d", firstAfterMs, fence)
	}
	// The fence is never more than fence-ahead ahead of the clock, so the
	// node waits at most that long (logged by the start gate).
	if m, ok := q.FindLog("clock is behind the fence: waiting for it before serving"); ok {
		if behind := time.Duration(number(t, m, "behind_ms")) * time.Millisecond; behind > fenceAhead {
			t.Errorf("waited for the fence %s > fence-ahead %s", behind, fenceAhead)
		}
		if w := q.waitLog("clock passed the fence", readyTimeout); number(t, w, "waited_ms") > float64((fenceAhead + time.Second).Milliseconds()) {
			t.Errorf("start gate waited %vms, more than fence-ahead %s plus 1s", w["waited_ms"], fenceAhead)
		}
	}
	if fence-maxBeforeMs > (fenceAhead + 2*time.Second).Milliseconds() {
		t.Errorf("fence %d ms past the last ID: the keeper keeps it only fence-ahead %s ahead", fence-maxBeforeMs, fenceAhead)
	}
}

func TestIntegration_CacheFileOfAnotherWorkerRefused(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, binSnowflaked, nodeArgs(dir, 1))
	p.waitReadyz(http.StatusOK, readyTimeout)
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	q := start(t, binSnowflaked, nodeArgs(dir, 2))
	if code := q.exitCode(); code != 2 {
		t.Fatalf("exit %d with another worker's cache file, want 2; stderr:\n%s", code, q.Output())
	}
	for _, s := range []string{"holds worker 1", "--worker-id is 2", filepath.Join(dir, "cache.json")} {
		if !strings.Contains(q.Output(), s) {
			t.Errorf("stderr does not contain %q:\n%s", s, q.Output())
		}
	}
}

func TestIntegration_DamagedCacheFileRefused(t *testing.T) {
	tests := []struct{ name, content string }{
		{"truncated json", `{"cluster":"","worker_id":`},
		{"negative fence", `{"cluster":"","worker_id":4,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"},"fence":-1}`},
		{"bad layout", `{"worker_id":4,"layout":{"layout":"99/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"},"fence":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cache.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			p := start(t, binSnowflaked, nodeArgs(dir, 4))
			if code := p.exitCode(); code != 1 {
				t.Fatalf("exit %d with a damaged cache file, want 1; stderr:\n%s", code, p.Output())
			}
			for _, s := range []string{"damaged", path} {
				if !strings.Contains(p.Output(), s) {
					t.Errorf("stderr does not contain %q:\n%s", s, p.Output())
				}
			}
			if b, _ := os.ReadFile(path); string(b) != tc.content {
				t.Errorf("the damaged cache file was changed to %q", b)
			}
		})
	}
}

func TestIntegration_EnvironmentVariables(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, binSnowflaked, nodeArgs(dir, -1), "SNOWFLAKED_MAX_BATCH=7", "SNOWFLAKED_WORKER_ID=12", "SNOWFLAKED_FOO=1")
	p.waitReadyz(http.StatusOK, readyTimeout)
	if code, body := p.get("/ids?count=8"); code != http.StatusBadRequest || !strings.Contains(body, "invalid_count") {
		t.Errorf("/ids?count=8 with SNOWFLAKED_MAX_BATCH=7: %d %s", code, body)
	}
	ids := p.ids(7)
	if _, w := decodeMs(ids[0]); w != 12 {
		t.Errorf("worker %d, want 12 from SNOWFLAKED_WORKER_ID", w)
	}
	warned := false
	for _, m := range p.LogLines() {
		if m["level"] == "warn" && m["variable"] == "SNOWFLAKED_FOO" {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning about SNOWFLAKED_FOO:\n%s", p.Output())
	}
	// The command line wins over the environment.
	p.signal(syscall.SIGTERM)
	p.exitCode()
	q := startNode(t, binSnowflaked, nodeArgs(t.TempDir(), 5, "--max-batch", "9"), "SNOWFLAKED_MAX_BATCH=7")
	q.waitReadyz(http.StatusOK, readyTimeout)
	q.ids(9)
}

func TestIntegration_BadFlagsExit2(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"no worker id", nil, nil, "--worker-id is required"},
		{"worker id not a number", []string{"--worker-id", "x"}, nil, `--worker-id "x": want an integer`},
		{"fence-ahead without a unit", []string{"--worker-id", "1", "--fence-ahead", "3"}, nil, `--fence-ahead "3": want a duration like 3s`},
		{"worker id not a number in the environment", nil, []string{"SNOWFLAKED_WORKER_ID=abc"}, `SNOWFLAKED_WORKER_ID="abc" (for --worker-id): want an integer`},
		{"worker id out of range", []string{"--worker-id", "1024"}, nil, "0..1023"},
		{"fence-ahead too small", []string{"--worker-id", "1", "--fence-ahead", "1ms"}, nil, "--fence-ahead 1ms"},
		{"bad layout", []string{"--worker-id", "1", "--layout", "50/10/12"}, nil, "--layout 50/10/12"},
		{"max batch zero", []string{"--worker-id", "1", "--max-batch", "0"}, nil, "--max-batch 0"},
		{"unknown flag", []string{"--worker-id", "1", "--frobnicate"}, nil, "frobnicate"},
		{"log format", []string{"--worker-id", "1", "--log-format", "xml"}, nil, "--log-format"},
		{"report interval vs zk fence", []string{"--worker-id", "1", "--zk-fence-ahead", "1s"}, nil, "a sixth of --zk-fence-ahead"},
		{"bad environment value", []string{"--worker-id", "1"}, []string{"SNOWFLAKED_FENCE_AHEAD=later"}, `SNOWFLAKED_FENCE_AHEAD="later"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--listen", "127.0.0.1:0", "--cache-file", filepath.Join(t.TempDir(), "c.json")}, tc.args...)
			p := start(t, binSnowflaked, args, tc.env...)
			if code := p.exitCode(); code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, p.Output())
			}
			// Every line is JSON, the configuration's errors included.
			var said []string
			for line := range strings.Lines(p.Output()) {
				if err := testproc.CheckJSONLine([]byte(line)); err != nil {
					t.Errorf("%v: %q", err, line)
				}
			}
			for _, m := range p.LogLines() {
				if e, ok := m["error"].(string); ok {
					said = append(said, e)
				}
			}
			if !strings.Contains(strings.Join(said, "\n"), tc.want) {
				t.Errorf("the errors logged do not contain %q:\n%s", tc.want, p.Output())
			}
		})
	}
}

func TestIntegration_VersionFlag(t *testing.T) {
	for _, bin := range []string{binSnowflaked, binChaos} {
		p := start(t, bin, []string{"--version"})
		if code := p.exitCode(); code != 0 {
			t.Fatalf("%s --version: exit %d", bin, code)
		}
		chaos := strings.Contains(p.Output(), "chaos build")
		if chaos != (bin == binChaos) {
			t.Errorf("%s --version says chaos build = %v: %q", filepath.Base(bin), chaos, p.Output())
		}
	}
}

// A --cache-file that is a symlink: the fence is written to its target (the
// link stays a link), so a link restored by a container rebuild still
// leads to the latest fence; a restart with the clock 1.4s behind issues
// nothing twice. A link whose target is gone is refused, not read as a
// first start.
func TestIntegration_SymlinkedCacheFileKeepsItsFence(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "volume", "cache.json")
	link := filepath.Join(dir, "cache.json")
	args := func(extra ...string) []string {
		return append([]string{"--listen", "127.0.0.1:0", "--cache-file", link, "--log-format", "json", "--worker-id", "3"}, extra...)
	}
	first := startNode(t, binSnowflaked, []string{"--listen", "127.0.0.1:0", "--cache-file", target, "--log-format", "json", "--worker-id", "3"})
	first.signal(syscall.SIGTERM)
	if code := first.exitCode(); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, first.Output())
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	p := startNode(t, binSnowflaked, args())
	p.waitReadyz(http.StatusOK, readyTimeout)
	before := p.ids(5000)
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("run through the link: exit %d\n%s", code, p.Output())
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced by a regular file (%v, %v)", fi.Mode(), err)
	}
	// A container rebuilt from its image restores the link.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	q := startNode(t, binChaos, args(), node.ChaosClockOffsetEnv+"=-1400ms")
	q.waitReadyz(http.StatusOK, readyTimeout)
	after := q.ids(5000)
	if after[0] <= slices.Max(before) {
		t.Fatalf("after the restart through the restored link, first ID %d is not above the last before %d: reissued", after[0], slices.Max(before))
	}
	q.signal(syscall.SIGTERM)
	if code := q.exitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, q.Output())
	}

	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	r := start(t, binSnowflaked, args())
	if code := r.exitCode(); code != 2 {
		t.Fatalf("dangling link: exit %d, want 2\n%s", code, r.Output())
	}
	if !strings.Contains(r.Output(), "does not exist") {
		t.Fatalf("dangling link refused without saying why:\n%s", r.Output())
	}
}

// Deleting the lock file under a running node: a second process can lock a
// new one and start on the same cache file, but the first notices at its
// next fence write and persists nothing more, so it issues only below the
// fence the second one starts after. No ID twice; every ID of the second
// above every ID of the first.
func TestIntegration_DeletedLockFileNeverGivesTwoWriters(t *testing.T) {
	dir := t.TempDir()
	a := startNode(t, binSnowflaked, nodeArgs(dir, 3, "--fence-ahead", "1s"))
	a.waitReadyz(http.StatusOK, readyTimeout)
	fromA := a.ids(2000)
	if err := os.Remove(filepath.Join(dir, "cache.json.lock")); err != nil {
		t.Fatal(err)
	}
	b := startNode(t, binSnowflaked, nodeArgs(dir, 3, "--fence-ahead", "1s"))
	b.waitReadyz(http.StatusOK, readyTimeout)
	// A leaves service at its next fence write; until then it may issue
	// below the fence it last persisted.
	deadline := time.Now().Add(readyTimeout)
	for {
		code, body := a.get("/ids?count=100")
		if code != http.StatusOK {
			if !strings.Contains(body, "lock") && !strings.Contains(a.Output(), "lock file") {
				t.Fatalf("A left service for another reason: %d %s", code, body)
			}
			break
		}
		fromA = append(fromA, parseIDs(t, body)...)
		if time.Now().After(deadline) {
			t.Fatal("A still serves with its lock file gone")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fromB := b.ids(2000)
	seen := map[int64]bool{}
	for _, id := range append(slices.Clone(fromA), fromB...) {
		if seen[id] {
			t.Fatalf("ID %d issued twice", id)
		}
		seen[id] = true
	}
	if slices.Min(fromB) <= slices.Max(fromA) {
		t.Fatalf("B issued %d, not above A's last %d: both ran on one fence", slices.Min(fromB), slices.Max(fromA))
	}
	t.Logf("A issued %d IDs (up to %d), B started above them at %d", len(fromA), slices.Max(fromA), slices.Min(fromB))
}
