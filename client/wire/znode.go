package wire

import "strconv"

// Root is the znode under which every cluster lives: a cluster's znodes
// are under Root + "/" + cluster.
const Root = "/snowflaked"

// aliveDir is the name of a cluster's directory of nodes in service.
const aliveDir = "alive"

// ClusterPath is the znode of a cluster, /snowflaked/<cluster>: its data
// is the cluster's settings, and its existence says the cluster exists.
func ClusterPath(cluster string) string { return Root + "/" + cluster }

// AlivePath is the directory of a cluster's nodes in service,
// /snowflaked/<cluster>/alive: its children are exactly the nodes to call.
func AlivePath(cluster string) string { return ClusterPath(cluster) + "/" + aliveDir }

// AliveNode is the znode of worker workerID while it is in service,
// /snowflaked/<cluster>/alive/<worker-id> (the ID in decimal): ephemeral,
// created when the node enters service and deleted when it leaves; its
// data is the node's advertised address, host:port.
func AliveNode(cluster string, workerID int64) string {
	return AlivePath(cluster) + "/" + AliveName(workerID)
}

// AliveName is the name of worker workerID's znode under alive/: the ID in
// canonical decimal.
func AliveName(workerID int64) string { return strconv.FormatInt(workerID, 10) }

// ParseAliveName returns the worker ID an alive/ child is named by, and
// false for a name that is not a worker ID in canonical decimal (no sign,
// no leading zero, not negative).
func ParseAliveName(name string) (int64, bool) {
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil || id < 0 || AliveName(id) != name {
		return 0, false
	}
	return id, true
}
