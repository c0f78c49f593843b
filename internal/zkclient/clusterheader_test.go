package zkclient

import (
	"errors"
	"slices"
	"testing"
)

func TestDecodeClusterHeader(t *testing.T) {
	for _, tc := range []struct {
		name      string
		data      string
		want      ClusterHeader
		unknown   bool // wraps ErrUnknownFeature
		malformed bool // any other error
	}{
		{"flat, no incarnation", `{"layout":"41/10/12"}`, ClusterHeader{Format: 1}, false, false},
		{"flat", `{"layout":"41/10/12","incarnation":"abc"}`, ClusterHeader{Format: 1, Incarnation: "abc"}, false, false},
		{"format 2", `{"format":2,"requires":["worker_id_range","tag_incarnation","tag_incarnation"],"incarnation":{"id":"abc"}}`,
			ClusterHeader{Format: 2, Requires: []string{"tag_incarnation", "worker_id_range"}, Incarnation: "abc"}, false, false},
		{"format 2, string incarnation", `{"format":2,"requires":["gene_bits"],"incarnation":"abc"}`, ClusterHeader{}, false, true},
		{"format 2 without requires", `{"format":2,"incarnation":{"id":"abc"}}`, ClusterHeader{}, false, true},
		{"format 1 with requires", `{"requires":["gene_bits"],"incarnation":"abc"}`, ClusterHeader{}, false, true},
		{"format 3", `{"format":3,"requires":["gene_bits"]}`, ClusterHeader{}, true, false},
		{"unknown feature", `{"format":2,"requires":["gene_bits","time_travel"],"incarnation":{"id":"abc"}}`, ClusterHeader{}, true, false},
		{"being deleted", `{"format":2,"requires":["deleting","gene_bits"],"incarnation":{"id":"abc"}}`, ClusterHeader{}, true, false},
		{"not JSON", `layout`, ClusterHeader{}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeClusterHeader([]byte(tc.data))
			switch {
			case tc.unknown:
				if !errors.Is(err, ErrUnknownFeature) {
					t.Fatalf("DecodeClusterHeader(%s) = %v, want ErrUnknownFeature", tc.data, err)
				}
			case tc.malformed:
				if err == nil || errors.Is(err, ErrUnknownFeature) {
					t.Fatalf("DecodeClusterHeader(%s) = %+v, %v; want a malformed-data error", tc.data, got, err)
				}
			default:
				if err != nil || got.Format != tc.want.Format || got.Incarnation != tc.want.Incarnation || !slices.Equal(got.Requires, tc.want.Requires) {
					t.Fatalf("DecodeClusterHeader(%s) = %+v, %v; want %+v", tc.data, got, err, tc.want)
				}
			}
		})
	}
}

func TestEncodeIncarnationRoundTrips(t *testing.T) {
	for _, format := range []int{1, ClusterFormat} {
		v := EncodeIncarnation(format, "abc")
		if _, isString := v.(string); isString != (format == 1) {
			t.Errorf("format %d: EncodeIncarnation = %#v: want a string exactly for format 1", format, v)
		}
	}
}
