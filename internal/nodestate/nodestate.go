// Package nodestate holds the snapshot of one node's state: plain values
// read from its parts at one moment, with no behaviour of their own. The
// node builds it in one place; GET /clock, the status page's own entry and
// the metrics scrape each render it their way.
//
// It is a package of its own, below the node and the packages that render
// a snapshot (internal/metrics, internal/statuspage), so that each of them
// imports it without importing the others.
package nodestate

import (
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/partstatus"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Modes of a node (Snapshot.Mode).
const (
	ModeStandalone = "standalone" // no ZooKeeper: the status page has no cluster table
	ModeZooKeeper  = "zookeeper"
)

// Snapshot is one node's state at one moment. The sections of parts a
// node does not run are nil (ZK in standalone mode, Segments outside
// segment mode, Watcher, NTP or Peers when that check is not wired).
type Snapshot struct {
	// Who the node is; these do not change while it runs.
	NodeKey   string           // --node-key (standalone: --node-key if set, else Addr)
	Addr      string           // the address it is reached at: advertised in ZooKeeper mode
	Mode      string           // ModeStandalone or ModeZooKeeper
	Cluster   string           // --cluster ("" in standalone mode)
	ZKServers []string         // --zk servers (nil in standalone mode)
	Version   string           // the build's version, as /status shows it (with the Go version)
	WorkerID  int64            // the worker ID it issues IDs with
	Layout    snowflake.Layout // the ID layout
	// RollbackPolicy and RollbackTolerance are --rollback-policy (leave
	// or borrow) and --rollback-tolerance.
	RollbackPolicy    string
	RollbackTolerance time.Duration

	// BuildVersion is the version the binary was built as, alone (-X
	// main.version: Version's first word): the version label of
	// snowflaked_build_info and the version GET /clock and ZooKeeper carry.
	BuildVersion string

	// Now is the node's clock (the chaos clock in a chaos build) when the
	// snapshot was taken: the "now" its figures are measured against.
	Now time.Time

	// Readings are the guard's state, reason, detail, failing checks and
	// transition counts (read at one instant), and the watcher, NTP and
	// peer checks' figures.
	clockguard.Readings

	// Generator are the generator's figures.
	Generator Generator
	// Fence is the fence last persisted locally (0: none yet).
	Fence snowflake.UnixMilli

	// ZK is the ZooKeeper coordinator's state; nil in standalone mode.
	ZK *partstatus.ZK
	// PrevHolderWait is how long the node still waits at start for the
	// previous holder's ZooKeeper fence (0 when it does not), and
	// PrevHolder that holder. Only meaningful in ZooKeeper mode.
	PrevHolderWait time.Duration
	PrevHolder     fencing.PrevHolder

	// Segments are the segment-mode tags the node serves: nil outside
	// segment mode, empty before the segment service runs.
	Segments []partstatus.Tag
	// PossiblyLost counts the dense IDs of ranges whose allocation or take
	// had an unknown outcome (ZooKeeper's answer lost): maybe lost, never
	// issued twice. Only meaningful with Segments.
	PossiblyLost int64

	// TLSHandshakeFailures counts the failed TLS handshakes on the API's
	// port by reason, in the order of tlsfiles.Reasons; nil when the node
	// serves plain HTTP.
	TLSHandshakeFailures []uint64
}

// Generator is the ID generator's part of a Snapshot.
type Generator struct {
	Stats snowflake.Stats // slow-path counters
	// LastIssued is the start of the last issued tick (or of the tick the
	// node started after).
	LastIssued snowflake.UnixMilli
	// IssueFence is the fence the generator is held to (snowflake.NoFence
	// for none, math.MinInt64 for before the epoch).
	IssueFence snowflake.UnixMilli
	// Behind is how far the clock reads before the last issued tick's
	// start: how far the IDs run ahead of the clock (0 when they do not).
	Behind time.Duration
}
