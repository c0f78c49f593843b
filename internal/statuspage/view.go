package statuspage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/ctxlock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// view is everything the template shows; every string is plain text that
// the template escapes.
type view struct {
	Title       string
	GeneratedAt string
	Refresh     int   // seconds; 0: no automatic reload
	Refreshes   []int // the reload periods the page offers links to
	Standalone  bool  // no cluster: no cluster table
	Self        selfView
	ListError   string
	Rows        []row
	Nodes       int
	InService   int
	Flagged     int
	NTPMax      string
	PeerMax     string
	ReportMax   string
	// Total counts the cluster's nodes (forever znodes) in ZooKeeper;
	// Limit is the view's page size. Rows holds at most Limit of them (and
	// this node, when it is not among them).
	Total int
	Limit int
	More  int // the page size that lists the most: min(Total, the largest limit)
}

// selfView is the top of the page.
type selfView struct {
	NodeKey    string
	Addr       string
	Mode       string
	Cluster    string
	Version    string
	Layout     string
	WorkerID   int64
	State      string
	StateClass string // ok, warn, bad
	Reason     string
	Detail     string
	Since      string
	Fence      string
	FenceNote  string
	NTP        cell
	ZK         string
	ZKFence    string // ZooKeeper mode: the acknowledged fence and its headroom
	// TLS, when the node serves HTTPS, counts its refused handshakes by
	// reason ("" without --tls-cert).
	TLS string
	// Segments: segment mode's tags (ShowSegments false in standalone mode).
	ShowSegments bool
	Segments     []segment.TagStatus
}

// row is one node of the cluster table.
type row struct {
	Self      bool
	Running   bool // holds its lease or is in service: a process is there
	LeaseHeld bool
	Ask       bool // ask its /clock: running, or its lease went recently
	Down      bool // stopped cleanly, or gone: greyed
	stopped   bool // its znode says it stopped cleanly (it is asked whether it runs again)
	WorkerID  string
	NodeKey   string
	Addr      string
	InService bool
	State     string
	Reason    string
	Detail    string
	NTP       cell
	Peer      cell
	Report    cell
	ZKFence   cell // headroom of the ZooKeeper fence
	Note      string
}

// cell is one figure; Over marks it beyond its threshold.
type cell struct {
	Text  string
	Title string
	Over  bool
}

// Flagged reports whether any of the row's figures is beyond its threshold.
func (r row) Flagged() bool { return r.NTP.Over || r.Peer.Over || r.Report.Over || r.ZKFence.Over }

// unknown is how the page shows a figure it does not have.
const unknown = "—"

// build gathers the view: this node, a page of at most limit workers,
// and the peers' /clock.
func (p *Page) build(ctx context.Context, limit int) view {
	self := p.cfg.Source.Self()
	nowNs := p.cfg.Clock.WallNanos()
	now := time.Unix(0, nowNs).UTC()
	v := view{
		Title:       "snowflaked status: " + self.NodeKey,
		GeneratedAt: now.Format("2006-01-02 15:04:05.000") + " UTC",
		Refreshes:   []int{0, 5, 30},
		Standalone:  self.Mode == nodestate.ModeStandalone,
		Self:        p.selfView(self, now),
		NTPMax:      p.cfg.NTPMaxOffset.String(),
		PeerMax:     p.cfg.PeerMaxOffset.String(),
		ReportMax:   p.cfg.MaxReportAge.String(),
	}
	if v.Standalone {
		return v // the card above says everything: no cluster to list
	}
	lctx, cancel := clock.WithTimeout(ctx, p.cfg.ListTimeout)
	workers, total, err := p.workers(lctx, limit)
	cancel()
	if err != nil {
		v.ListError = fmt.Sprintf("The cluster's worker list is unavailable: %v", err)
	}
	v.Total, v.Limit, v.More = total, limit, min(total, coordinator.MaxWorkerPageLimit)

	selfFound := false
	rows := make([]row, 0, len(workers)+1)
	for _, w := range workers {
		r := p.workerRow(w, now)
		if !selfFound && w.WorkerID == self.WorkerID && (self.NodeKey == "" || w.NodeKey == self.NodeKey) {
			selfFound = true
			r.Self = true
			p.fillSelf(&r, self)
		}
		rows = append(rows, r)
	}
	if !selfFound {
		r := row{Self: true, Running: true, LeaseHeld: self.ZK != nil && self.ZK.LeaseHeld, WorkerID: strconv.FormatInt(self.WorkerID, 10), NodeKey: self.NodeKey, Addr: self.Addr,
			Report: p.reportCell(selfReportAge(self), true)}
		p.fillSelf(&r, self)
		if len(workers) > 0 {
			r.Note = "not in the cluster's worker list"
		}
		rows = append([]row{r}, rows...)
	}
	p.fetchAll(ctx, rows, self.Peers)
	v.Rows = rows
	for _, r := range rows {
		v.Nodes++
		if r.InService {
			v.InService++
		}
		if r.Flagged() {
			v.Flagged++
		}
	}
	return v
}

// workers lists at most limit workers and the cluster's total: a page
// from a WorkerPager source, else the first limit of Workers.
func (p *Page) workers(ctx context.Context, limit int) ([]coordinator.WorkerInfo, int, error) {
	if pg, ok := p.cfg.Source.(WorkerPager); ok {
		page, err := pg.WorkerPage(ctx, limit)
		return page.Workers[:min(len(page.Workers), limit)], max(page.Total, len(page.Workers)), err
	}
	rows, err := p.cfg.Source.Workers(ctx)
	return rows[:min(len(rows), limit)], len(rows), err
}

// selfReportAge is this node's last report age in ms (-1: none known).
func selfReportAge(self nodestate.Snapshot) int64 {
	if self.ZK == nil {
		return -1
	}
	return self.ZK.LastReportAgeMs
}

func (p *Page) selfView(self nodestate.Snapshot, now time.Time) selfView {
	s := selfView{
		NodeKey: self.NodeKey, Addr: self.Addr, Mode: self.Mode, WorkerID: self.WorkerID,
		Cluster: self.Cluster, Version: self.Version, Layout: self.Layout.Describe(),
		State: self.State.String(), StateClass: stateClass(self.State),
		Reason: string(self.Reason), Detail: self.Detail,
		NTP: p.ntpCell(self.NTP),
	}
	if !self.Since.IsZero() {
		s.Since = self.Since.UTC().Format("2006-01-02 15:04:05") + " UTC (" + ago(now.Sub(self.Since)) + ")"
	}
	if self.Fence > 0 {
		fence := self.Fence.Time()
		s.Fence = fmt.Sprintf("%s UTC (%d ms since the Unix epoch)", fence.Format("2006-01-02 15:04:05.000"), self.Fence)
		if d := fence.Sub(now); d >= 0 {
			s.FenceNote = roundDur(d).String() + " ahead of the clock"
		} else {
			s.FenceNote = roundDur(-d).String() + " behind the clock: no IDs until the fence is extended"
		}
	} else {
		s.Fence = "none persisted yet"
	}
	s.ShowSegments, s.Segments = self.Segments != nil, self.Segments
	if f := self.TLSHandshakeFailures; f != nil {
		var parts []string
		for i, reason := range tlsfiles.Reasons {
			if i < len(f) {
				parts = append(parts, fmt.Sprintf("%s %d", reason, f[i]))
			}
		}
		s.TLS = "HTTPS; refused handshakes since start: " + strings.Join(parts, ", ")
	}
	if self.ZK != nil {
		z := self.ZK
		if z.ZKFence > 0 {
			s.ZKFence = fmt.Sprintf("%s UTC, %s ahead of the clock (renewed to now + %s; out of service below a third of it)",
				z.ZKFence.Time().UTC().Format("2006-01-02 15:04:05.000"),
				roundDur(time.Duration(z.ZKFenceHeadroomMs)*time.Millisecond), time.Duration(z.ZKFenceAheadMs)*time.Millisecond)
			if z.ZKFenceHeadroomMs < 0 {
				s.ZKFence = fmt.Sprintf("%s UTC, passed %s ago: no IDs until a renewal reaches ZooKeeper",
					z.ZKFence.Time().UTC().Format("2006-01-02 15:04:05.000"), roundAge(time.Duration(-z.ZKFenceHeadroomMs)*time.Millisecond).String())
			}
		} else {
			s.ZKFence = "none acknowledged"
		}
		s.ZK = z.SessionState
		if z.SessionID != "" {
			s.ZK += " (session " + z.SessionID + ")"
		}
		if z.LeaseHeld {
			s.ZK += ", lease held"
		} else {
			s.ZK += ", lease not held"
			if z.LeaseDetail != "" {
				s.ZK += ": " + z.LeaseDetail
			}
		}
	}
	return s
}

func stateClass(s health.State) string {
	switch s {
	case health.InService:
		return "ok"
	case health.OutOfService:
		return "bad"
	}
	return "warn"
}

// workerRow is a row as ZooKeeper describes the worker.
func (p *Page) workerRow(w coordinator.WorkerInfo, now time.Time) row {
	r := row{
		WorkerID: strconv.FormatInt(w.WorkerID, 10), NodeKey: w.NodeKey, Addr: w.Addr,
		InService: w.InService, Running: w.InService || w.LeaseHeld, LeaseHeld: w.LeaseHeld,
		State: unknown, NTP: cell{Text: unknown}, Peer: cell{Text: unknown},
		Note: w.Problem,
	}
	if w.WorkerID < 0 {
		r.WorkerID = "none"
	}
	if w.LeaseHolder != "" {
		r.Note = joinNote(r.Note, "lease held by "+w.LeaseHolder)
	}
	age := time.Duration(w.LastReportAgeMs) * time.Millisecond
	switch {
	case r.Running:
		r.Ask = true
	case w.Stopped && w.LastReportAgeMs >= 0 && age <= p.cfg.GoneAfter:
		// Stopped cleanly, lately: it may have been restarted since,
		// without ZooKeeper yet (serving from its cache file). Its /clock
		// tells; silent, it is stopped.
		r.State, r.Ask, r.stopped = "stopped", true, true
	case w.Stopped:
		r.State, r.Down = "stopped", true
		r.Note = joinNote(r.Note, "stopped cleanly: its last write to ZooKeeper was its final fence")
	case w.LastReportAgeMs >= 0 && age <= p.cfg.GoneAfter:
		// The lease went recently without a final fence: killed, frozen or
		// cut off from ZooKeeper, or restarting. Its /clock tells.
		r.State, r.Ask = "no lease", true
	default:
		r.State, r.Down = "gone", true
		if w.LastReportAgeMs < 0 {
			r.Note = joinNote(r.Note, "holds no lease and never reported")
		} else {
			r.Note = joinNote(r.Note, "holds no lease; no report for "+roundAge(age).String()+" (over "+p.cfg.GoneAfter.String()+"): not asked")
		}
	}
	r.Report = p.reportCell(w.LastReportAgeMs, r.Ask && !r.stopped)
	if note := w.ClockNote(); note != "" {
		r.Note = joinNote(r.Note, note+" (at its last report)")
	}
	if r.Report.Over {
		r.Note = joinNote(r.Note, fmt.Sprintf("report overdue: the last one is %s old, over the %s limit", roundAge(age), p.cfg.MaxReportAge))
	}
	r.ZKFence = zkFenceCell(w.Fence, now, r.Running)
	return r
}

// zkFenceCell shows a worker's ZooKeeper fence as headroom: how long its
// holder may still issue IDs without another renewal. A running node whose
// fence has passed issues nothing: over.
func zkFenceCell(at snowflake.UnixMilli, now time.Time, running bool) cell {
	if at <= 0 {
		return cell{Text: "none"}
	}
	fence := at.Time()
	c := cell{Title: fence.Format("2006-01-02 15:04:05.000") + " UTC"}
	if d := fence.Sub(now); d >= 0 {
		c.Text = "+" + roundDur(d).String()
	} else {
		c.Text = "passed " + roundAge(-d).String() + " ago"
		c.Over = running
	}
	return c
}

// fillSelf fills a row from this node's own view: no request needed.
func (p *Page) fillSelf(r *row, self nodestate.Snapshot) {
	// This node runs, whatever its znode said last (e.g. "stopped" before
	// a restart without ZooKeeper).
	r.Down, r.stopped, r.Ask = false, false, false
	r.Report = p.reportCell(selfReportAge(self), true)
	r.State = self.State.String()
	r.Reason = string(self.Reason)
	r.Detail = self.Detail
	r.InService = self.State == health.InService
	r.Running = true
	r.NTP = p.ntpCell(self.NTP)
	r.Peer = cell{Text: "this node"}
	if r.Addr == "" {
		r.Addr = self.Addr
	}
}

// fetchAll asks every running peer for its /clock, at most Concurrency at a
// time and MaxFetch in all, and fills their rows; their offsets come from
// peers, the clock guard's last peer round.
func (p *Page) fetchAll(ctx context.Context, rows []row, peers *clockguard.PeerSnapshot) {
	sem := ctxlock.NewSemaphore(p.cfg.Concurrency)
	var wg sync.WaitGroup
	asked := 0
	for i := range rows {
		r := &rows[i]
		if r.Self || !r.Ask {
			continue
		}
		if r.Addr == "" {
			r.Note = joinNote(r.Note, "no address to ask")
			continue
		}
		if asked == p.cfg.MaxFetch {
			r.Note = joinNote(r.Note, fmt.Sprintf("not asked: a view asks at most %d peers", p.cfg.MaxFetch))
			continue
		}
		asked++
		if err := sem.Acquire(ctx); err != nil {
			r.Note = joinNote(r.Note, "not asked: "+err.Error())
			continue
		}
		wg.Go(func() {
			defer sem.Release()
			p.fillPeer(r, p.fetchClock(ctx, r.Addr), peers)
		})
	}
	wg.Wait()
}

// fillPeer fills a row from a peer's /clock answer and its offset from
// the clock guard's last peer round.
func (p *Page) fillPeer(r *row, f fetched, peers *clockguard.PeerSnapshot) {
	if f.err != nil && r.stopped {
		r.Down = true
		r.Note = joinNote(r.Note, "stopped cleanly: its last write to ZooKeeper was its final fence")
		return
	}
	if f.err != nil {
		r.State = "unreachable"
		switch {
		case r.LeaseHeld:
			r.Note = joinNote(r.Note, "holds its lease but does not answer: frozen, overloaded or cut off")
		case !r.InService:
			r.Note = joinNote(r.Note, "holds no lease and does not answer: killed without its final fence write, frozen, or cut off")
		}
		r.Note = joinNote(r.Note, f.err.Error())
		return
	}
	d := f.doc
	r.State, r.Reason, r.Detail = orUnknown(d.State), d.Reason, d.Detail
	r.NTP = p.ntpCell(d.NTP)
	r.Peer = p.peerCell(peers, r.WorkerID)
	if d.NowMs <= 0 {
		r.Note = joinNote(r.Note, "its /clock has no now_ms")
	}
	if d.WorkerID != nil && strconv.FormatInt(*d.WorkerID, 10) != r.WorkerID {
		r.Note = joinNote(r.Note, fmt.Sprintf("answers as worker %d", *d.WorkerID))
	}
}

// peerCell shows a peer's clock minus this node's as the clock guard's last
// peer round measured it (the sample with the lowest of its round trips,
// corrected for half of it). A peer that round did not reach, or did not
// sample (it asks a few peers per round), has no figure.
func (p *Page) peerCell(peers *clockguard.PeerSnapshot, workerID string) cell {
	none := cell{Text: unknown, Title: "not measured by this node's last peer round (it asks a sample of the peers)"}
	if peers == nil {
		return none
	}
	for _, res := range peers.Peers {
		if strconv.FormatInt(res.WorkerID, 10) != workerID || !res.Reachable() {
			continue
		}
		c := p.offsetCell(res.Offset, p.cfg.PeerMaxOffset)
		c.Title = fmt.Sprintf("peer clock minus this node's, measured by this node's last peer round at %s, corrected for half of the %s round trip; %s",
			res.CheckedAt.UTC().Format("15:04:05"), roundDur(res.RTT), c.Title)
		return c
	}
	return none
}

// ntpCell shows a node's clock minus NTP time (the NTP offset negated:
// positive when the node is ahead).
func (p *Page) ntpCell(s *clockguard.NTPSnapshot) cell {
	switch {
	case s == nil:
		return cell{Text: unknown, Title: "no NTP figures"}
	case !s.Enabled:
		return cell{Text: "off", Title: "the NTP check is disabled"}
	case s.Last == nil:
		c := cell{Text: "no answer yet"}
		if s.LastError != "" {
			c.Title = s.LastError
		}
		return c
	}
	c := p.offsetCell(-s.Last.Offset, p.cfg.NTPMaxOffset)
	c.Title = fmt.Sprintf("clock minus %s, checked %s UTC; %s", s.Last.Server, s.Last.CheckedAt.UTC().Format("15:04:05"), c.Title)
	return c
}

// offsetCell formats an offset and marks it beyond max.
func (p *Page) offsetCell(d, max time.Duration) cell {
	c := cell{Text: signed(d), Over: abs(d) > max}
	if c.Over {
		c.Title = "beyond the " + max.String() + " threshold"
	} else {
		c.Title = "within the " + max.String() + " threshold"
	}
	return c
}

// reportCell shows the age of the last report to ZooKeeper; a running
// node's is marked when older than MaxReportAge.
func (p *Page) reportCell(ageMs int64, running bool) cell {
	if ageMs < 0 {
		return cell{Text: "never"}
	}
	age := time.Duration(ageMs) * time.Millisecond
	c := cell{Text: ago(age)}
	if running && age > p.cfg.MaxReportAge {
		c.Over = true
		c.Title = "older than " + p.cfg.MaxReportAge.String()
	}
	return c
}

func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// roundDur rounds d to a precision fit for reading: µs below 1ms, 0.1ms
// below 1s, ms above.
func roundDur(d time.Duration) time.Duration {
	switch a := abs(d); {
	case a < time.Millisecond:
		return d.Round(time.Microsecond)
	case a < time.Second:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// roundAge rounds an age for reading: like roundDur below a minute, to the
// second above.
func roundAge(d time.Duration) time.Duration {
	if abs(d) < time.Minute {
		return roundDur(d)
	}
	return d.Round(time.Second)
}

// ago formats an age ("1.2s ago"). A negative one (an instant after this
// node's now: its clock was set back since) is said as such, never as a
// negative age.
func ago(d time.Duration) string {
	if d < 0 {
		return roundAge(-d).String() + " in the future by this node's clock: set back since?"
	}
	return roundAge(d).String() + " ago"
}

// signed formats an offset with its sign ("+12.3ms", "-1.5s", "0s").
func signed(d time.Duration) string {
	d = roundDur(d)
	if d > 0 {
		return "+" + d.String()
	}
	return d.String()
}
