package zkclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
	// Reset is the deleted tag's reset rule, as its record held it (null:
	// none), and Periods its periods' bases: a tag created again under
	// the name continues them.
	Reset   json.RawMessage  `json:"reset,omitempty"`
	Periods map[string]int64 `json:"periods,omitempty"`
	// Start is the deleted reset tag's first number of a period.
	Start int64 `json:"start,omitempty"`
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

// ReadTagTombstone reads the tombstone of cluster's tag: ok false when
// there is none, version -1 then (for TombstoneGuard).
func ReadTagTombstone(ctx context.Context, z Client, cluster, tag string) (t TagTombstone, ok bool, version int32, err error) {
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

// BuryTag writes the tombstone of cluster's tag, whose record is the
// znode at recordPath: its max_id (read leniently: a record too broken to
// serve from is still buried), merged with a tombstone already there (the
// higher max_id stays), version-checked. It returns the version of the
// record it read, which the delete that follows is checked against; ok is
// false, and nothing is written, when there is no record. The tombstone's
// parents must exist (EnsureTombstoneParents); acl is the cluster's.
func BuryTag(ctx context.Context, z Client, cluster, tag, recordPath string, acl []zk.ACL) (version int32, ok bool, err error) {
	b, st, err := z.Get(ctx, recordPath)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", recordPath, Unavailable(err))
	}
	var rec struct {
		MaxID   int64            `json:"max_id"`
		Opaque  json.RawMessage  `json:"opaque"`
		Reset   json.RawMessage  `json:"reset"`
		Periods map[string]int64 `json:"periods"`
		Start   int64            `json:"start"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return 0, false, fmt.Errorf("%s holds no readable max_id for its tombstone %s: %w: fix or delete it by hand", recordPath, quote(b), err)
	}
	t := TagTombstone{Tag: tag, MaxID: rec.MaxID, Incarnation: st.Czxid, Opaque: len(rec.Opaque) > 0 && string(rec.Opaque) != "null",
		DeletedMS: time.Now().UnixMilli(), Periods: rec.Periods}
	if len(rec.Reset) > 0 && string(rec.Reset) != "null" {
		t.Reset, t.Start = rec.Reset, rec.Start
	}
	return st.Version, true, MergeTombstone(ctx, z, TagTombstonePath(cluster, tag), acl, func(old []byte) ([]byte, error) {
		var o TagTombstone
		if len(old) > 0 {
			if err := json.Unmarshal(old, &o); err != nil {
				return nil, fmt.Errorf("the tombstone of tag %q holds data this release cannot use %s: %w", tag, quote(old), err)
			}
		}
		if o.MaxID > t.MaxID {
			t.MaxID, t.Incarnation, t.Opaque = o.MaxID, o.Incarnation, o.Opaque
		}
		if t.Reset == nil {
			t.Reset, t.Start = o.Reset, o.Start
		}
		// A period of both incarnations keeps the lower base: its numbers
		// go on above every number either handed out.
		for k, v := range o.Periods {
			if b, ok := t.Periods[k]; !ok || v < b {
				if t.Periods == nil {
					t.Periods = map[string]int64{}
				}
				t.Periods[k] = v
			}
		}
		return json.Marshal(t)
	})
}

// EnsureTombstoneParents makes sure cluster's tombstone znode and the
// parent of its tags' tombstones exist, with acl (the cluster's), under
// the tombstones' root (rootACL), and that neither lets anyone change it
// when acl does not (ErrOpenTombstone). The cluster's znode always has a
// child, so whoever may delete in the root (an open root, created by a
// cluster without --zk-auth) still cannot delete it: its children are
// guarded by acl.
func EnsureTombstoneParents(ctx context.Context, z Client, cluster string, acl, rootACL []zk.ACL) error {
	if err := z.Ensure(ctx, TombstoneRoot, nil, rootACL); err != nil {
		return fmt.Errorf("create %s: %w", TombstoneRoot, Unavailable(AuthHint(err)))
	}
	for _, p := range []string{TombstonePath(cluster), TagTombstonesPath(cluster)} {
		err := z.Ensure(ctx, p, nil, acl)
		if errors.Is(err, zk.ErrNoAuth) {
			return fmt.Errorf("%w: create %s: the tombstones of cluster %q were written under other credentials than these (--zk-auth): use those, or set the ACL of %s to this cluster's (zkCli setAcl, with those)",
				ErrForeignTombstone, p, cluster, TombstonePath(cluster))
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", p, Unavailable(AuthHint(err)))
		}
		if err := CheckTombstoneACL(ctx, z, p, acl); err != nil {
			return err
		}
	}
	return nil
}

// ErrForeignTombstone: a tombstone znode this session's credentials may
// not change: written for a cluster of the name that ran with other
// credentials.
var ErrForeignTombstone = errors.New("a tombstone of other credentials")

// GuardLost reports whether a create's multi failed at its tombstone
// guard (TombstoneGuard) because the tombstone changed since it was read,
// which a new read answers; any other failure there is an error to show.
func GuardLost(err error) bool {
	return errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode)
}

// MergeTombstone writes merge(the data there, nil for none) to the
// tombstone at path: a create, or a set checked against the version read
// (a writer in between makes it read again). A tombstone that anyone may
// change while acl does not let them is refused: a tombstone written down
// is what keeps old IDs from coming back, so one created first by a
// client without the cluster's credentials must not be trusted (delete
// it by hand, with the credentials, after checking its data).
func MergeTombstone(ctx context.Context, z Client, path string, acl []zk.ACL, merge func(old []byte) ([]byte, error)) error {
	for range maxTombstoneRounds {
		old, st, err := z.Get(ctx, path)
		version := int32(-1)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			old = nil
		case err != nil:
			return fmt.Errorf("read the tombstone %s: %w", path, Unavailable(err))
		default:
			version = st.Version
			if err := CheckTombstoneACL(ctx, z, path, acl); err != nil {
				return err
			}
		}
		b, err := merge(old)
		if err != nil {
			return err
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

// ErrOpenTombstone: a tombstone znode lets anyone change it while the
// cluster's ACL does not.
var ErrOpenTombstone = errors.New("a tombstone anyone may change")

// CheckTombstoneACL refuses (ErrOpenTombstone) a tombstone at path whose
// ACL lets the world write or delete it when acl, the cluster's, does not,
// and the cluster's znode does not either: whoever could have written it
// could have lowered its fence or max_id. (A cluster whose own znodes are
// open, created without --zk-auth, gains nothing from closed tombstones.)
func CheckTombstoneACL(ctx context.Context, z Client, path string, acl []zk.ACL) error {
	if worldPerms(acl)&(zk.PermWrite|zk.PermDelete) != 0 {
		return nil // an open cluster: its tombstones are open too
	}
	got, err := z.GetACL(ctx, path)
	if err != nil {
		return fmt.Errorf("read the ACL of the tombstone %s: %w", path, Unavailable(err))
	}
	if worldPerms(got)&(zk.PermWrite|zk.PermDelete) == 0 {
		return nil
	}
	if cluster, ok := tombstoneCluster(path); ok {
		if cacl, err := z.GetACL(ctx, ClusterPath(cluster)); err == nil && worldPerms(cacl)&zk.PermWrite != 0 {
			return nil // the cluster itself is open
		}
	}
	return fmt.Errorf("%w: %s lets any client change it (created without the cluster's --zk-auth?): check its data, then give it the cluster's ACL (zkCli setAcl: an open znode lets anyone do that) and run the command again", ErrOpenTombstone, path)
}

// tombstoneCluster is the cluster a tombstone path belongs to.
func tombstoneCluster(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, TombstoneRoot+"/")
	if !ok || rest == "" {
		return "", false
	}
	cluster, _, _ := strings.Cut(rest, "/")
	return cluster, true
}

// worldPerms are the permissions acl gives world:anyone.
func worldPerms(acl []zk.ACL) int32 {
	var p int32
	for _, a := range acl {
		if a.Scheme == "world" && a.ID == "anyone" {
			p |= a.Perms
		}
	}
	return p
}

// TombstoneGuard is the op a create of what path's tombstone guards puts
// in its multi: with the tombstone read at version (0 or more), a check of
// that version; with none read (-1), a create and delete of path, which
// fails when a tombstone was written since. Either way a delete that
// buried the name after the read makes the create fail, and the caller
// reads the tombstone again. The parent of path must exist.
func TombstoneGuard(path string, version int32, acl []zk.ACL) []any {
	if version >= 0 {
		return []any{&zk.CheckVersionRequest{Path: path, Version: version}}
	}
	return []any{&zk.CreateRequest{Path: path, Acl: acl}, &zk.DeleteRequest{Path: path, Version: 0}}
}
