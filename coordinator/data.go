package coordinator

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// noWorker is the worker_id of a forever znode that holds no worker ID: its
// ID was taken over by another node key, or it was never assigned one.
const noWorker = -1

// foreverData is the JSON held by forever/<escaped-node-key>-<seq>.
//
// WorkerID is authoritative when present: null (absent) means "the sequence
// number, if it fits the worker bits, else none", -1 means none, and 0..max is
// the worker ID (possibly recycled from another node key). Unknown fields
// written by other versions are ignored.
type foreverData struct {
	WorkerID *int64              `json:"worker_id"`
	NodeKey  string              `json:"node_key"`
	Addr     string              `json:"addr"`
	LastTS   snowflake.UnixMilli `json:"last_ts"` // time of the last report
	Fence    snowflake.UnixMilli `json:"fence"`   // no ID was issued beyond it
	Updated  snowflake.UnixMilli `json:"updated"` // time of the last write
	// Version is the version the writing node was built as (absent from
	// the data of nodes that predate it). Informational: no rule reads it.
	Version string `json:"version,omitempty"`
	// Token is the instance token of the process that last claimed this
	// znode's worker ID: only that process renews Fence (version-checked).
	Token string `json:"token,omitempty"`
	// PrevToken and PrevFence are what the znode (or, after a recycle, the
	// evicted owner) held when Token claimed: Token's holder issues only
	// ticks after PrevFence. Kept so a claim whose answer was lost can be
	// completed without knowing what it overwrote.
	PrevToken string              `json:"prev_token,omitempty"`
	PrevFence snowflake.UnixMilli `json:"prev_fence,omitempty"`
	// Recycling audit trail.
	RecycledFrom string `json:"recycled_from,omitempty"`  // forever znode(s) this one took its worker ID from
	RecycledTo   string `json:"recycled_to,omitempty"`    // forever znode that took this one's worker ID
	PrevWorkerID *int64 `json:"prev_worker_id,omitempty"` // the worker ID this one lost to RecycledTo
	// Stopped marks the final write of a clean stop (Close); every claim
	// and renewal clears it. Informational (status page, snowflakectl
	// status): no safety rule reads it.
	Stopped bool `json:"stopped,omitempty"`
	// Retired (the time of the retire) marks a node key retired by snowflakectl node
	// retire: its worker ID may be recycled at once instead of after
	// recycle-after (still only after its fence). Every claim clears it.
	Retired snowflake.UnixMilli `json:"retired,omitempty"`
	// Reason is why the writing node was out of service at this report
	// ("" when in service): snowflakectl status shows it for a node it
	// cannot reach. Informational: no rule reads it.
	Reason string `json:"reason,omitempty"`
}

// foreverNode is one decoded forever znode.
type foreverNode struct {
	name, path string
	key        string
	seq        int64
	version    int32
	data       foreverData
	workerID   int64 // effective worker ID, noWorker for none
	// seqTwins names the other forever znodes whose names carry this one's
	// sequence number (made by hand: findOwn, checkSeqTwins).
	seqTwins []string
}

// lastSeen is the latest time the node is known to have been alive.
func (n foreverNode) lastSeen() snowflake.UnixMilli { return max(n.data.LastTS, n.data.Updated) }

// decodeForever decodes and checks the data of forever znode key-seq for a
// cluster whose worker IDs are ids.
func decodeForever(b []byte, key string, seq int64, ids WorkerRange) (foreverData, int64, error) {
	var d foreverData
	if len(b) == 0 {
		return d, noWorker, fmt.Errorf("no data")
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, noWorker, fmt.Errorf("not forever-node JSON (%v): %s", err, quoteShort(b))
	}
	if d.NodeKey != key {
		return d, noWorker, fmt.Errorf("data names node key %q, the znode name says %q", d.NodeKey, key)
	}
	if d.LastTS < 0 || d.Fence < 0 || d.Updated < 0 || d.PrevFence < 0 {
		return d, noWorker, fmt.Errorf("negative time: last_ts %d, fence %d, updated %d, prev_fence %d", d.LastTS, d.Fence, d.Updated, d.PrevFence)
	}
	switch {
	case d.WorkerID == nil:
		return d, ids.implicit(seq), nil
	case *d.WorkerID == noWorker:
		return d, noWorker, nil
	case !ids.contains(*d.WorkerID):
		return d, noWorker, fmt.Errorf("worker_id %d is outside the cluster's worker IDs %s", *d.WorkerID, ids)
	}
	return d, *d.WorkerID, nil
}

// leaseData is the JSON held by the ephemeral leases/<worker-id>.
type leaseData struct {
	NodeKey   string `json:"node_key"`
	Addr      string `json:"addr"`
	SessionID string `json:"session_id"` // "0x…", as ZooKeeper logs it
}

func decodeLease(b []byte) (leaseData, error) {
	var d leaseData
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("not lease JSON (%v): %s", err, quoteShort(b))
	}
	if d.NodeKey == "" {
		return d, fmt.Errorf("lease data has no node_key: %s", quoteShort(b))
	}
	return d, nil
}

// describeHolder names a lease's holder for errors and status.
func describeHolder(b []byte, st *zk.Stat) string {
	owner := "unknown session"
	if st != nil {
		owner = "session " + sessionHex(st.EphemeralOwner)
	}
	d, err := decodeLease(b)
	if err != nil {
		return fmt.Sprintf("an unknown holder (%s; %v)", owner, err)
	}
	return fmt.Sprintf("node key %q at %s (%s)", d.NodeKey, d.Addr, owner)
}

// sessionHex formats a session ID as ZooKeeper logs it.
func sessionHex(id int64) string { return "0x" + strconv.FormatUint(uint64(id), 16) }

// quoteShort quotes data for an error message, cut to 80 bytes.
func quoteShort(b []byte) string {
	const n = 80
	if len(b) > n {
		return strconv.Quote(string(b[:n])) + "…"
	}
	return strconv.Quote(string(b))
}

// decodeAlive checks the data of alive/<worker-id>: the advertised address.
func decodeAlive(b []byte) (string, error) {
	if len(b) > 300 || wire.CheckHostPort(string(b)) != nil {
		return "", fmt.Errorf("alive data %s is not a host:port address", quoteShort(b))
	}
	return string(b), nil
}
