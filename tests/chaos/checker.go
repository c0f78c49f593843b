package chaos

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Kinds of problem the Checker finds. Each is a broken promise of the ID contract,
// §3, §4 or §5.
const (
	ProblemDuplicate     = "duplicate"      // one ID issued twice
	ProblemStreamOrder   = "stream_order"   // one sequential client saw a node's IDs not strictly increase
	ProblemRealtimeOrder = "realtime_order" // an answer received before a request was sent holds an ID >= one of that request (same worker)
	ProblemRestartFloor  = "restart_floor"  // after a restart, an ID at or below one issued before it
	ProblemInvalidID     = "invalid_id"     // not a positive ID of the layout
	ProblemWorker        = "worker"         // a node's IDs name several workers, or two nodes share one
	ProblemBadBody       = "bad_body"       // a 200 whose body is not the IDs asked for
	ProblemBadStatus     = "bad_status"     // an answer that is neither 200 nor 503
	ProblemBadReason     = "bad_reason"     // a 503 without a documented code and reason, or without Retry-After
)

// maxExamples bounds how many messages the Checker keeps per kind of problem.
const maxExamples = 10

// serverCodes503 are the error codes a 503 of /id and /ids may carry
// (server/errors.go, docs/api.md, "Errors"). For out_of_service the reason is the
// guard's; for the others the reason is the code itself.
var serverCodes503 = map[string]bool{
	"out_of_service": true, "clock_rollback": true, "fence_reached": true,
	"time_overflow": true, "clock_error": true, "id_error": true,
}

// guardReasons are the documented reasons a node is not in service
// (health.Reason values, docs/operations.md).
var guardReasons = map[string]bool{}

func init() {
	for _, r := range []health.Reason{
		health.ReasonStarting, health.ReasonStopping, health.ReasonClockBehindFence,
		health.ReasonClockRollback, health.ReasonNTPOffset, health.ReasonNTPUnreachable,
		health.ReasonPeerOffset, health.ReasonLeaseLost, health.ReasonZKFence,
		health.ReasonFencePersist, health.ReasonFenceReached, health.ReasonTimeOverflow,
		health.ReasonClockStalled, health.ReasonClockJump, health.ReasonPrevHolderFence,
	} {
		guardReasons[string(r)] = true
	}
}

// GuardReason reports whether r is a documented reason for being out of
// service (the reason of /readyz and of an out_of_service 503).
func GuardReason(r string) bool { return guardReasons[r] }

// Unavailable is the body of a 503 of /id or /ids.
type Unavailable struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
		State   string `json:"state"`
	} `json:"error"`
}

// ParseUnavailable decodes a 503 body of /id or /ids and checks that it
// carries a documented code and reason; it returns the reason.
func ParseUnavailable(body []byte) (string, error) {
	var u Unavailable
	if err := json.Unmarshal(body, &u); err != nil {
		return "", fmt.Errorf("503 body %q is not the JSON error: %w", cut(body), err)
	}
	code, reason := u.Error.Code, u.Error.Reason
	switch {
	case !serverCodes503[code]:
		return reason, fmt.Errorf("503 code %q is not a documented code (body %s)", code, cut(body))
	case code == "out_of_service" && !guardReasons[reason]:
		return reason, fmt.Errorf("503 out_of_service with reason %q, not a documented reason (body %s)", reason, cut(body))
	case code != "out_of_service" && reason != code:
		return reason, fmt.Errorf("503 code %q with reason %q, want the code as the reason (body %s)", code, reason, cut(body))
	}
	return reason, nil
}

func cut(b []byte) string {
	const n = 300
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// Batch is what one successful request returned.
type Batch struct {
	Node string // the node's name
	// Incarnation is the node's process run (0 first, +1 per restart) that
	// answered, or -1 when the caller cannot tell (a restart happened while
	// the request was on its way): then the batch counts for everything but
	// the restart check.
	Incarnation int
	Client      int           // the sequential client that asked (unique per node)
	Sent, Recv  time.Duration // on the Checker's clock (Since): request about to be sent, answer fully read
	IDs         []int64       // in the order of the answer
}

// streamKey names one sequential client of one node: the IDs it sees must
// strictly increase, across restarts of the node too.
type streamKey struct {
	node   string
	client int
}

type stream struct {
	ids     []int64
	batches []batchMeta
}

type batchMeta struct {
	n           int   // IDs of the batch in stream.ids (they follow each other)
	worker      int64 // -1: no decodable ID
	incarnation int
	sent, recv  time.Duration
	min, max    int64
}

type runKey struct {
	node        string
	incarnation int
}

// NodeCounts are the answers one node gave.
type NodeCounts struct {
	OK          int64            // 200 answers
	IDs         int64            // IDs in them
	Unavailable map[string]int64 // 503 answers by reason
	Transport   int64            // requests without an answer (connection refused or reset, timeout)
	Other       int64            // any other answer (bad status or body)
}

// Errors is every request to the node that did not return IDs.
func (c NodeCounts) Errors() int64 {
	n := c.Transport + c.Other
	for _, v := range c.Unavailable {
		n += v
	}
	return n
}

// Sub returns the counts since an earlier snapshot.
func (c NodeCounts) Sub(before NodeCounts) NodeCounts {
	d := NodeCounts{OK: c.OK - before.OK, IDs: c.IDs - before.IDs, Transport: c.Transport - before.Transport,
		Other: c.Other - before.Other, Unavailable: map[string]int64{}}
	for r, v := range c.Unavailable {
		if v -= before.Unavailable[r]; v != 0 {
			d.Unavailable[r] = v
		}
	}
	return d
}

// String is a one-line summary.
func (c NodeCounts) String() string {
	return fmt.Sprintf("ok %d (%d IDs), 503 %v, transport errors %d, other %d", c.OK, c.IDs, c.Unavailable, c.Transport, c.Other)
}

// Checker keeps every ID the load generators receive and finds the problems
// the contract rules out. It is safe for concurrent use.
type Checker struct {
	layout snowflake.Layout
	start  time.Time

	mu       sync.Mutex
	streams  map[streamKey]*stream
	workers  map[runKey]int64 // worker ID of each process run of a node
	counts   map[string]*NodeCounts
	ids      int64
	problems map[string]int64
	examples map[string][]string
}

// NewChecker returns a Checker of IDs of layout l.
func NewChecker(l snowflake.Layout) *Checker {
	return &Checker{
		layout: l, start: time.Now(),
		streams: map[streamKey]*stream{}, workers: map[runKey]int64{}, counts: map[string]*NodeCounts{},
		problems: map[string]int64{}, examples: map[string][]string{},
	}
}

// Since returns the time on the Checker's (monotonic) clock, for Batch.Sent
// and Batch.Recv.
func (c *Checker) Since() time.Duration { return time.Since(c.start) }

// problem records one problem; c.mu is held.
func (c *Checker) problem(kind, format string, args ...any) {
	c.problems[kind]++
	if len(c.examples[kind]) < maxExamples {
		c.examples[kind] = append(c.examples[kind], fmt.Sprintf(format, args...))
	}
}

func (c *Checker) countsOf(node string) *NodeCounts {
	nc := c.counts[node]
	if nc == nil {
		nc = &NodeCounts{Unavailable: map[string]int64{}}
		c.counts[node] = nc
	}
	return nc
}

// Record adds the IDs of one successful request. The order checks within
// the client's stream happen here; the others in Verify.
func (c *Checker) Record(b Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nc := c.countsOf(b.Node)
	nc.OK++
	nc.IDs += int64(len(b.IDs))
	if len(b.IDs) == 0 {
		c.problem(ProblemBadBody, "node %s client %d: a 200 without IDs", b.Node, b.Client)
		return
	}
	key := streamKey{b.Node, b.Client}
	s := c.streams[key]
	if s == nil {
		s = &stream{}
		c.streams[key] = s
	}
	meta := batchMeta{n: len(b.IDs), incarnation: b.Incarnation, sent: b.Sent, recv: b.Recv, min: math.MaxInt64, max: -1, worker: -1}
	prev := int64(-1)
	if len(s.ids) > 0 {
		prev = s.ids[len(s.ids)-1]
	}
	for i, id := range b.IDs {
		p, err := c.layout.Decode(id)
		if err != nil || id <= 0 {
			c.problem(ProblemInvalidID, "node %s client %d: ID %d: %v", b.Node, b.Client, id, err)
			continue
		}
		switch {
		case meta.worker < 0:
			meta.worker = p.WorkerID
		case p.WorkerID != meta.worker:
			c.problem(ProblemWorker, "node %s: one answer holds IDs of workers %d and %d (%d)", b.Node, meta.worker, p.WorkerID, id)
		}
		if id <= prev {
			c.problem(ProblemStreamOrder, "node %s client %d: ID %d (worker %d) after %d (answer sent at %s, position %d of %d)",
				b.Node, b.Client, id, p.WorkerID, prev, b.Sent, i, len(b.IDs))
		}
		prev = id
		meta.min, meta.max = min(meta.min, id), max(meta.max, id)
	}
	c.ids += int64(len(b.IDs))
	s.ids = append(s.ids, b.IDs...)
	s.batches = append(s.batches, meta)
	if meta.worker >= 0 && b.Incarnation >= 0 {
		run := runKey{b.Node, b.Incarnation}
		if w, ok := c.workers[run]; !ok {
			c.workers[run] = meta.worker
		} else if w != meta.worker {
			c.problem(ProblemWorker, "node %s run %d: IDs of worker %d, earlier of worker %d", b.Node, b.Incarnation, meta.worker, w)
		}
	}
}

// RecordFailure adds an answer other than 200: a 503 must carry a documented
// code and reason and a Retry-After header; any other status is a problem.
func (c *Checker) RecordFailure(node string, status int, retryAfter string, body []byte) {
	reason, err := "", error(nil)
	if status == 503 {
		reason, err = ParseUnavailable(body)
		if err == nil && retryAfter == "" {
			err = fmt.Errorf("503 (reason %s) without Retry-After", reason)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	nc := c.countsOf(node)
	switch {
	case status != 503:
		nc.Other++
		c.problem(ProblemBadStatus, "node %s: status %d: %s", node, status, cut(body))
	case err != nil:
		nc.Other++
		c.problem(ProblemBadReason, "node %s: %v", node, err)
	default:
		nc.Unavailable[reason]++
	}
}

// RecordBadBody adds a 200 whose body is not what was asked for.
func (c *Checker) RecordBadBody(node string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.countsOf(node).Other++
	c.problem(ProblemBadBody, "node %s: %v", node, err)
}

// RecordReadyz checks a 503 of /readyz: {"state","reason"} with a
// documented reason.
func (c *Checker) RecordReadyz(node string, body []byte) {
	var r struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	}
	err := json.Unmarshal(body, &r)
	if err == nil && !guardReasons[r.Reason] {
		err = fmt.Errorf("reason %q is not documented", r.Reason)
	}
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problem(ProblemBadReason, "node %s: /readyz 503 %s: %v", node, cut(body), err)
}

// RecordTransportError adds a request that got no answer.
func (c *Checker) RecordTransportError(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.countsOf(node).Transport++
}

// Counts returns the answers node gave so far.
func (c *Checker) Counts(node string) NodeCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	nc := c.countsOf(node)
	out := *nc
	out.Unavailable = make(map[string]int64, len(nc.Unavailable))
	for k, v := range nc.Unavailable {
		out.Unavailable[k] = v
	}
	return out
}

// Report is the Checker's verdict.
type Report struct {
	IDs      int64            // IDs checked
	Requests int64            // successful requests
	Workers  int              // distinct workers seen
	Problems map[string]int64 // by kind; empty when all is well
	Examples []string         // a few messages per kind
}

// OK reports whether no problem was found.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Count returns the number of problems of one kind.
func (r Report) Count(kind string) int64 { return r.Problems[kind] }

// String is a one-line summary and the examples.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d IDs in %d answers from %d workers; problems: %v", r.IDs, r.Requests, r.Workers, r.Problems)
	for _, e := range r.Examples {
		b.WriteString("\n  " + e)
	}
	return b.String()
}

// Verify runs the checks that need every ID (duplicates, real-time order
// per worker, restarts, workers shared by nodes) and returns the verdict
// including the problems Record found. It may be called more than once.
func (c *Checker) Verify() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	problems := maps.Clone(c.problems)
	examples := map[string][]string{}
	for k, v := range c.examples {
		examples[k] = slices.Clone(v)
	}
	add := func(kind, format string, args ...any) {
		problems[kind]++
		if len(examples[kind]) < maxExamples {
			examples[kind] = append(examples[kind], fmt.Sprintf(format, args...))
		}
	}

	// Group by worker.
	idsOf := map[int64][]int64{}
	batchesOf := map[int64][]batchMeta{}
	var requests int64
	for _, s := range c.streams {
		requests += int64(len(s.batches))
		i := 0
		for _, m := range s.batches {
			if m.worker >= 0 {
				idsOf[m.worker] = append(idsOf[m.worker], s.ids[i:i+m.n]...)
				batchesOf[m.worker] = append(batchesOf[m.worker], m)
			}
			i += m.n
		}
	}

	for w, ids := range idsOf {
		slices.Sort(ids)
		for i := 1; i < len(ids); i++ {
			if ids[i] == ids[i-1] {
				add(ProblemDuplicate, "worker %d: ID %d issued twice", w, ids[i])
			}
		}
		checkRealtime(w, batchesOf[w], add)
	}

	// Nodes and their workers: one worker per node (runs of one node key
	// keep it), never one worker for two nodes.
	nodeOfWorker := map[int64]string{}
	runs := slices.SortedFunc(maps.Keys(c.workers), func(a, b runKey) int {
		return cmp.Or(strings.Compare(a.node, b.node), cmp.Compare(a.incarnation, b.incarnation))
	})
	for _, run := range runs {
		w := c.workers[run]
		if n, ok := nodeOfWorker[w]; ok && n != run.node {
			add(ProblemWorker, "worker %d issued IDs on nodes %s and %s", w, n, run.node)
		}
		nodeOfWorker[w] = run.node
	}
	checkRestarts(c.streams, add)

	r := Report{IDs: c.ids, Requests: requests, Workers: len(idsOf), Problems: map[string]int64{}}
	kinds := slices.Sorted(maps.Keys(problems))
	for _, k := range kinds {
		if problems[k] > 0 {
			r.Problems[k] = problems[k]
			for _, e := range examples[k] {
				r.Examples = append(r.Examples, k+": "+e)
			}
		}
	}
	return r
}

// checkRealtime: for one worker, if an answer was fully received before a
// request was sent, every ID of that answer is below every ID of the later
// request (the generator's strict order, observed across clients).
func checkRealtime(w int64, bs []batchMeta, add func(kind, format string, args ...any)) {
	byRecv := slices.Clone(bs)
	sort.Slice(byRecv, func(i, j int) bool { return byRecv[i].recv < byRecv[j].recv })
	prefixMax := make([]int64, len(byRecv))
	for i, b := range byRecv {
		prefixMax[i] = b.max
		if i > 0 {
			prefixMax[i] = max(prefixMax[i], prefixMax[i-1])
		}
	}
	for _, b := range bs {
		// Answers received strictly before b was sent.
		n := sort.Search(len(byRecv), func(i int) bool { return byRecv[i].recv >= b.sent })
		if n > 0 && prefixMax[n-1] >= b.min {
			add(ProblemRealtimeOrder, "worker %d: request sent at %s got ID %d, but an answer received earlier held %d",
				w, b.sent, b.min, prefixMax[n-1])
		}
	}
}

// checkRestarts: for each node, every ID of a later process run is above
// every ID of the earlier runs.
func checkRestarts(streams map[streamKey]*stream, add func(kind, format string, args ...any)) {
	type span struct{ min, max int64 }
	spans := map[runKey]span{}
	for key, s := range streams {
		for _, m := range s.batches {
			if m.incarnation < 0 {
				continue
			}
			k := runKey{key.node, m.incarnation}
			sp, ok := spans[k]
			if !ok {
				sp = span{m.min, m.max}
			}
			spans[k] = span{min(sp.min, m.min), max(sp.max, m.max)}
		}
	}
	for k, sp := range spans {
		for e, esp := range spans {
			if e.node == k.node && e.incarnation < k.incarnation && esp.max >= sp.min {
				add(ProblemRestartFloor, "node %s: run %d issued %d, at or below %d of run %d",
					k.node, k.incarnation, sp.min, esp.max, e.incarnation)
			}
		}
	}
}
