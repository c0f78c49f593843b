//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// segTag is the tag the segment scenario serves: a small base step so that
// ranges are loaded, returned and resumed often under the faults.
var segTag = segment.Tag{Name: "chaos", Start: 1, Step: 50, MaxStep: 5000, Description: "chaos scenario"}

// segStream is one load client's view of one node process: the IDs it got
// must increase (a node hands out a tag's IDs in increasing order).
type segStream struct {
	node string
	inc  int
}

// segLoad calls GET /segment/{tag}?count=N on nodes, paced, and checks what
// comes back: no ID twice anywhere, increasing per client and node process,
// and only documented refusals (503 segment_unavailable while a node cannot
// reach ZooKeeper and its ranges are used up, a refused connection while a
// node is down).
type segLoad struct {
	client *http.Client
	stop   chan struct{}
	wg     sync.WaitGroup

	mu          sync.Mutex
	owner       map[int64]segStream // every ID issued, and who issued it
	problems    []string
	ok          map[string]int64 // answers with IDs, per node
	duplicates  int64
	dropped     int64 // problems past maxProblemLines
	unavailable int64 // 503 segment_unavailable
	transport   int64 // connection refused, reset: a node down
}

func startSegLoad(nodes []*node, seed uint64) *segLoad {
	l := &segLoad{
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}},
		stop:   make(chan struct{}),
		owner:  map[int64]segStream{},
		ok:     map[string]int64{},
	}
	deadline := time.Now().Add(15 * time.Minute) // the clients stop by themselves
	for i, n := range nodes {
		for g := range 2 {
			rng := rand.New(rand.NewPCG(seed, uint64(i*2+g)))
			l.wg.Go(func() { l.run(n, rng, deadline) })
		}
	}
	return l
}

func (l *segLoad) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addLocked(fmt.Sprintf(format, args...))
}

// maxProblemLines bounds the problems kept: a broken run can find
// thousands (every ID of a range issued twice), and the first ones say
// what happened.
const maxProblemLines = 50

// addLocked keeps a problem, counting those past maxProblemLines; l.mu is
// held.
func (l *segLoad) addLocked(p string) {
	if len(l.problems) < maxProblemLines {
		l.problems = append(l.problems, p)
		return
	}
	l.dropped++
}

// run is one client: sequential requests to one node until stopped.
func (l *segLoad) run(n *node, rng *rand.Rand, deadline time.Time) {
	var last int64
	lastInc := -1
	for time.Now().Before(deadline) {
		select {
		case <-l.stop:
			return
		case <-time.After(time.Duration(3+rng.IntN(5)) * time.Millisecond): // paced: ~200 requests/s per client
		}
		count := 1 + rng.IntN(40)
		inc := n.Incarnation()
		code, body, err := l.get(n, count)
		// A restart in between: which process answered is unknown, so the
		// order is not checked (uniqueness is).
		known := n.Incarnation() == inc
		switch {
		case err != nil:
			l.mu.Lock()
			l.transport++
			l.mu.Unlock()
			continue
		case code == http.StatusServiceUnavailable:
			// segment_unavailable, or a node (re)starting: its port answers
			// 503 starting while it connects and claims.
			var u Unavailable
			perr := json.Unmarshal(body, &u)
			segUnavailable := u.Error.Code == "segment_unavailable" && u.Error.Reason == u.Error.Code
			starting := u.Error.Code == "out_of_service" && u.Error.State == "starting" && u.Error.Reason == "starting"
			if perr != nil || !segUnavailable && !starting {
				l.problem("node %s: 503 %q (%v): neither segment_unavailable nor starting", n.name, cut(body), perr)
			}
			l.mu.Lock()
			l.unavailable++
			l.mu.Unlock()
			continue
		case code != http.StatusOK:
			l.problem("node %s: %d %q", n.name, code, cut(body))
			continue
		}
		ids, perr := parseIDs(body)
		if perr != nil || len(ids) != count {
			l.problem("node %s: asked %d IDs, got %d (%v): %q", n.name, count, len(ids), perr, cut(body))
			continue
		}
		if inc != lastInc || !known {
			last, lastInc = 0, inc
		}
		s := segStream{n.name, inc}
		l.mu.Lock()
		l.ok[n.name]++
		for _, id := range ids {
			if known && id <= last {
				l.addLocked(fmt.Sprintf("node %s incarnation %d: ID %d after %d", n.name, inc, id, last))
			}
			last = id
			if prev, dup := l.owner[id]; dup {
				l.duplicates++
				l.addLocked(fmt.Sprintf("ID %d issued twice: by %s incarnation %d and %s incarnation %d", id, prev.node, prev.inc, n.name, inc))
			}
			l.owner[id] = s
		}
		l.mu.Unlock()
	}
}

func (l *segLoad) get(n *node, count int) (int, []byte, error) {
	resp, err := l.client.Get("http://" + n.Addr() + "/segment/" + segTag.Name + "?count=" + strconv.Itoa(count))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// answers returns how many answers with IDs each node gave.
func (l *segLoad) answers() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.ok)
}

// finish stops the clients and returns the IDs issued, sorted.
func (l *segLoad) finish() []int64 {
	close(l.stop)
	l.wg.Wait()
	l.client.CloseIdleConnections()
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]int64, 0, len(l.owner))
	for id := range l.owner {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// segmentsOverlappingFaults (segment mode under the overlapping faults): three real
// nodes serve one dense tag from a 3-server ensemble while kill -9 and
// SIGTERM restarts, ZooKeeper leader kills and clock faults overlap. Dense
// IDs must never repeat, must increase per node process, and the only
// refusals allowed are a down node's and 503 segment_unavailable. Clock
// faults must not stop segment serving. Once the faults end every node
// serves the tag again; after the final clean stops no issued ID lies in a
// returned range (it would be issued again), every issued ID is below
// max_id, and the IDs lost are reported (a kill -9 loses its mark lead, a
// range write cut off by a leader kill may be lost: the exact accounting
// is TestIntegration_SegmentsCleanAndCrashRestarts's and the segment
// package's ensemble test's).
func (h *harness) segmentsOverlappingFaults(t *testing.T) {
	ens := zkharness.StartEnsemble(t, 3)
	c := h.newCluster(t, "segments")
	c.zk, c.obs = ens, observe(t, ens)
	nodes := c.startReady("a", "b", "c")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st, err := segment.OpenZK(ctx, segment.ZKConfig{
		Servers: strings.Split(ens.ConnectString(), ","), Cluster: c.name, Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Create(ctx, segTag); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitSegmentReady(t, n)
	}
	load := startSegLoad(nodes, h.seed)
	waitSegmentAnswers(t, load, nodes)

	duration := pick(h, 15*time.Second, 3*time.Minute)
	s := &segSchedule{
		h: h, t: t, nodes: nodes,
		rng:       rand.New(rand.NewPCG(h.seed, 0x7365676d656e7473)), // "segments"
		offsets:   make([]time.Duration, len(nodes)),
		restartAt: make([]time.Time, len(nodes)),
		zkFault:   &leaderFault{t: t, ens: ens},
		counts:    map[string]int{},
	}
	start := time.Now()
	for time.Since(start) < duration {
		s.endDueFaults()
		time.Sleep(time.Duration(200+s.rng.IntN(800)) * time.Millisecond) // the schedule's pace
		s.injectOne()
	}
	t.Logf("segment faults over %s (%s=%d): %v", duration, SeedEnv, h.seed, s.counts)

	// End every fault; every node must serve the tag again by itself.
	ended := time.Now()
	s.endAll()
	for _, n := range nodes {
		waitSegmentReady(t, n)
	}
	waitSegmentAnswers(t, load, nodes)
	t.Logf("every node serves the tag again %s after the faults ended", time.Since(ended).Round(time.Millisecond))
	issued := load.finish()

	// Clean stops: every range goes back, then the accounting.
	for _, n := range nodes {
		if err := n.p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := n.p.Wait(startTimeout); err != nil || code != 0 {
			t.Errorf("node %s: final SIGTERM: exit %d, %v\n%s", n.name, code, err, n.p.Tail(30))
		}
	}
	h.checkSegmentAccounting(ctx, t, st, load, issued, s.kills)
}

// segSchedule is the state of segmentsOverlappingFaults' seeded schedule.
type segSchedule struct {
	h         *harness
	t         *testing.T
	nodes     []*node
	rng       *rand.Rand
	offsets   []time.Duration
	restartAt []time.Time // non-zero: down, restart then
	zkFault   *leaderFault
	counts    map[string]int
	kills     int
}

// endDueFaults restarts the nodes and the ZooKeeper server whose time has
// come.
func (s *segSchedule) endDueFaults() {
	for i, at := range s.restartAt {
		if at.IsZero() || time.Now().Before(at) {
			continue
		}
		s.offsets[i] = 0
		s.nodes[i].restart(nil)
		s.restartAt[i] = time.Time{}
		s.counts["restart"]++
	}
	if s.zkFault.restartDue() {
		s.counts["zookeeper restart"]++
	}
}

// injectOne draws the next fault and its node and injects it, unless it
// would change nothing or an election is under way.
func (s *segSchedule) injectOne() {
	t := s.t
	i := s.rng.IntN(len(s.nodes))
	n := s.nodes[i]
	down := pending(s.restartAt)
	switch k := s.rng.IntN(20); {
	case k < 6 && s.restartAt[i].IsZero(): // a clock fault: dense IDs carry no time and keep coming
		next := time.Duration(s.rng.IntN(10000)-5000) * time.Millisecond
		if next == s.offsets[i] {
			return
		}
		n.setOffset(next)
		s.h.sum.Injected(next - s.offsets[i])
		s.offsets[i] = next
		s.counts["clock"]++
	case k < 10 && s.restartAt[i].IsZero() && down < 2: // kill -9
		n.kill9()
		s.h.sum.Killed()
		s.kills++
		s.restartAt[i] = time.Now().Add(time.Duration(200+s.rng.IntN(2800)) * time.Millisecond)
		s.counts["kill -9"]++
	case k < 14 && s.restartAt[i].IsZero() && down < 2: // SIGTERM: the ranges go back to ZooKeeper (or stay on disk)
		if err := n.p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := n.p.Wait(startTimeout); err != nil || code != 0 {
			t.Fatalf("node %s: SIGTERM: exit %d, %v\n%s", n.name, code, err, n.p.Tail(30))
		}
		s.restartAt[i] = time.Now().Add(time.Duration(s.rng.IntN(1000)) * time.Millisecond)
		s.counts["sigterm"]++
	case k < 18 && !s.zkFault.isDown(): // kill the ZooKeeper leader; restarted 0.5s-4s later
		if !s.zkFault.kill(s.rng) {
			return // an election is under way
		}
		s.counts["zookeeper leader kill"]++
	}
}

// endAll ends every fault now: the ZooKeeper server and the nodes down
// restart, clocks go back to 0.
func (s *segSchedule) endAll() {
	s.zkFault.end()
	for i, n := range s.nodes {
		switch {
		case !s.restartAt[i].IsZero():
			n.restart(nil)
		case s.offsets[i] != 0:
			n.setOffset(0)
			s.h.sum.Injected(-s.offsets[i])
		}
	}
}

// checkSegmentAccounting checks, after the final clean stops, that no
// issued ID lies in a returned range and every one is below max_id,
// reports the IDs lost, and adds the figures to the summary.
func (h *harness) checkSegmentAccounting(ctx context.Context, t *testing.T, st *segment.ZKStore, load *segLoad, issued []int64, kills int) {
	t.Helper()
	tag, err := st.Tag(ctx, segTag.Name)
	if err != nil {
		t.Fatal(err)
	}
	returned, err := st.Returned(ctx, segTag.Name)
	if err != nil {
		t.Fatal(err)
	}
	// The accounting's findings come first: they say what the duplicates
	// (which can fill every line) do not.
	var accounting []string
	var returnedIDs int64
	for _, r := range returned {
		returnedIDs += r.Len()
		// Both sorted: the first issued ID at or above r.Lo.
		if k, _ := slices.BinarySearch(issued, r.Lo); k < len(issued) && issued[k] < r.Hi { // [Lo,Hi)
			accounting = append(accounting, fmt.Sprintf("issued ID %d lies in the returned range %v: it would be issued again", issued[k], r))
		}
	}
	if len(issued) == 0 {
		t.Fatal("no dense ID issued: the scenario proved nothing")
	}
	if issued[0] < tag.Start || issued[len(issued)-1] >= tag.MaxID {
		accounting = append(accounting, fmt.Sprintf("issued IDs span [%d,%d], outside what was handed out [%d,%d)", issued[0], issued[len(issued)-1], tag.Start, tag.MaxID))
	}
	handedOut := tag.MaxID - tag.Start
	lost := handedOut - returnedIDs - int64(len(issued))
	t.Logf("dense IDs: %d issued (answers per node %v), %d handed out, %d returned, %d lost over %d kill -9 (%.1f per kill); %d 503 segment_unavailable, %d transport errors; dense-ness %.4f",
		len(issued), load.answers(), handedOut, returnedIDs, lost, kills, float64(lost)/float64(max(kills, 1)),
		load.unavailable, load.transport, float64(len(issued))/float64(issued[len(issued)-1]-issued[0]+1))
	if lost < 0 {
		accounting = append(accounting, fmt.Sprintf("issued %d IDs, more than handed out %d minus returned %d", len(issued), handedOut, returnedIDs))
	}
	for _, p := range append(accounting, load.problems...) {
		t.Error(p)
	}
	if load.dropped > 0 {
		t.Errorf("… and %d more problems (%d IDs issued twice in all)", load.dropped, load.duplicates)
	}
	h.sum.AddSegments(scenarioName(t), SegmentFigures{
		IDs: int64(len(issued)), Duplicates: load.duplicates, Problems: int64(len(accounting)+len(load.problems)) + load.dropped - load.duplicates,
		Lost: lost, Kills: kills, Unavailable: load.unavailable,
	})
}

// waitSegmentReady polls /readyz/segment until 200.
func waitSegmentReady(t *testing.T, n *node) {
	t.Helper()
	waitFor(t, readyTimeout, "node "+n.name+" /readyz/segment 200", func() bool {
		code, _, err := n.get("/readyz/segment")
		return err == nil && code == http.StatusOK
	})
}

// waitSegmentAnswers waits until every node has given 50 more answers with
// IDs.
func waitSegmentAnswers(t *testing.T, l *segLoad, nodes []*node) {
	t.Helper()
	before := l.answers()
	waitFor(t, readyTimeout, "50 segment answers from each node", func() bool {
		now := l.answers()
		for _, n := range nodes {
			if now[n.name]-before[n.name] < 50 {
				return false
			}
		}
		return true
	})
}
