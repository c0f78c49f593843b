package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// Features a cluster znode may require of the nodes that join it (see
// zkclient, which every reader of the cluster znode decodes it with).
const (
	// featureWorkerIDRange: the cluster claims only part of the worker field.
	featureWorkerIDRange = zkclient.FeatureWorkerIDRange
	// featureGeneBits: the layout gives low sequence bits to a gene.
	featureGeneBits = zkclient.FeatureGeneBits
	// featureFenceFloor: every worker ID starts after a deleted cluster's fence.
	featureFenceFloor = zkclient.FeatureFenceFloor
	// FeatureTagIncarnation: segment tags carry an incarnation.
	FeatureTagIncarnation = zkclient.FeatureTagIncarnation
	// FeatureTagTokens: some segment tags require a token.
	FeatureTagTokens = zkclient.FeatureTagTokens
	// FeatureResetTags: some segment tags restart their numbers each period.
	FeatureResetTags = zkclient.FeatureResetTags
)

// knownFeatures lists the features this release understands, sorted.
func knownFeatures() []string { return zkclient.KnownFeatures() }

// ErrUnknownFeature: the cluster znode requires a feature (or a format)
// this release does not know, or is being deleted; a node must not join it.
var ErrUnknownFeature = zkclient.ErrUnknownFeature

// normFeatures sorts and deduplicates a features list (nil for none).
func normFeatures(fs []string) []string {
	if len(fs) == 0 {
		return nil
	}
	out := slices.Clone(fs)
	slices.Sort(out)
	return slices.Compact(out)
}

// impliedFeatures are the features the cluster's own settings need, sorted:
// gene bits when set, the worker-ID range when narrower than the worker
// field, the fence floor when there is one.
func impliedFeatures(d clusterData) []string {
	var fs []string
	if d.Layout.GeneBits > 0 {
		fs = append(fs, featureGeneBits)
	}
	if full, _ := (WorkerRange{}).resolve(d.Layout); d.WorkerIDs != (WorkerRange{}) && d.WorkerIDs != full {
		fs = append(fs, featureWorkerIDRange)
	}
	if d.FenceFloor > 0 {
		fs = append(fs, featureFenceFloor)
	}
	return fs
}

// withFeatures returns d requiring fs besides what it requires.
func (d clusterData) withFeatures(fs ...string) clusterData {
	d.Requires = normFeatures(append(slices.Clone(d.Requires), fs...))
	return d
}

// RequireFeature makes the cluster znode at clusterPath require feature
// (one of knownFeatures), version-checked: a concurrent writer makes it
// read again. A cluster that required nothing is rewritten in the shape
// releases before the features list refuse. Requiring a feature already
// required is a no-op. Commands that start using a feature call it before
// writing anything that needs it.
func RequireFeature(ctx context.Context, z zkclient.Client, clusterPath, feature string) error {
	if !slices.Contains(knownFeatures(), feature) {
		return fmt.Errorf("require feature %q: %w: this release knows %v", feature, ErrUnknownFeature, knownFeatures())
	}
	for round := 1; round <= maxClusterRounds; round++ {
		b, st, err := z.Get(ctx, clusterPath)
		if err != nil {
			return fmt.Errorf("require feature %q: read %s: %w", feature, clusterPath, err)
		}
		d, err := decodeCluster(b)
		if err != nil {
			return fmt.Errorf("require feature %q: cluster znode %s holds data this release cannot use %s: %w", feature, clusterPath, quoteShort(b), err)
		}
		up := d.withFeatures(append(impliedFeatures(d), feature)...)
		if slices.Equal(up.Requires, d.Requires) {
			return nil
		}
		ub, err := json.Marshal(up)
		if err != nil {
			return fmt.Errorf("require feature %q: encode cluster data: %w", feature, err)
		}
		if _, err := z.Set(ctx, clusterPath, ub, st.Version); err != nil {
			if errors.Is(err, zk.ErrBadVersion) {
				continue
			}
			return fmt.Errorf("require feature %q: write %s: %w", feature, clusterPath, zkclient.AuthHint(err))
		}
		return nil
	}
	return fmt.Errorf("require feature %q: cluster znode %s kept changing", feature, clusterPath)
}
