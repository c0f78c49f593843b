// Package endpoint names what answered an HTTP request: a small fixed set,
// numbered from 0, fit for metric labels. The server's route table maps
// paths to it; the metrics page keeps its counters in an array indexed by
// it. A leaf, so that the page that counts requests does not import the
// server that answers them.
package endpoint

// Endpoint is what answered a request.
type Endpoint uint8

// The endpoints. Their labels are Labels.
const (
	ID Endpoint = iota
	IDs
	Decode
	Leaf
	Healthz
	Readyz
	Time
	Clock
	Segment
	UUID
	Nodes  // /cluster/nodes
	Bounds // /bounds
	Other  // routes of the node's own (/metrics, /status), unknown paths
	// Count is how many endpoints there are: every Endpoint the server
	// reports is below it.
	Count
)

// Labels holds every endpoint's label (the endpoint label of a metric),
// indexed by Endpoint.
var Labels = [Count]string{
	ID:      "id",
	IDs:     "ids",
	Decode:  "decode",
	Leaf:    "leaf",
	Healthz: "healthz",
	Readyz:  "readyz",
	Time:    "time",
	Clock:   "clock",
	Segment: "segment",
	UUID:    "uuid",
	Nodes:   "nodes",
	Bounds:  "bounds",
	Other:   "other",
}

// String returns the endpoint's label; one beyond Count is "other".
func (e Endpoint) String() string {
	if e < Count {
		return Labels[e]
	}
	return Labels[Other]
}
