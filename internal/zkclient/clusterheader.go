package zkclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Features a cluster znode may require of the nodes that join it: a node
// that does not know one refuses to start (ErrUnknownFeature). Releases
// that predate the list fail to decode a cluster znode that has one.
const (
	// FeatureWorkerIDRange: the cluster claims only part of the worker
	// field (--worker-id-range). Required whenever the range is narrower
	// than the whole field: a node that ignored it would claim IDs outside.
	FeatureWorkerIDRange = "worker_id_range"
	// FeatureGeneBits: the layout gives low sequence bits to a gene
	// (--gene-bits > 0). A node that ignored them would issue IDs that do
	// not end in the gene asked for.
	FeatureGeneBits = "gene_bits"
	// FeatureTagIncarnation: segment tags carry an incarnation; a node that
	// keys ranges by tag name alone could mix a deleted tag's ranges into
	// its successor. Every cluster created by this release requires it.
	FeatureTagIncarnation = "tag_incarnation"
	// FeatureTagTokens: some segment tags require a token; a node that
	// does not know tokens would serve them to anyone.
	FeatureTagTokens = "tag_tokens"
	// FeatureResetTags: some segment tags restart their numbers each
	// period; a node that does not know them would serve a reset tag's
	// raw counter instead of its numbers in their format.
	FeatureResetTags = "reset_tags"
	// FeatureFenceFloor: the cluster was created over the tombstone of a
	// deleted one and records its fence (fence_floor_ms): every worker ID
	// starts after it. A node that ignored it could reissue the deleted
	// cluster's IDs.
	FeatureFenceFloor = "fence_floor"
	// FeatureDeleting marks a cluster that snowflakectl cluster delete is
	// removing. No release knows it, so no node joins such a cluster.
	FeatureDeleting = "deleting"
)

// ClusterFormat is the "format" of the cluster znode's shape once a
// feature is required (the flat shape has none: format 1).
const ClusterFormat = 2

// ErrUnknownFeature: the cluster znode requires a feature (or a format)
// this release does not know; the node must not join it.
var ErrUnknownFeature = errors.New("cluster requires an unknown feature")

// KnownFeatures lists the features this release understands, sorted.
func KnownFeatures() []string {
	return []string{FeatureFenceFloor, FeatureGeneBits, FeatureResetTags, FeatureTagIncarnation, FeatureTagTokens, FeatureWorkerIDRange}
}

// ClusterHeader is what every reader of a cluster znode must check before
// it trusts anything else in it: the shape, the required features and the
// cluster's incarnation.
type ClusterHeader struct {
	// Format is 1 for the flat shape, ClusterFormat for the nested one.
	Format int
	// Requires lists the features a node must know, sorted, nil for none.
	Requires []string
	// Incarnation is the cluster's random incarnation ("" if never set).
	Incarnation string
}

// incarnationJSON is the incarnation as the nested shape writes it: an
// object, which releases before the features list (which read a string)
// fail to decode, so their segment mode cannot bind to such a cluster.
type incarnationJSON struct {
	ID string `json:"id"`
}

// EncodeIncarnation is the "incarnation" value of the given format.
func EncodeIncarnation(format int, inc string) any {
	if format >= ClusterFormat {
		return incarnationJSON{ID: inc}
	}
	return inc
}

// DecodeClusterHeader reads the header of a cluster znode of either shape.
// A format newer than this release's, a required feature it does not know,
// or a cluster being deleted is an error wrapping ErrUnknownFeature.
func DecodeClusterHeader(b []byte) (ClusterHeader, error) {
	var raw struct {
		Format      int             `json:"format"`
		Requires    []string        `json:"requires"`
		Incarnation json.RawMessage `json:"incarnation"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return ClusterHeader{}, err
	}
	h := ClusterHeader{Format: raw.Format}
	switch raw.Format {
	case 0, 1:
		h.Format = 1
		if len(raw.Requires) > 0 {
			return h, fmt.Errorf("format 1 with a requires list %v", raw.Requires)
		}
	case ClusterFormat:
		if len(raw.Requires) == 0 {
			return h, fmt.Errorf("format %d without a requires list", raw.Format)
		}
	default:
		return h, fmt.Errorf("%w: the cluster znode is in format %d, this release reads formats 1 and %d: upgrade this node",
			ErrUnknownFeature, raw.Format, ClusterFormat)
	}
	// What is required is judged before anything else is read: a feature
	// this release does not know may change the rest of the shape.
	if len(raw.Requires) > 0 {
		h.Requires = slices.Compact(slices.Sorted(slices.Values(raw.Requires)))
	}
	if slices.Contains(h.Requires, FeatureDeleting) {
		return h, fmt.Errorf("%w: the cluster is being deleted (snowflakectl cluster delete); no node may join it", ErrUnknownFeature)
	}
	var unknown []string
	for _, f := range h.Requires {
		if !slices.Contains(KnownFeatures(), f) {
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		return h, fmt.Errorf("%w: the cluster requires %s, which this release does not know (it knows %s): upgrade this node",
			ErrUnknownFeature, strings.Join(unknown, ", "), strings.Join(KnownFeatures(), ", "))
	}
	if len(raw.Incarnation) == 0 {
		return h, nil
	}
	if h.Format == 1 {
		if err := json.Unmarshal(raw.Incarnation, &h.Incarnation); err != nil {
			return h, fmt.Errorf("incarnation: %v", err)
		}
		return h, nil
	}
	var inc incarnationJSON
	if err := json.Unmarshal(raw.Incarnation, &inc); err != nil {
		return h, fmt.Errorf("incarnation: %v", err)
	}
	h.Incarnation = inc.ID
	return h, nil
}
