// Package coordinator is the ZooKeeper side of a snowflaked cluster: it gives
// each node a worker ID that no other live process holds, keeps the node's
// time fence in ZooKeeper, and publishes which nodes are in service.
//
// # Znodes
//
//	/snowflaked                              shared root
//	/snowflaked/<cluster>                    layout JSON {"layout","epoch","time_unit"} (or format 2, below)
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
// "updated","token","prev_token","prev_fence"} (times in milliseconds since
// the Unix epoch) plus an optional recycling trail ("recycled_from",
// "recycled_to", "prev_worker_id") and "retired" (the time of Retire). The
// cluster znode holds the layout, a random "incarnation", the cluster's
// "recycle_after_ms" and "worker_id_range"; a cluster that requires
// features (see knownFeatures) is written as {"format":2,"requires":[…],
// "layout":{…},"incarnation":{"id":…},…}, which releases before the list
// fail to decode (their coordinator reads the layout, their segment store
// the incarnation, as strings).
//
// # Clusters
//
// Claim creates the cluster znode only with Config.CreateCluster; a
// missing cluster is ErrNoCluster and nothing is written. CreateCluster,
// ListClusters and DeleteCluster are snowflakectl cluster's; Retire is
// snowflakectl node retire's: a retired forever znode may be recycled at
// once, through the ordinary take-over (so after its fence).
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
// # The fence (docs/fencing.md has the argument)
//
// Every claim (a fresh one, a same-key take-over, a recycle, a fresh claim
// after ResumeFromCache found another token) writes a new random instance
// token, the previous holder's token and fence (prev_token, prev_fence) and
// a fence G ahead (--zk-fence-ahead) into the forever znode, version-checked,
// in the same multi that creates the lease: the claimer issues only after
// prev_fence. Run renews the fence to now + G every ReportInterval with a
// version-checked set (the version last written is the fencing token) and
// hands each acknowledged fence to the node (Fencer.SetZKFence); the node
// issues only up to it. Anyone else's claim changes the version, so the
// previous holder can never extend its fence again (a conflict is adopted
// only when the znode still carries our worker ID and token: our own write
// whose answer was lost). zk_fence takes the node out of service when less
// than G/3 is left.
//
// # Claiming
//
// Claim lists forever/ for this node key's znode (the lowest if a retried
// create left two) and creates one only if none exists; a create that fails
// for connection reasons is followed by a new listing, never by a blind
// second create. A lease left by the session the cache file recorded (the
// previous process on this disk: the caller holds the cache file's lock) is
// deleted at once. A lease held by another session of this node key is
// watched for session timeout + max(timeout/2, 1s): if its holder renews it
// is evidently alive and Claim fails with ErrLeaseHeld; if not, the claim
// commits without the lease (the token fences the holder out) and Run takes
// the lease once the stale one is gone. A lease of another node key is
// never displaced.
//
// # Recycling
//
// When a node key's znode holds no worker ID (its sequence passed the worker
// bits, or its ID was taken over), Claim scans the space. A worker ID W may
// be taken over when leases/W does not exist and every forever znode naming
// W last renewed (max of last_ts and updated) more than the cluster's
// recycle-after ago: a policy, not a safety bound. The take-over is ONE
// multi: set the data of forever/ itself with the version read before the
// scan (every take-over bumps it, so a scan that raced another take-over
// fails), set each previous owner's data to worker_id -1 with its version,
// set our znode's worker_id to W with a new token and prev_fence = the
// previous owners' largest fence, and create leases/W. Two nodes racing can
// never both win, and the previous owner, wherever it still runs, can never
// renew past the fence the recycler starts after.
//
// # Running
//
// Run renews the fence, re-creates the lease after a session expiry (the
// go-zookeeper client opens a new session silently; Run notices the session
// ID change), keeps alive/<id> present exactly while the clock guard is in
// service, and feeds the lease_lost and zk_fence checks. No ZooKeeper call
// is on the per-ID path; Status is a few atomic loads and a mutex.
package coordinator
