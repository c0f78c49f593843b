package coordinator

import (
	"fmt"
	"strconv"
	"strings"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// seqDigits is how many digits ZooKeeper appends to a sequential znode name.
const seqDigits = 10

// paths are the znodes of one cluster.
type paths struct {
	cluster, forever, leases, alive string
}

// newPaths returns the znodes of cluster. Those of alive/, which clients
// read, are the wire contract's (wire.AlivePath, wire.AliveNode).
func newPaths(cluster string) paths {
	c := zkclient.ClusterPath(cluster)
	return paths{cluster: c, forever: c + "/forever", leases: c + "/leases", alive: wire.AlivePath(cluster)}
}

func (p paths) lease(id int64) string     { return p.leases + "/" + strconv.FormatInt(id, 10) }
func (p paths) aliveNode(id int64) string { return p.alive + "/" + wire.AliveName(id) }

// foreverPrefix is the path handed to a sequential create for a node key:
// ZooKeeper appends the 10-digit sequence.
func (p paths) foreverPrefix(nodeKey string) string {
	return p.forever + "/" + zkclient.EscapeName(nodeKey) + "-"
}

// parseForeverName splits a forever child name "<escaped-key>-<10 digits>"
// into the node key and the sequence number.
func parseForeverName(name string) (key string, seq int64, err error) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, fmt.Errorf("forever znode name %q: want <escaped-node-key>-<%d-digit sequence>", name, seqDigits)
	}
	digits := name[i+1:]
	if len(digits) != seqDigits {
		return "", 0, fmt.Errorf("forever znode name %q: sequence %q is not %d digits", name, digits, seqDigits)
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return "", 0, fmt.Errorf("forever znode name %q: sequence %q is not %d digits", name, digits, seqDigits)
		}
	}
	seq, err = strconv.ParseInt(digits, 10, 64)
	if err != nil || seq > 1<<31-1 {
		return "", 0, fmt.Errorf("forever znode name %q: sequence %q out of range", name, digits)
	}
	key, err = zkclient.UnescapeName(name[:i])
	if err != nil {
		return "", 0, fmt.Errorf("forever znode name %q: %w", name, err)
	}
	return key, seq, nil
}

// parseWorkerName parses a leases/ or alive/ child name: a worker ID in
// canonical decimal form within 0..maxID.
func parseWorkerName(name string, maxID int64) (int64, error) {
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil || strconv.FormatInt(id, 10) != name {
		return 0, fmt.Errorf("znode name %q is not a worker ID in decimal", name)
	}
	if id < 0 || id > maxID {
		return 0, fmt.Errorf("znode name %q: worker ID %d is outside 0..%d", name, id, maxID)
	}
	return id, nil
}
