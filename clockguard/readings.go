package clockguard

import "time"

// TransitionsInServiceKey is the key under which Report.Transitions counts
// entries into service (ReasonNone, which would be an empty JSON key).
const TransitionsInServiceKey = "in_service"

// Readings is what /clock needs from clockguard; the node adds the generator's
// and ZooKeeper's figures. Parts whose check is not wired are nil and left
// out of the JSON.
type Readings struct {
	State  State     `json:"state"`
	Reason Reason    `json:"reason"`
	Detail string    `json:"detail,omitempty"`
	Since  time.Time `json:"since"`
	// Failing maps each failing check to its detail (empty when none fails).
	Failing map[Reason]string `json:"failing"`
	// Transitions counts transitions by the reason of the new state; entries
	// into service are under TransitionsInServiceKey.
	Transitions map[string]int64 `json:"transitions"`
	Watcher     *WatcherStats    `json:"watcher,omitempty"`
	NTP         *NTPSnapshot     `json:"ntp,omitempty"`
	Peers       *PeerSnapshot    `json:"peers,omitempty"`
}

// BuildReadings gathers the guard's state (read at one instant) and the
// figures of the checks given; any of w, n and p may be nil.
func BuildReadings(g *Guard, w *Watcher, n *NTP, p *Peers) Readings {
	g.mu.Lock()
	r := Readings{
		State: g.status.State, Reason: g.status.Reason, Detail: g.status.Detail, Since: g.status.Since,
		Failing:     make(map[Reason]string),
		Transitions: make(map[string]int64, len(g.transitions)),
	}
	for _, c := range g.checks {
		if c.status == failing {
			r.Failing[c.reason] = c.detail
		}
	}
	for reason, count := range g.transitions {
		key := string(reason)
		if reason == ReasonNone {
			key = TransitionsInServiceKey
		}
		r.Transitions[key] += count
	}
	g.mu.Unlock()

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
