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
	// PathBounds is GET /bounds?from=…&to=…: the smallest and largest ID
	// (and UUID) of the node's layout whose time lies in [from, to), a
	// BoundsBody.
	PathBounds = "/bounds"
	// PathClusterNodes is GET /cluster/nodes: the cluster's nodes in
	// service as the node knows them, a ClusterNodesBody.
	PathClusterNodes = "/cluster/nodes"
)

// The query parameters of the API.
const (
	// ParamCount is count=N: how many IDs or UUIDs a batch asks for.
	ParamCount = "count"
	// ParamFormat is format=text|json|base62|base58|base36|base32: the form
	// of the answer (the last four: fixed-width strings, see client/idtext).
	ParamFormat = "format"
	// ParamGene is gene=G: the gene every ID of the answer ends in.
	ParamGene = "gene"
	// ParamFrom is from=T on PathBounds: the range's start, RFC 3339 or
	// Unix milliseconds.
	ParamFrom = "from"
	// ParamTo is to=T on PathBounds: the range's end (excluded), RFC 3339
	// or Unix milliseconds.
	ParamTo = "to"
	// ParamToken is token=T on the Leaf segment path only: a tag's token,
	// as Leaf and tinyid clients send it (elsewhere, Authorization: Bearer).
	ParamToken = "token"
)

// SegmentPath is the path of tag's dense IDs, /segment/<tag>. The tag goes
// as it is: a valid tag needs no escaping.
func SegmentPath(tag string) string { return PathSegment + "/" + tag }

// BoundsBody is the JSON body of GET /bounds: the IDs whose tick lies in
// [From, To), From and To being the range asked for truncated to the start
// of their ticks.
type BoundsBody struct {
	// From is the effective start: the start of the first tick of the
	// range, RFC 3339 in UTC with milliseconds.
	From string `json:"from"`
	// To is the effective end, excluded: the start of the tick after the
	// range's last.
	To string `json:"to"`
	// FromMS is From in Unix milliseconds.
	FromMS int64 `json:"from_ms"`
	// ToMS is To in Unix milliseconds.
	ToMS int64 `json:"to_ms"`
	// MinID is the smallest ID of the range, decimal: every ID issued at
	// From or later is at least MinID.
	MinID string `json:"min_id"`
	// MaxID is the largest ID of the range, decimal: every ID issued
	// before To is at most MaxID.
	MaxID string `json:"max_id"`
	// MinUUID and MaxUUID bound the range's UUIDv7s alike, in canonical
	// form; empty (left out) when the layout makes no UUIDs.
	MinUUID string `json:"min_uuid,omitempty"`
	MaxUUID string `json:"max_uuid,omitempty"`
}

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
