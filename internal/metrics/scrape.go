package metrics

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/internal/partstatus"
	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles"
)

// maxPeerSeries bounds the per-peer series of one scrape.
const maxPeerSeries = 256

// knownReasons are the transition reasons exported at zero before they first
// happen, so that rate() works from the start. "none" is entering service.
var knownReasons = []health.Reason{
	health.ReasonNone, health.ReasonStarting, health.ReasonStopping,
	health.ReasonClockBehindFence, health.ReasonClockRollback,
	health.ReasonNTPOffset, health.ReasonNTPUnreachable, health.ReasonPeerOffset,
	health.ReasonLeaseLost, health.ReasonZKFence, health.ReasonFencePersist,
	health.ReasonFenceReached, health.ReasonTimeOverflow, health.ReasonClockStalled,
	health.ReasonClockJump, health.ReasonBorrowExhausted, health.ReasonPrevHolderFence,
}

// reasonLabel is the label value of a reason: "none" for ReasonNone.
func reasonLabel(r health.Reason) string {
	if r == health.ReasonNone {
		return "none"
	}
	return string(r)
}

// transitionLabel is the label value of a key of Readings.Transitions,
// which counts entries into service under TransitionsInServiceKey.
func transitionLabel(key string) string {
	if key == health.TransitionsInServiceKey {
		return reasonLabel(health.ReasonNone)
	}
	return key
}

// family is one metric family: its name, type and help text.
type family struct{ name, typ, help string }

// The request path's families.
var (
	fIDs      = family{"snowflaked_ids_issued_total", "counter", "IDs issued by this node: snowflake IDs (single and batch) and dense segment IDs."}
	fRequests = family{"snowflaked_requests_total", "counter", "HTTP requests answered, by endpoint and status class."}
)

// The families read at scrape time.
var (
	fBuild     = family{"snowflaked_build_info", "gauge", "1, labelled with the build: version (-X main.version), revision (the VCS revision the binary was built from, unknown when not stamped) and goversion."}
	fWorkerID  = family{"snowflaked_worker_id", "gauge", "Worker ID this node issues IDs with."}
	fWorkerMax = family{"snowflaked_worker_id_max", "gauge", "Largest worker ID of the layout: the worker-ID space is 0..this."}
	fYearsLeft = family{"snowflaked_time_field_years_left", "gauge", "Years until the layout's timestamp field runs out (IDs fail after that)."}
	fSeqWaits  = family{"snowflaked_sequence_exhausted_waits_total", "counter", "Times a tick's sequence ran out and the generator waited for the next tick."}
	fWaitSecs  = family{"snowflaked_clock_wait_seconds_total", "counter", "Time the generator spent waiting on the clock (sequence exhausted or clock behind within tolerance)."}
	fRefusals  = family{"snowflaked_generator_refusals_total", "counter", "Requests the generator refused: cause=rollback (clock behind beyond tolerance), cause=fence (time fence reached), cause=borrow_exhausted (borrowing through a rollback reached the fence)."}
	fAhead     = family{"snowflaked_id_time_ahead_seconds", "gauge", "How far the time in the last issued ID is ahead of the clock (0 when it is not): how much of the fence headroom a rollback borrows."}
	fBorrowed  = family{"snowflaked_ids_borrowed_total", "counter", "IDs reserved while the clock was behind the last issued ID beyond --rollback-tolerance (--rollback-policy borrow; a batch refused halfway counts the part it reserved)."}
	fPolicy    = family{"snowflaked_rollback_policy", "gauge", "1 for the node's --rollback-policy (leave or borrow)."}
	fRollbacks = family{"snowflaked_clock_rollbacks_total", "counter", "Clock rollbacks by size class (each counted in one class): reported rollbacks beyond tolerance, merged per event, plus the generator's within-tolerance waits in the class of the tolerance."}
	fState     = family{"snowflaked_state", "gauge", "1 for the node's current service state, 0 for the others."}
	fStateAge  = family{"snowflaked_state_age_seconds", "gauge", "Seconds since the service state or its reason last changed."}
	fReason    = family{"snowflaked_state_reason", "gauge", "1 for the reason the node is not in service (none while in service), 0 for the others; every known reason is exported."}
	fTrans     = family{"snowflaked_transitions_total", "counter", "Service state transitions by the reason of the new state (none: entered service)."}
	fHeadroom  = family{"snowflaked_fence_headroom_seconds", "gauge", "Persisted time fence minus now: how long IDs can be issued without another fence write."}
	fPrevWait  = family{"snowflaked_prev_holder_fence_wait_seconds", "gauge", "At start, how long the node still waits for the previous holder's ZooKeeper fence (prev_holder_fence); 0 when it does not wait."}
	fWSteps    = family{"snowflaked_watcher_steps_total", "counter", "Wall-clock steps the wall/monotonic watcher saw, backward beyond tolerance or forward beyond its threshold."}
	fWLargest  = family{"snowflaked_watcher_largest_step_seconds", "gauge", "Largest wall-clock step the watcher saw, by direction."}
	fWChecks   = family{"snowflaked_watcher_checks_total", "counter", "Wall/monotonic comparisons the watcher made."}
	fNTPOn     = family{"snowflaked_ntp_enabled", "gauge", "1 when the NTP check is configured."}
	fNTPOffset = family{"snowflaked_ntp_offset_seconds", "gauge", "Last usable NTP answer: server time minus this node's clock."}
	fNTPRTT    = family{"snowflaked_ntp_rtt_seconds", "gauge", "Round-trip time of the last usable NTP answer."}
	fNTPAge    = family{"snowflaked_ntp_last_answer_age_seconds", "gauge", "Seconds since the last usable NTP answer."}
	fNTPRounds = family{"snowflaked_ntp_rounds_total", "counter", "NTP check rounds."}
	fNTPUnreac = family{"snowflaked_ntp_unreachable_rounds_total", "counter", "NTP rounds in which no server gave a usable answer."}
	fNTPFail   = family{"snowflaked_ntp_offset_failures_total", "counter", "NTP rounds whose offset was beyond --ntp-max-offset."}
	fNTPErrs   = family{"snowflaked_ntp_server_errors_total", "counter", "Failed NTP queries, including ones another server made up for."}
	fPeerOff   = family{"snowflaked_peer_offset_seconds", "gauge", "Peer clock minus this node's clock, RTT-corrected: the median over the node and its reachable peers (no labels), and per reachable peer."}
	fPeerRTT   = family{"snowflaked_peer_rtt_seconds", "gauge", "Round-trip time of the last /time request to each reachable peer."}
	fPeers     = family{"snowflaked_peers", "gauge", "Peers in the last peer check round, by status (the node itself not counted)."}
	fPeerSplit = family{"snowflaked_peer_split", "gauge", "1 when the last peer round found clocks that disagree with no majority either way (the node stays in service; NTP decides)."}
	fPeerRnds  = family{"snowflaked_peer_rounds_total", "counter", "Peer clock check rounds."}
	fPeerFail  = family{"snowflaked_peer_offset_failures_total", "counter", "Peer rounds in which a strict majority of the clocks was beyond --peer-max-offset of this node's (it was the outlier)."}
	fPeerUnr   = family{"snowflaked_peer_unreachable_total", "counter", "Failed /time requests to peers."}
	fPeerSrc   = family{"snowflaked_peer_source_errors_total", "counter", "Peer rounds that got no peer list."}
	fPeerLive  = family{"snowflaked_peers_live", "gauge", "Live peers under alive/ in the last round that got a peer list (the round asks a sample of them, --peer-sample)."}
	fPeerConf  = family{"snowflaked_peer_confirmations_total", "counter", "Peer rounds whose sample found this node the outlier without covering every live peer, so a second sample was asked."}
	fPeerUnc   = family{"snowflaked_peer_unconfirmed_total", "counter", "Of those, rounds whose second sample did not find this node the outlier: a removal avoided."}
	fPeerWide  = family{"snowflaked_peer_wide_rounds_total", "counter", "Re-checks, while the peer check kept this node out, that asked wide samples (up to 4 x --peer-sample)."}
	fPeerHeld  = family{"snowflaked_peer_returns_held_total", "counter", "Of those, re-checks whose first wide sample cleared this node and whose second did not: a return avoided."}
	fZKConn    = family{"snowflaked_zk_connected", "gauge", "1 while the ZooKeeper session is established."}
	fZKLease   = family{"snowflaked_zk_lease_held", "gauge", "1 while this node holds its worker ID's lease."}
	fZKAlive   = family{"snowflaked_zk_alive", "gauge", "1 while this node's alive znode exists (in service for clients)."}
	fZKCache   = family{"snowflaked_zk_from_cache", "gauge", "1 while serving a cached worker ID ZooKeeper has not confirmed yet."}
	fZKReports = family{"snowflaked_zk_reports_total", "counter", "ZooKeeper fence renewals (with last_ts) that reached ZooKeeper."}
	fZKRepFail = family{"snowflaked_zk_report_failures_total", "counter", "ZooKeeper fence renewals that failed, by cause (connection, taken_over, deleted, held, other)."}
	fRepAge    = family{"snowflaked_last_report_age_seconds", "gauge", "Seconds since the last renewal reached ZooKeeper (absent before the first)."}
	fZKFence   = family{"snowflaked_zk_fence_headroom_seconds", "gauge", "ZooKeeper-acknowledged fence minus now: IDs stop when it reaches 0; zk_fence takes the node out below a third of --zk-fence-ahead (absent before any fence)."}
	fZKAhead   = family{"snowflaked_zk_fence_ahead_seconds", "gauge", "--zk-fence-ahead: how far ahead of now each renewal moves the ZooKeeper fence."}
	fTLSFails  = family{"snowflaked_tls_handshake_failures_total", "counter", "Failed TLS handshakes on the API's port (--tls-cert) by reason: not_tls (plain HTTP), no_client_cert, bad_client_cert (not verified by --tls-client-ca), other."}
)

// expo builds exposition text; each family's samples must be added together.
type expo struct {
	b    []byte
	last string // family whose header was written last
}

// add writes one sample of f, with label name/value pairs, writing f's
// HELP and TYPE lines first if f is new.
func (e *expo) add(f family, v float64, labels ...string) {
	e.series(f, labels)
	e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
	e.b = append(e.b, '\n')
}

// addUint is add for a counter kept as an integer: exact beyond 2^53.
func (e *expo) addUint(f family, v uint64, labels ...string) {
	e.series(f, labels)
	e.b = strconv.AppendUint(e.b, v, 10)
	e.b = append(e.b, '\n')
}

// header writes f's HELP and TYPE lines.
func (e *expo) header(f family) {
	e.b = append(e.b, "# HELP "...)
	e.b = append(e.b, f.name...)
	e.b = append(e.b, ' ')
	e.b = append(e.b, f.help...)
	e.b = append(e.b, "\n# TYPE "...)
	e.b = append(e.b, f.name...)
	e.b = append(e.b, ' ')
	e.b = append(e.b, f.typ...)
	e.b = append(e.b, '\n')
	e.last = f.name
}

// addPart writes one sample of f's series name+suffix (a histogram's
// _bucket, _sum or _count, a summary's _sum or _count), writing f's HELP and
// TYPE lines first if f is new.
func (e *expo) addPart(f family, suffix string, v float64, labels ...string) {
	e.seriesPart(f, suffix, labels)
	e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
	e.b = append(e.b, '\n')
}

// addPartUint is addPart for a count.
func (e *expo) addPartUint(f family, suffix string, v uint64, labels ...string) {
	e.seriesPart(f, suffix, labels)
	e.b = strconv.AppendUint(e.b, v, 10)
	e.b = append(e.b, '\n')
}

// series writes f's HELP and TYPE lines if f is new, then the series name
// with its labels and the space before the value.
func (e *expo) series(f family, labels []string) { e.seriesPart(f, "", labels) }

// seriesPart is series for the series name+suffix of f.
func (e *expo) seriesPart(f family, suffix string, labels []string) {
	if e.last != f.name {
		e.header(f)
	}
	e.b = append(e.b, f.name...)
	e.b = append(e.b, suffix...)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			e.b = append(e.b, '{')
		} else {
			e.b = append(e.b, ',')
		}
		e.b = append(e.b, labels[i]...)
		e.b = append(e.b, `="`...)
		e.b = appendLabelValue(e.b, labels[i+1])
		e.b = append(e.b, '"')
	}
	if len(labels) >= 2 {
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ' ')
}

// appendLabelValue escapes a label value as the text format wants:
// backslash, double quote and line feed.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// unknown is the label value of a build fact that is not known.
const unknown = "unknown"

// orUnknown is v, or unknown when v is empty.
func orUnknown(v string) string {
	if v == "" {
		return unknown
	}
	return v
}

// buildRevision is the VCS revision the Go toolchain stamped into the
// binary (vcs.revision, with "-dirty" when vcs.modified), unknown when it
// did not (built outside a checkout, -buildvcs=false, test binaries).
func buildRevision(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return unknown
	}
	var rev string
	var dirty bool
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			dirty = kv.Value == "true"
		}
	}
	if rev == "" {
		return unknown
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func secs(d time.Duration) float64 { return d.Seconds() }

// secondsPerYear is the length of a Julian year.
const secondsPerYear = 365.25 * 24 * 3600

// writeRequests writes the request path's counters.
func (m *Metrics) writeRequests(e *expo) {
	e.addUint(fIDs, m.ids.Load())
	for i, ep := range endpoint.Labels {
		for c, class := range statusClasses {
			e.addUint(fRequests, m.requests[i*numClasses+c].Load(), "endpoint", ep, "code", class)
		}
	}
}

// writeSnapshot takes one snapshot of the node and writes the families
// read from it.
func (m *Metrics) writeSnapshot(e *expo) {
	s := m.snapshot()
	nowNs := s.Now.UnixNano()
	e.add(fBuild, 1, "version", orUnknown(s.BuildVersion), "revision", m.revision, "goversion", runtime.Version())
	m.writeGenerator(e, &s, nowNs)
	writeGuard(e, &s.Readings, s.Now)
	if s.Fence > 0 {
		e.add(fHeadroom, float64(int64(s.Fence)*int64(time.Millisecond)-nowNs)/1e9)
	}
	if s.ZK != nil {
		e.add(fPrevWait, secs(s.PrevHolderWait))
	}
	if s.Watcher != nil {
		writeWatcher(e, *s.Watcher)
	}
	if s.NTP != nil {
		writeNTP(e, *s.NTP, s.Now)
	}
	if s.Peers != nil {
		writePeers(e, *s.Peers)
	}
	if s.ZK != nil {
		writeZK(e, s.ZK)
	}
	if s.Segments != nil {
		writeSegments(e, s.Segments)
		e.add(fSegPossiblyLost, float64(s.PossiblyLost))
	}
	for i, n := range s.TLSHandshakeFailures {
		if i < len(tlsfiles.Reasons) {
			e.addUint(fTLSFails, n, "reason", tlsfiles.Reasons[i])
		}
	}
}

func (m *Metrics) writeGenerator(e *expo, s *nodestate.Snapshot, nowNs int64) {
	g := s.Generator
	st := g.Stats
	e.add(fWorkerID, float64(s.WorkerID))
	e.add(fWorkerMax, float64(s.Layout.MaxWorkerID()))
	end := s.Layout.End()
	e.add(fYearsLeft, (float64(end.Unix())-float64(nowNs)/1e9)/secondsPerYear)
	e.add(fSeqWaits, float64(st.SequenceWaits))
	e.add(fWaitSecs, secs(st.Waited))
	e.add(fRefusals, float64(st.Rollbacks), "cause", "rollback")
	e.add(fRefusals, float64(st.FenceHits), "cause", "fence")
	e.add(fRefusals, float64(st.BorrowExhausted), "cause", "borrow_exhausted")
	e.add(fAhead, secs(g.Behind))
	e.add(fBorrowed, float64(st.Borrowed))
	if m.policy != "" {
		e.add(fPolicy, 1, "policy", m.policy)
	}
	for i, size := range rollbackSizes {
		n := m.rollbacks[i].Load()
		if i == m.tolerance && st.RollbackWaits > 0 {
			n += uint64(st.RollbackWaits)
		}
		e.add(fRollbacks, float64(n), "size", size)
	}
}

// writeGuard writes the state, reason and transition families. Every known
// reason is exported, then any other that counted a transition or is the
// current one, sorted by label.
func writeGuard(e *expo, r *clockguard.Readings, now time.Time) {
	for _, s := range health.States {
		e.add(fState, b2f(s == r.State), "state", s.String())
	}
	if !r.Since.IsZero() {
		e.add(fStateAge, max(now.Sub(r.Since).Seconds(), 0))
	}
	current := reasonLabel(r.Reason)
	labels := make([]string, 0, len(knownReasons)+len(r.Transitions)+1)
	for _, k := range knownReasons {
		labels = append(labels, reasonLabel(k))
	}
	counts := make(map[string]int64, len(r.Transitions))
	for key, n := range r.Transitions {
		l := transitionLabel(key)
		counts[l] += n
		if !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	if !slices.Contains(labels, current) {
		labels = append(labels, current)
	}
	slices.Sort(labels)
	for _, l := range labels {
		e.add(fReason, b2f(l == current), "reason", l)
	}
	for _, l := range labels {
		e.add(fTrans, float64(counts[l]), "reason", l)
	}
}

func writeWatcher(e *expo, st clockguard.WatcherStats) {
	e.add(fWSteps, float64(st.BackwardSteps), "direction", "backward")
	e.add(fWSteps, float64(st.ForwardSteps), "direction", "forward")
	e.add(fWLargest, secs(st.LargestBackward), "direction", "backward")
	e.add(fWLargest, secs(st.LargestForward), "direction", "forward")
	e.add(fWChecks, float64(st.Checks))
}

func writeNTP(e *expo, s clockguard.NTPSnapshot, now time.Time) {
	e.add(fNTPOn, b2f(s.Enabled))
	if !s.Enabled {
		return
	}
	if s.Last != nil {
		e.add(fNTPOffset, secs(s.Last.Offset))
		e.add(fNTPRTT, secs(s.Last.RTT))
		e.add(fNTPAge, max(now.Sub(s.Last.CheckedAt).Seconds(), 0))
	}
	e.add(fNTPRounds, float64(s.Rounds))
	e.add(fNTPUnreac, float64(s.UnreachableRounds))
	e.add(fNTPFail, float64(s.OffsetFailures))
	e.add(fNTPErrs, float64(s.ServerErrors))
}

func writePeers(e *expo, s clockguard.PeerSnapshot) {
	reachable := make([]clockguard.PeerResult, 0, len(s.Peers))
	for _, p := range s.Peers {
		if p.Reachable() && len(reachable) < maxPeerSeries {
			reachable = append(reachable, p)
		}
	}
	if s.Reachable > 0 {
		e.add(fPeerOff, secs(s.Median))
	}
	for _, p := range reachable {
		e.add(fPeerOff, secs(p.Offset), "peer", p.Addr, "worker_id", strconv.FormatInt(p.WorkerID, 10))
	}
	for _, p := range reachable {
		e.add(fPeerRTT, secs(p.RTT), "peer", p.Addr, "worker_id", strconv.FormatInt(p.WorkerID, 10))
	}
	if !s.CheckedAt.IsZero() {
		e.add(fPeers, float64(s.Reachable), "status", "reachable")
		e.add(fPeers, float64(s.Unreachable), "status", "unreachable")
	}
	e.add(fPeerSplit, b2f(s.Split))
	e.add(fPeerRnds, float64(s.Rounds))
	e.add(fPeerFail, float64(s.OffsetFailures))
	e.add(fPeerUnr, float64(s.UnreachablePeers))
	e.add(fPeerSrc, float64(s.SourceErrors))
	e.add(fPeerLive, float64(s.LivePeers))
	e.add(fPeerConf, float64(s.Confirmations))
	e.add(fPeerUnc, float64(s.Unconfirmed))
	e.add(fPeerWide, float64(s.WideRounds))
	e.add(fPeerHeld, float64(s.ReturnsHeld))
}

// renewalCauses are the causes of coordinator.Status.FailuresByCause, each
// exported (0 included) so rates and alerts need no absent() guards.
var renewalCauses = []string{"connection", "taken_over", "deleted", "held", "other"}

func writeZK(e *expo, st *partstatus.ZK) {
	e.add(fZKConn, b2f(st.Connected))
	e.add(fZKLease, b2f(st.LeaseHeld))
	e.add(fZKAlive, b2f(st.AlivePresent))
	e.add(fZKCache, b2f(st.FromCache))
	e.add(fZKReports, float64(st.Reports))
	for _, cause := range renewalCauses {
		e.add(fZKRepFail, float64(st.FailuresByCause[cause]), "cause", cause)
	}
	if st.ZKFence > 0 {
		e.add(fZKFence, float64(st.ZKFenceHeadroomMs)/1e3)
	}
	e.add(fZKAhead, float64(st.ZKFenceAheadMs)/1e3)
	if st.LastReportAgeMs >= 0 {
		e.add(fRepAge, float64(st.LastReportAgeMs)/1e3)
	}
}

// maxTagSeries bounds the per-tag series of one scrape.
const maxTagSeries = 256

// The segment-mode families, one series per tag this node serves.
var (
	fSegIssued = family{"snowflaked_segment_issued_total", "counter", "Dense IDs of the tag this node handed to callers since it started."}
	fSegLoads  = family{"snowflaked_segment_range_loads_total", "counter", "Ranges of the tag this node loaded from ZooKeeper (returned ranges or compare-and-set on max_id)."}
	fSegLoadS  = family{"snowflaked_segment_last_load_seconds", "gauge", "How long the last range load of the tag took."}
	fSegAvail  = family{"snowflaked_segment_available", "gauge", "IDs of the tag this node holds in memory (current and next buffer)."}
	fSegStep   = family{"snowflaked_segment_step", "gauge", "The tag's step for this node's next load (Leaf's dynamic step)."}
	fSegAhead  = family{"snowflaked_segment_mark_ahead", "gauge", "IDs past the last issued that the state file no longer lists: what a kill -9 now would lose."}
	fSegWasted = family{"snowflaked_segment_wasted_total", "counter", "IDs of the tag this node knows it lost (ranges it could not return)."}
	// fTokensRefused: one series per reason of each tag that requires a
	// token (tags are made by operators, so the label stays bounded).
	fTokensRefused = family{"snowflaked_tokens_refused_total", "counter", "Requests for the tag refused for its token, by reason: token_required (none sent), token_invalid (a wrong or expired one)."}
	// fSegPossiblyLost has no tag label: the store counts for every tag.
	fSegPossiblyLost = family{"snowflaked_segment_possibly_lost_total", "counter", "Dense IDs of ranges whose allocation or take had an unknown outcome (ZooKeeper's answer lost): maybe lost, never issued twice."}
)

func writeSegments(e *expo, tags []partstatus.Tag) {
	if len(tags) > maxTagSeries {
		tags = tags[:maxTagSeries]
	}
	for _, f := range []struct {
		fam family
		v   func(partstatus.Tag) float64
	}{
		{fSegIssued, func(t partstatus.Tag) float64 { return float64(t.Issued) }},
		{fSegLoads, func(t partstatus.Tag) float64 { return float64(t.Loads) }},
		{fSegLoadS, func(t partstatus.Tag) float64 { return t.LastLoad }},
		{fSegAvail, func(t partstatus.Tag) float64 { return float64(t.Available) }},
		{fSegStep, func(t partstatus.Tag) float64 { return float64(t.Step) }},
		{fSegAhead, func(t partstatus.Tag) float64 { return float64(t.Ahead) }},
		{fSegWasted, func(t partstatus.Tag) float64 { return float64(t.Wasted) }},
	} {
		for _, t := range tags {
			e.add(f.fam, f.v(t), "tag", t.Tag)
		}
	}
	for _, t := range tags {
		if t.Token {
			e.add(fTokensRefused, float64(t.RefusedRequired), "tag", t.Tag, "reason", "token_required")
			e.add(fTokensRefused, float64(t.RefusedInvalid), "tag", t.Tag, "reason", "token_invalid")
		}
	}
}
