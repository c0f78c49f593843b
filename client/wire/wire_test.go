package wire

import (
	"encoding/json"
	"testing"
)

// The contract's values, pinned: changing what goes on the wire must show
// up as a change to this table, not slip in with a renamed constant.
func TestValues(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"Root", Root, "/snowflaked"},
		{"ClusterPath", ClusterPath("prod"), "/snowflaked/prod"},
		{"AlivePath", AlivePath("prod"), "/snowflaked/prod/alive"},
		{"AliveNode", AliveNode("prod", 42), "/snowflaked/prod/alive/42"},
		{"AliveName", AliveName(1023), "1023"},

		{"PathID", PathID, "/id"},
		{"PathIDs", PathIDs, "/ids"},
		{"PathUUID", PathUUID, "/uuid"},
		{"PathUUIDs", PathUUIDs, "/uuids"},
		{"PathDecode", PathDecode, "/decode"},
		{"PathLeaf", PathLeaf, "/api/snowflake/get"},
		{"PathSegment", PathSegment, "/segment"},
		{"PathLeafSegment", PathLeafSegment, "/api/segment/get"},
		{"PathHealthz", PathHealthz, "/healthz"},
		{"PathReadyz", PathReadyz, "/readyz"},
		{"PathReadyzSegment", PathReadyzSegment, "/readyz/segment"},
		{"PathTime", PathTime, "/time"},
		{"PathClock", PathClock, "/clock"},
		{"PathClusterNodes", PathClusterNodes, "/cluster/nodes"},
		{"PathBounds", PathBounds, "/bounds"},
		{"SegmentPath", SegmentPath("orders"), "/segment/orders"},

		{"ParamCount", ParamCount, "count"},
		{"ParamFormat", ParamFormat, "format"},
		{"ParamGene", ParamGene, "gene"},
		{"ParamFrom", ParamFrom, "from"},
		{"ParamTo", ParamTo, "to"},

		{"CodeInvalidCount", CodeInvalidCount, "invalid_count"},
		{"CodeInvalidFormat", CodeInvalidFormat, "invalid_format"},
		{"CodeInvalidParameter", CodeInvalidParameter, "invalid_parameter"},
		{"CodeInvalidID", CodeInvalidID, "invalid_id"},
		{"CodeInvalidKey", CodeInvalidKey, "invalid_key"},
		{"CodeInvalidRange", CodeInvalidRange, "invalid_range"},
		{"CodeInvalidGene", CodeInvalidGene, "invalid_gene"},
		{"CodeGeneOff", CodeGeneOff, "gene_off"},
		{"CodeTagExhausted", CodeTagExhausted, "tag_exhausted"},
		{"CodeInvalidUUID", CodeInvalidUUID, "invalid_uuid"},
		{"CodeUUIDOff", CodeUUIDOff, "uuid_off"},
		{"CodeInvalidRefresh", CodeInvalidRefresh, "invalid_refresh"},
		{"CodeBadRequest", CodeBadRequest, "bad_request"},
		{"CodeNotFound", CodeNotFound, "not_found"},
		{"CodeMethodNotAllowed", CodeMethodNotAllowed, "method_not_allowed"},
		{"CodeRequestTimeout", CodeRequestTimeout, "request_timeout"},
		{"CodeBodyTooLarge", CodeBodyTooLarge, "body_too_large"},
		{"CodeHeaderTooLarge", CodeHeaderTooLarge, "header_too_large"},
		{"CodeInternal", CodeInternal, "internal"},
		{"CodeOutOfService", CodeOutOfService, "out_of_service"},
		{"CodeClockRollback", CodeClockRollback, "clock_rollback"},
		{"CodeFenceReached", CodeFenceReached, "fence_reached"},
		{"CodeBorrowExhausted", CodeBorrowExhausted, "borrow_exhausted"},
		{"CodeTimeOverflow", CodeTimeOverflow, "time_overflow"},
		{"CodeClockError", CodeClockError, "clock_error"},
		{"CodeIDError", CodeIDError, "id_error"},
		{"CodeBatchTimeout", CodeBatchTimeout, "batch_timeout"},
		{"CodeUnknownTag", CodeUnknownTag, "unknown_tag"},
		{"CodeInvalidTag", CodeInvalidTag, "invalid_tag"},
		{"CodeSegmentsOff", CodeSegmentsOff, "segments_off"},
		{"CodeSegmentUnavailable", CodeSegmentUnavailable, "segment_unavailable"},
		{"CodeTokensUnconfirmed", CodeTokensUnconfirmed, "tokens_unconfirmed"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
		if prev, ok := seen[tt.got]; ok {
			t.Errorf("%s and %s are both %q", prev, tt.name, tt.got)
		}
		seen[tt.got] = tt.name
	}
	if UUIDTextLen != 36 {
		t.Errorf("UUIDTextLen = %d, want 36", UUIDTextLen)
	}
}

// An alive/ child name is a worker ID in canonical decimal, and nothing
// else.
func TestParseAliveName(t *testing.T) {
	tests := []struct {
		name string
		id   int64
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"1023", 1023, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"01", 0, false},
		{"1a", 0, false},
		{" 1", 0, false},
		{"9223372036854775808", 0, false},
		{"lock", 0, false},
	}
	for _, tt := range tests {
		id, ok := ParseAliveName(tt.name)
		if id != tt.id || ok != tt.ok {
			t.Errorf("ParseAliveName(%q) = %d, %v; want %d, %v", tt.name, id, ok, tt.id, tt.ok)
		}
		if ok && AliveName(id) != tt.name {
			t.Errorf("AliveName(%d) = %q, want %q", id, AliveName(id), tt.name)
		}
	}
}

// The body of GET /cluster/nodes, pinned.
func TestClusterNodesBody(t *testing.T) {
	tests := []struct {
		name string
		body ClusterNodesBody
		want string
	}{
		{"two", ClusterNodesBody{Nodes: []ClusterNode{{WorkerID: 1, Addr: "10.0.0.1:8080"}, {WorkerID: 7, Addr: "10.0.0.2:8080"}}},
			`{"nodes":[{"worker_id":1,"addr":"10.0.0.1:8080"},{"worker_id":7,"addr":"10.0.0.2:8080"}]}`},
		{"none", ClusterNodesBody{Nodes: []ClusterNode{}}, `{"nodes":[]}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.body)
		if err != nil || string(b) != tt.want {
			t.Errorf("%s: %s, %v; want %s", tt.name, b, err, tt.want)
		}
	}
}
