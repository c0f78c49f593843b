// Package coordinator is the ZooKeeper side of a snowflaked cluster: it gives
// each node a worker ID that no other live process holds, keeps the node's
// time fence in ZooKeeper, and publishes which nodes are in service.
//
// # Znodes (SPEC §2)
//
//	/snowflaked                              shared root
//	/snowflaked/<cluster>                    layout JSON {"layout","epoch","time_unit"}
//	/snowflaked/<cluster>/forever            data: audit of the last recycling (see below)
//	/snowflaked/<cluster>/forever/<key>-<seq>   persistent sequential, one per node key
//	/snowflaked/<cluster>/leases/<worker-id> ephemeral {"node_key","addr","session_id"}
//	/snowflaked/<cluster>/alive/<worker-id>  ephemeral, the advertised address
//
// <key> is the node key escaped reversibly: bytes outside
// [A-Za-z0-9-_.:@+=,~] (and a leading '.') become %XX, so "a/b" is "a%2Fb";
// the sequence is the last 10 digits after the last '-'.
//
// A forever znode's data is {"worker_id","node_key","addr","last_ts","fence",
// "updated"} (times in unix ms) plus an optional recycling trail
// ("recycled_from", "recycled_to", "prev_worker_id").
//
// # Which worker ID a forever znode holds
//
// Its data's worker_id is authoritative: 0..max is the worker ID, -1 is none
// (taken over by another node key), and null/absent (a freshly created
// znode) means the sequence number if it is at most the layout's
// MaxWorkerID, else none. A znode whose data cannot be decoded holds an
// unknown worker ID: it is never guessed (its own node refuses to start,
// recycling refuses to run, ListWorkers shows the problem).
//
// # Claiming
//
// Claim lists forever/ for this node key's znode (the lowest if a retried
// create left two) and creates one only if none exists; a create that fails
// for connection reasons is followed by a new listing, never by a blind
// second create. It then creates leases/<id> in one multi with a version
// check of the forever znode, so the lease is only taken while the znode
// still maps the key to that ID. A lease held by another session of the
// same node key (a crashed predecessor's, which lingers until its session
// expires) is waited for up to session timeout + max(timeout/2, 1s); a live
// holder is never displaced: ErrLeaseHeld names it.
//
// # Recycling
//
// When a node key's znode holds no worker ID (its sequence passed the worker
// bits, or its ID was taken over), Claim scans the space. A worker ID W may
// be taken over when leases/W does not exist and every forever znode naming
// W last reported (max of last_ts and updated) more than RecycleAfter ago.
// The take-over is ONE multi:
//
//   - set the data of forever/ itself with the version read before the scan
//     (every take-over bumps it, so a scan that raced another take-over fails),
//   - set each previous owner's data to worker_id -1 with its version,
//   - set our znode's worker_id to W (and fence to the previous owner's
//     fence, at least its last_ts) with its version,
//   - create leases/W (ephemeral).
//
// Two nodes racing can never both win: at most one multi commits per scan
// version, and the lease create fails while W is held. The previous owner's
// fence is carried into Identity.Fence, so its IDs are never reissued. A
// node serving from its cache cannot lose its ID this way unnoticed: its
// zk_silence check (MaxZKSilence, at most half of RecycleAfter) takes it out
// of service long before its ID can be recycled.
//
// # Running
//
// Run reports last_ts and a fence covering the local one until the next
// report, re-creates the lease when the session expired (the go-zookeeper
// client opens a new session silently; Run notices the session ID change),
// keeps alive/<id> present exactly while the clock guard is in service, and
// feeds the lease_lost and zk_silence checks. No ZooKeeper call is on the
// per-ID path; Status is a few atomic loads and a mutex.
//
// # Limits
//
// As SPEC §3 asks, a node that loses its connection keeps serving (until
// MaxZKSilence) and learns of a session expiry only when it reconnects. If it
// is partitioned from a ZooKeeper that keeps running, its session expires
// after the session timeout, and a process started elsewhere with the SAME
// node key then takes the lease (it waits out the stale lease, not the
// partitioned node). Run one process per node key; the lease protects
// against a second one only while the first still has its session.
package coordinator
