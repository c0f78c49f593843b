package wire

// The paths a node serves its API on. A path followed by "/{…}" in its
// comment takes one more segment.
const (
	// PathID is GET /id: one snowflake ID.
	PathID = "/id"
	// PathIDs is GET /ids?count=N: N snowflake IDs, one a line.
	PathIDs = "/ids"
	// PathUUID is GET /uuid: one UUIDv7 in its text form (see AppendUUID).
	PathUUID = "/uuid"
	// PathUUIDs is GET /uuids?count=N: N UUIDv7s, one a line, increasing.
	PathUUIDs = "/uuids"
	// PathDecode is GET /decode/{id or uuid}: the parts of an ID or UUID.
	PathDecode = "/decode"
	// PathLeaf is GET /api/snowflake/get/{key}: Meituan Leaf's snowflake
	// endpoint, the same as PathID.
	PathLeaf = "/api/snowflake/get"
	// PathSegment is GET /segment/{tag}[?count=N]: dense IDs of a tag.
	PathSegment = "/segment"
	// PathLeafSegment is GET /api/segment/get/{tag}: Meituan Leaf's segment
	// endpoint, the same as PathSegment.
	PathLeafSegment = "/api/segment/get"
	// PathHealthz is GET /healthz: 200 while the process runs.
	PathHealthz = "/healthz"
	// PathReadyz is GET /readyz: 200 in service, 503 otherwise.
	PathReadyz = "/readyz"
	// PathReadyzSegment is GET /readyz/segment: 200 while segment mode can
	// load ranges, 503 otherwise.
	PathReadyzSegment = "/readyz/segment"
	// PathTime is GET /time: the node's clock, for peers' checks.
	PathTime = "/time"
	// PathClock is GET /clock: the node's drift report.
	PathClock = "/clock"
	// PathClusterNodes is GET /cluster/nodes: the cluster's nodes in
	// service as the node knows them, a ClusterNodesBody.
	PathClusterNodes = "/cluster/nodes"
)

// The query parameters of the API.
const (
	// ParamCount is count=N: how many IDs or UUIDs a batch asks for.
	ParamCount = "count"
	// ParamFormat is format=text|json: the form of the answer.
	ParamFormat = "format"
	// ParamGene is gene=G: the gene every ID of the answer ends in.
	ParamGene = "gene"
	// ParamToken is token=T on the Leaf segment path only: a tag's token,
	// as Leaf and tinyid clients send it (elsewhere, Authorization: Bearer).
	ParamToken = "token"
)

// SegmentPath is the path of tag's dense IDs, /segment/<tag>. The tag goes
// as it is: a valid tag needs no escaping.
func SegmentPath(tag string) string { return PathSegment + "/" + tag }

// ClusterNodesBody is the JSON body of GET /cluster/nodes:
// {"nodes":[{"worker_id":…,"addr":"host:port"},…]}, in worker-ID order.
type ClusterNodesBody struct {
	// Nodes are the nodes in service; empty (never null) when the node
	// knows of none.
	Nodes []ClusterNode `json:"nodes"`
}

// ClusterNode is one node of a ClusterNodesBody.
type ClusterNode struct {
	// WorkerID is the node's worker ID.
	WorkerID int64 `json:"worker_id"`
	// Addr is the node's advertised HTTP address, host:port: what its
	// alive znode holds.
	Addr string `json:"addr"`
}
