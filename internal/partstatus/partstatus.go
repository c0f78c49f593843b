// Package partstatus holds the plain status values of the node's parts
// that the views render: the ZooKeeper coordinator's state and the segment
// service's tags. The parts fill them (coordinator.Status and
// segment.TagStatus are these types); /clock, the status page and the
// metrics page read them through internal/nodestate without importing the
// parts. A leaf: no behaviour; of the repository it imports only the ID
// library, for the type of a wall-clock instant.
package partstatus

import (
	"fmt"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// ZK is the ZooKeeper coordinator's state (coordinator.Status): for
// /clock and metrics. Connected is true only with
// a session (SessionState StateHasSession): StateConnected is a connection
// to a server on which no session is established yet.
type ZK struct {
	WorkerID     int64  `json:"worker_id"` // -1 before Claim/ResumeFromCache
	Connected    bool   `json:"connected"`
	SessionState string `json:"session_state"`
	SessionID    string `json:"session_id,omitempty"` // "0x…"
	// SessionTimeoutMs is the session timeout the server granted (the
	// configured one until a session exists).
	SessionTimeoutMs int64  `json:"session_timeout_ms"`
	LeaseHeld        bool   `json:"lease_held"`
	LeaseSession     string `json:"lease_session,omitempty"` // "0x…" of the session holding the lease
	LeaseDetail      string `json:"lease_detail,omitempty"`  // why the lease is not held
	AlivePresent     bool   `json:"alive_present"`
	FromCache        bool   `json:"from_cache"` // serving a cached worker ID not yet confirmed by ZooKeeper
	// LastReport is the time of the last renewal that reached ZooKeeper, in
	// milliseconds since the Unix epoch (0: none known); LastReportAgeMs
	// its age (-1: none).
	LastReport      snowflake.UnixMilli `json:"last_report_ms"`
	LastReportAgeMs int64               `json:"last_report_age_ms"`
	// ZKFence is the fence ZooKeeper acknowledged for this process's token,
	// in milliseconds since the Unix epoch: no ID beyond it.
	// ZKFenceHeadroomMs is ZKFence - now.
	ZKFence           snowflake.UnixMilli `json:"zk_fence_ms"`
	ZKFenceHeadroomMs int64               `json:"zk_fence_headroom_ms"`
	ZKFenceAheadMs    int64               `json:"zk_fence_ahead_ms"` // G (--zk-fence-ahead)
	Token             string              `json:"token,omitempty"`   // this process's instance token
	Incarnation       string              `json:"incarnation,omitempty"`
	Reports           int64               `json:"reports"` // renewals that reached ZooKeeper
	ReportFailures    int64               `json:"report_failures"`
	// FailuresByCause splits ReportFailures: connection (ZooKeeper
	// unreachable or the call timed out), taken_over (another claim
	// changed the forever znode), deleted, held (skipped: the node's clock
	// is suspect), other.
	FailuresByCause map[string]int64 `json:"report_failures_by_cause"`
	RenewError      string           `json:"renew_error,omitempty"` // the last renewal problem
}

// Tag is one tag as a node holds it (segment.TagStatus).
type Tag struct {
	Tag       string  `json:"tag"`
	Held      []Range `json:"held"`       // unissued IDs in memory, in order
	Available int64   `json:"available"`  // IDs left in memory
	Issued    int64   `json:"issued"`     // IDs handed to callers since start
	Ahead     int64   `json:"mark_ahead"` // IDs past the last issued that the state file no longer lists (a kill -9 loses them)
	Chunk     int64   `json:"chunk"`      // how far the mark moves ahead now
	Loads     int64   `json:"loads"`      // ranges loaded
	Step      int64   `json:"step"`       // the step of the next load
	LastLoad  float64 `json:"last_load_seconds"`
	Wasted    int64   `json:"wasted"` // IDs this node knows it lost
	// Token: the tag requires a token; RefusedRequired and RefusedInvalid
	// count the requests refused without one and with a wrong one.
	Token           bool   `json:"token,omitempty"`
	RefusedRequired int64  `json:"refused_token_required,omitempty"`
	RefusedInvalid  int64  `json:"refused_token_invalid,omitempty"`
	Error           string `json:"error,omitempty"`
}

// Range is the dense IDs [Lo, Hi).
type Range struct {
	Lo int64 `json:"lo"`
	Hi int64 `json:"hi"`
}

// Len is how many IDs the range holds.
func (r Range) Len() int64 { return r.Hi - r.Lo }

// String shows the range as [lo,hi).
func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Lo, r.Hi) }
