package zkclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// TombstoneRoot is the znode under which the tombstones of deleted
// clusters and tags live, beside Root so that no release lists them as a
// cluster:
//
//	/snowflaked-tombstones/<cluster>             the cluster's tombstone (no data while the cluster lives)
//	/snowflaked-tombstones/<cluster>/tags/<tag>  a deleted tag's tombstone
//
// A tombstone outlives the cluster and the tag it names: it is what their
// successors of the same name must start after.
const TombstoneRoot = "/snowflaked-tombstones"

// TombstonePath is the znode of cluster's tombstone.
func TombstonePath(cluster string) string { return TombstoneRoot + "/" + cluster }

// TagTombstonesPath is the parent of cluster's tag tombstones.
func TagTombstonesPath(cluster string) string { return TombstonePath(cluster) + "/tags" }

// TagTombstonePath is the znode of the tombstone of cluster's tag.
func TagTombstonePath(cluster, tag string) string { return TagTombstonesPath(cluster) + "/" + tag }

// TagTombstone is what a deleted segment tag leaves
// (zkclient.TagTombstonePath), by snowflakectl segment delete or with its
// cluster: a tag created again under the name starts at or above MaxID
// unless told to reuse numbers.
type TagTombstone struct {
	Tag string `json:"tag"`
	// MaxID is the deleted tag's max_id: every number it handed to a node
	// is below it.
	MaxID int64 `json:"max_id"`
	// Incarnation is the deleted tag's creation zxid.
	Incarnation int64 `json:"incarnation"`
	// Opaque: the deleted tag handed out a keyed permutation of its
	// counter.
	Opaque    bool  `json:"opaque,omitempty"`
	DeletedMS int64 `json:"deleted_ms"`
}

// maxTombstoneRounds bounds a tombstone write's version-checked rounds.
const maxTombstoneRounds = 5

// quote is b for an error message, at most 80 bytes of it.
func quote(b []byte) string {
	if len(b) > 80 {
		return fmt.Sprintf("%q…", b[:80])
	}
	return fmt.Sprintf("%q", b)
}

// ReadTagTombstone reads the tombstone of cluster's tag (ok false when
// there is none). z may be any session on the ensemble.
func ReadTagTombstone(ctx context.Context, z Client, cluster, tag string) (t TagTombstone, ok bool, err error) {
	t, ok, _, err = readTagTombstone(ctx, z, cluster, tag)
	return t, ok, err
}

func readTagTombstone(ctx context.Context, z Client, cluster, tag string) (t TagTombstone, ok bool, version int32, err error) {
	path := TagTombstonePath(cluster, tag)
	b, st, err := z.Get(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return TagTombstone{}, false, -1, nil
	}
	if err != nil {
		return TagTombstone{}, false, 0, fmt.Errorf("read the tombstone of tag %q: %w", tag, Unavailable(err))
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return TagTombstone{}, false, 0, fmt.Errorf("the tombstone %s holds data this release cannot use %s: %w", path, quote(b), err)
	}
	return t, true, st.Version, nil
}

// WriteTagTombstone records t as the tombstone of cluster's tag t.Tag,
// merged with one already there (the higher max_id stays),
// version-checked. acl is the cluster's; the parents get rootACL.
func WriteTagTombstone(ctx context.Context, z Client, cluster string, t TagTombstone, acl, rootACL []zk.ACL) error {
	if err := z.Ensure(ctx, TombstoneRoot, nil, rootACL); err != nil {
		return fmt.Errorf("create %s: %w", TombstoneRoot, Unavailable(AuthHint(err)))
	}
	for _, p := range []string{TombstonePath(cluster), TagTombstonesPath(cluster)} {
		if err := z.Ensure(ctx, p, nil, acl); err != nil {
			return fmt.Errorf("create %s: %w", p, Unavailable(AuthHint(err)))
		}
	}
	path := TagTombstonePath(cluster, t.Tag)
	for range maxTombstoneRounds {
		old, ok, version, err := readTagTombstone(ctx, z, cluster, t.Tag)
		if err != nil {
			return err
		}
		if ok && old.MaxID > t.MaxID {
			t.MaxID, t.Incarnation, t.Opaque = old.MaxID, old.Incarnation, old.Opaque
		}
		b, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("encode the tombstone of tag %q: %w", t.Tag, err)
		}
		if version < 0 {
			_, err = z.Create(ctx, path, b, 0, acl)
		} else {
			_, err = z.Set(ctx, path, b, version)
		}
		if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write the tombstone %s: %w", path, Unavailable(AuthHint(err)))
		}
		return nil
	}
	return fmt.Errorf("write the tombstone %s: it kept changing", path)
}
