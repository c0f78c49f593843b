package clockguard

import (
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// Readings is what /clock needs from clockguard; the node adds the generator's
// and ZooKeeper's figures. Parts whose check is not wired are nil and left
// out of the JSON.
type Readings struct {
	State  health.State  `json:"state"`
	Reason health.Reason `json:"reason"`
	Detail string        `json:"detail,omitempty"`
	Since  time.Time     `json:"since"`
	// Failing maps each failing check to its detail (empty when none fails).
	Failing map[health.Reason]string `json:"failing"`
	// Transitions counts transitions by the reason of the new state; entries
	// into service are under health.TransitionsInServiceKey.
	Transitions map[string]int64 `json:"transitions"`
	Watcher     *WatcherStats    `json:"watcher,omitempty"`
	NTP         *NTPSnapshot     `json:"ntp,omitempty"`
	Peers       *PeerSnapshot    `json:"peers,omitempty"`
}

// BuildReadings gathers the guard's state (read at one instant) and the
// figures of the checks given; any of w, n and p may be nil.
func BuildReadings(g *health.Guard, w *Watcher, n *NTP, p *Peers) Readings {
	s := g.Snapshot()
	r := Readings{
		State: s.Status.State, Reason: s.Status.Reason, Detail: s.Status.Detail, Since: s.Status.Since,
		Failing: s.Failing, Transitions: s.Transitions,
	}

	if w != nil {
		s := w.Stats()
		r.Watcher = &s
	}
	if n != nil {
		s := n.Snapshot()
		r.NTP = &s
	}
	if p != nil {
		s := p.Snapshot()
		r.Peers = &s
	}
	return r
}
