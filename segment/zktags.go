package segment

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// Create makes a tag (errTagExists when it is there already). Over the
// tombstone of a deleted tag of the name, the tag starts at the
// tombstone's max_id or above (see CreateOptions; ErrNumbersIssued). A tag
// with RequireToken is made by CreateWithToken only.
func (s *ZKStore) Create(ctx context.Context, t Tag, o ...CreateOptions) error {
	if t.RequireToken {
		return fmt.Errorf("create tag %q: a tag that requires a token is created with CreateWithToken", t.Name)
	}
	return s.create(ctx, t, "", o...)
}

// CreateWithToken makes a tag that requires a token, with its first token,
// which it returns (shown once: only its hash is kept, in the tag's token
// znode, in the same multi as the tag). The tombstone counts as for Create.
func (s *ZKStore) CreateWithToken(ctx context.Context, t Tag, o ...CreateOptions) (string, error) {
	t.RequireToken = true
	token := NewToken()
	if err := s.create(ctx, t, HashToken([]byte(token)), o...); err != nil {
		return "", err
	}
	return token, nil
}

// create makes a tag; with hash, its token znode too.
func (s *ZKStore) create(ctx context.Context, t Tag, hash string, opts ...CreateOptions) error {
	if err := ValidateTag(t.Name); err != nil {
		return fmt.Errorf("create tag: %w", err)
	}
	if t.MaxID == 0 {
		t.MaxID = t.Start
	}
	var o CreateOptions
	for _, x := range opts {
		o = x
	}
	for range maxTombstoneRounds {
		if err := s.createOnce(ctx, t, hash, o); !errors.Is(err, errBuriedMeanwhile) {
			return err
		}
	}
	return fmt.Errorf("create tag %q: its tombstone kept changing", t.Name)
}

// createOnce is one try of create, over the tag's tombstone as read now;
// errBuriedMeanwhile when a delete buried the name since.
func (s *ZKStore) createOnce(ctx context.Context, t Tag, hash string, o CreateOptions) error {
	// A cluster being deleted takes no new tag: its delete buried the
	// tags it listed, and one created after would go without a
	// tombstone. The mark landing after this read fails the multi.
	cb, cst, err := s.z.Get(ctx, s.cluster)
	if err != nil {
		return fmt.Errorf("create tag %q: read the cluster: %w", t.Name, zkclient.Unavailable(err))
	}
	if _, err := zkclient.DecodeClusterHeader(cb); err != nil {
		return fmt.Errorf("create tag %q: %w", t.Name, err)
	}
	guard, err := s.overTombstone(ctx, &t, o)
	if err != nil {
		return fmt.Errorf("create tag %q: %w", t.Name, err)
	}
	guard = append(guard, &zk.CheckVersionRequest{Path: s.cluster, Version: cst.Version})
	if t.CreatedMS == 0 {
		t.CreatedMS = time.Now().UnixMilli()
	}
	if err := t.Check(); err != nil {
		return fmt.Errorf("create tag %q: %w", t.Name, err)
	}
	marker := zkclient.NewToken()
	data, err := json.Marshal(tagRecord{Tag: t, Marker: marker})
	if err != nil {
		return fmt.Errorf("create tag %q: %w", t.Name, err)
	}
	ops := []any{
		&zk.CreateRequest{Path: s.tagPath(t.Name), Data: data, Acl: s.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: s.returnedPath(t.Name), Acl: s.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: s.holdersPath(t.Name), Acl: s.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: s.markedPath(t.Name), Data: []byte(marker), Acl: s.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: s.markerPath(t.Name, marker), Acl: s.acl, Flags: zk.FlagPersistent},
	}
	if t.Opaque != nil {
		key := make([]byte, OpaqueKeySize)
		_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
		ops = append(ops, &zk.CreateRequest{Path: s.keyPath(t.Name), Data: key, Acl: s.keyACL, Flags: zk.FlagPersistent})
	}
	if t.RequireToken {
		// The incarnation is the tag znode's creation zxid, unknown until
		// the multi lands: 0 here, filled in by the check below (a set of
		// incarnation 0 matches no tag, so a crash in between leaves a tag
		// that accepts nothing until its token is rotated).
		ops = append(ops, &zk.CreateRequest{Path: s.tokenPath(t.Name), Data: mustJSON(TokenSet{Hashes: []TokenHash{{SHA256: hash}}}), Acl: s.keyACL, Flags: zk.FlagPersistent})
	}
	failed, err := s.z.Multi(ctx, append(ops, guard...)...)
	switch {
	case err != nil && failed >= len(ops) && zkclient.GuardLost(err):
		return errBuriedMeanwhile
	case err != nil && failed >= len(ops):
		return fmt.Errorf("create tag %q: check its tombstone %s: %w", t.Name, zkclient.TagTombstonePath(s.clusterName(), t.Name), zkclient.Unavailable(zkclient.AuthHint(err)))
	case errors.Is(err, zk.ErrNodeExists):
		return fmt.Errorf("create tag %q: %w", t.Name, errTagExists)
	case err != nil:
		return fmt.Errorf("create tag %q: %w", t.Name, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	if t.RequireToken {
		if err := s.bindTokens(ctx, t.Name, marker); err != nil {
			return fmt.Errorf("create tag %q: %w", t.Name, err)
		}
	}
	return nil
}

// Key reads the key of incarnation inc of an opaque tag (ErrTagGone when
// the tag is of another incarnation). It needs the cluster's credentials
// when the cluster runs with --zk-auth (the key's znode grants no world
// read). The tag znode's creation zxid is read before and after the key: a
// creation zxid is never reused, so both being inc means the key read
// between was the child of that incarnation.
func (s *ZKStore) Key(ctx context.Context, tag string, inc int64) ([]byte, error) {
	if err := s.checkIncarnation(ctx, tag, inc); err != nil {
		return nil, err
	}
	b, _, err := s.z.Get(ctx, s.keyPath(tag))
	if err == nil {
		if err := s.checkIncarnation(ctx, tag, inc); err != nil {
			return nil, err
		}
	}
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		return nil, fmt.Errorf("read the key of opaque tag %q: %w: it is readable only with the cluster's --zk-auth", tag, err)
	case errors.Is(err, zk.ErrNoNode):
		return nil, fmt.Errorf("opaque tag %q has no key znode %s", tag, s.keyPath(tag))
	case err != nil:
		return nil, fmt.Errorf("read the key of opaque tag %q: %w", tag, zkclient.Unavailable(err))
	case len(b) != OpaqueKeySize:
		return nil, fmt.Errorf("the key of opaque tag %q has %d bytes, want %d", tag, len(b), OpaqueKeySize)
	}
	return b, nil
}

// tagPoll is how often WatchTag reads a watched tag.
const tagPoll = 500 * time.Millisecond

// WatchTag implements TagWatcher by polling: every tagPoll it reads the
// tag's record (its incarnation, and for R6 the record itself: pollTag) and
// checks its returned/ znode (which is never written and
// goes only with the tag; a delete by hand goes child by child). Not a
// ZooKeeper watch: go-zookeeper v1.0.4 re-registers the watches of a
// connection that reconnects (sendSetWatches) while its receive loop writes
// the last zxid they read, a data race the race detector reports whenever
// a leader change meets a long-lived watch. A read that fails is tried at
// the next poll. ErrTagGone or ErrUnknownTag when inc is gone already.
func (s *ZKStore) WatchTag(ctx context.Context, tag string, inc int64) (<-chan bool, error) {
	if err := s.tagAlive(ctx, tag, inc); err != nil {
		if errors.Is(err, ErrTagGone) || errors.Is(err, ErrUnknownTag) {
			return nil, err
		}
		return nil, fmt.Errorf("watch tag %q: %w", tag, err)
	}
	out := make(chan bool, 1)
	go func() {
		t := clock.NewTicker(ctx, tagPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				out <- false
				return
			case <-t.C:
			}
			if ctx.Err() != nil { // an end that came with it wins (select picks at random)
				out <- false
				return
			}
			if mutation.Broken(mutation.DeleteUnpolled) {
				continue
			}
			if err := s.pollTag(ctx, tag, inc); errors.Is(err, ErrTagGone) || errors.Is(err, ErrUnknownTag) {
				out <- true
				return
			}
		}
	}()
	return out, nil
}

// pollTag is tagAlive for WatchTag's poll, reading the tag record itself
// rather than its stat: the store's view of the record (see) is then at
// most a poll old, so a ZooKeeper that forgets an allocation, return or
// take is refused by every store that polled the tag since, not only by
// one that wrote or read the record since (R6). A record that went back
// is not a tag gone: the store's next read of it refuses.
func (s *ZKStore) pollTag(ctx context.Context, tag string, inc int64) error {
	rec, _, _, err := s.readRecordOnce(ctx, tag)
	switch {
	case errors.Is(err, ErrWentBack):
	case err != nil:
		return err
	case rec.Incarnation != inc:
		return fmt.Errorf("tag %q: %w: incarnation %d, now %d", tag, ErrTagGone, inc, rec.Incarnation)
	case rec.RequireToken:
		// The poll keeps the token cache fresh: a rotation is seen within
		// a poll, with no read on the request path. A failed read is tried
		// at the next poll.
		_, _ = s.readTokens(ctx, tag, inc)
	}
	return s.returnedAlive(ctx, tag)
}

// returnedAlive is nil while tag's returned/ znode exists (it is never
// written and goes only with the tag): ErrTagGone once it is gone.
func (s *ZKStore) returnedAlive(ctx context.Context, tag string) error {
	ok, _, err := s.z.Exists(ctx, s.returnedPath(tag))
	switch {
	case err != nil:
		return fmt.Errorf("read tag %q: %w", tag, zkclient.Unavailable(err))
	case !ok:
		return fmt.Errorf("tag %q: %w: its returned/ znode is gone (the tag is being deleted)", tag, ErrTagGone)
	}
	return nil
}

// tagAlive is nil while incarnation inc of tag exists whole: ErrTagGone
// (or ErrUnknownTag) once it is deleted, or being deleted.
func (s *ZKStore) tagAlive(ctx context.Context, tag string, inc int64) error {
	if err := s.checkIncarnation(ctx, tag, inc); err != nil {
		return err
	}
	return s.returnedAlive(ctx, tag)
}

// checkIncarnation fails with ErrTagGone unless the tag znode is of
// incarnation inc (ErrUnknownTag when it is missing).
func (s *ZKStore) checkIncarnation(ctx context.Context, tag string, inc int64) error {
	ok, st, err := s.z.Exists(ctx, s.tagPath(tag))
	switch {
	case err != nil:
		return fmt.Errorf("read tag %q: %w", tag, zkclient.Unavailable(err))
	case !ok:
		return fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
	case st.Czxid != inc:
		return fmt.Errorf("tag %q: %w: incarnation %d, now %d", tag, ErrTagGone, inc, st.Czxid)
	}
	return nil
}

// maxDeleteAttempts bounds Delete's tries: each fails only when a node
// returned a range or published its holder record between the listing and
// the delete.
const maxDeleteAttempts = 20

// Delete removes a tag and everything under it (returned ranges, holder
// records, an opaque tag's key) in one multi, so no part of it outlives the
// rest, after writing the tag's tombstone (its max_id, which a tag created
// again under the name starts at or above: Create). A tag created again under the name is a new incarnation: the ranges
// nodes still hold of this one are dropped when they next ask ZooKeeper,
// never returned into it (R7). It returns a second after the delete, once
// every connected node's poll of the tag has seen it. ErrUnknownTag when
// there is no such tag.
func (s *ZKStore) Delete(ctx context.Context, tag string) error {
	if err := ValidateTag(tag); err != nil {
		return fmt.Errorf("delete tag: %w", err)
	}
	var err error
	for range maxDeleteAttempts {
		// The tombstone first, of the record at the version the delete
		// is checked against: an allocation after the read fails the
		// delete, and the next attempt buries its max_id.
		version, berr := s.bury(ctx, tag)
		if errors.Is(berr, ErrUnknownTag) {
			return berr
		}
		if berr != nil {
			return fmt.Errorf("delete tag %q: %w", tag, berr)
		}
		var ops []any
		ops, err = s.deleteOps(ctx, s.tagPath(tag))
		if errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
		}
		if err == nil {
			ops[len(ops)-1] = &zk.DeleteRequest{Path: s.tagPath(tag), Version: version}
			_, err = s.z.Multi(ctx, ops...)
		}
		switch {
		case err == nil:
			// Every connected node polls its tags (WatchTag): give each a
			// poll, so a create that follows this call finds them done.
			clock.Sleep(ctx, 2*tagPoll)
			return nil
		case errors.Is(err, errSubtreeChanged) || errors.Is(err, zk.ErrNotEmpty) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion):
			continue // a child came or went, or the record moved, meanwhile: read again
		}
		return fmt.Errorf("delete tag %q: %w", tag, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	return fmt.Errorf("delete tag %q: its children kept changing (%d tries): %w", tag, maxDeleteAttempts, err)
}

// errSubtreeChanged: a znode went while deleteOps listed its parent.
var errSubtreeChanged = errors.New("a child went meanwhile")

// deleteOps lists the deletes of path's subtree, children first; ErrNoNode
// when path itself is missing.
func (s *ZKStore) deleteOps(ctx context.Context, path string) ([]any, error) {
	kids, err := s.z.Children(ctx, path)
	if err != nil {
		return nil, err
	}
	var ops []any
	for _, k := range kids {
		sub, err := s.deleteOps(ctx, path+"/"+k)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				err = errSubtreeChanged
			}
			return nil, err
		}
		ops = append(ops, sub...)
	}
	return append(ops, &zk.DeleteRequest{Path: path, Version: -1}), nil
}

// bindTokens writes the incarnation of the tag just created (with marker)
// into its token set: a set of another incarnation is never accepted.
func (s *ZKStore) bindTokens(ctx context.Context, tag, marker string) error {
	_, st, err := s.z.Get(ctx, s.tagPath(tag))
	if err != nil {
		return fmt.Errorf("read the tag back: %w", zkclient.Unavailable(err))
	}
	b, tst, err := s.z.Get(ctx, s.tokenPath(tag))
	if err != nil {
		return fmt.Errorf("read its token znode: %w", zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	var set TokenSet
	if err := json.Unmarshal(b, &set); err != nil {
		return fmt.Errorf("its token znode: %w", err)
	}
	set.Incarnation = st.Czxid
	_, err = s.z.Multi(ctx,
		&zk.CheckVersionRequest{Path: s.markerPath(tag, marker), Version: -1},
		&zk.SetDataRequest{Path: s.tokenPath(tag), Data: mustJSON(set), Version: tst.Version})
	if err != nil {
		return fmt.Errorf("bind its token to incarnation %d: %w", st.Czxid, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	return nil
}
