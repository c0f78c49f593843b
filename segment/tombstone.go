package segment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// ErrNumbersIssued: a tag would be created again under a deleted tag's
// name with a start below the deleted tag's max_id, so it would hand out
// numbers the deleted one handed out (CreateOptions.ReuseNumbers accepts
// that knowingly).
var ErrNumbersIssued = errors.New("the numbers were issued by a deleted tag of the same name")

// CreateOptions say how Create treats the tombstone of a deleted tag of
// the same name (its max_id: every number the deleted tag handed out is
// below it).
type CreateOptions struct {
	// StartGiven: Tag.Start was chosen by the operator. A start below the
	// tombstone's max_id is then ErrNumbersIssued (unless ReuseNumbers);
	// otherwise the tag starts at the tombstone's max_id when that is
	// above Tag.Start.
	StartGiven bool
	// ReuseNumbers accepts a start below the tombstone's max_id: only
	// when no number of the deleted tag is kept anywhere and no node still
	// serves its ranges.
	ReuseNumbers bool
}

// clusterName is the store's cluster's name.
func (s *ZKStore) clusterName() string { return strings.TrimPrefix(s.cluster, zkclient.Root+"/") }

// maxTombstoneRounds bounds a create's tries when deletes keep burying
// its name.
const maxTombstoneRounds = 5

// errBuriedMeanwhile: a delete wrote the tag's tombstone after a create
// read it (the create's guard failed): read it again.
var errBuriedMeanwhile = errors.New("the tag was buried meanwhile")

// overTombstone applies the tombstone of a deleted tag of t's name, if
// any, to t's start (see CreateOptions), and returns the guard the
// create's multi carries (zkclient.TombstoneGuard).
func (s *ZKStore) overTombstone(ctx context.Context, t *Tag, o CreateOptions) ([]any, error) {
	if err := s.ensureTombstoneParents(ctx); err != nil {
		return nil, err
	}
	tt, ok, version, err := zkclient.ReadTagTombstone(ctx, s.z, s.clusterName(), t.Name)
	if err != nil {
		return nil, err
	}
	if mutation.Broken(mutation.TagTombstoneIgnored) {
		ok = false
	}
	path := zkclient.TagTombstonePath(s.clusterName(), t.Name)
	if ok {
		if err := zkclient.CheckTombstoneACL(ctx, s.z, path, s.acl); err != nil {
			return nil, err
		}
	}
	guard := zkclient.TombstoneGuard(path, version, s.acl)
	return guard, s.checkTombstone(t, tt, ok, o)
}

// ensureTombstoneParents creates the parents of the cluster's tag
// tombstones (zkclient.EnsureTombstoneParents).
func (s *ZKStore) ensureTombstoneParents(ctx context.Context) error {
	rootACL := s.rootACL
	if rootACL == nil {
		rootACL = s.acl
	}
	return zkclient.EnsureTombstoneParents(ctx, s.z, s.clusterName(), s.acl, rootACL)
}

// checkTombstone applies tombstone tt (ok: there is one) to t's start.
func (s *ZKStore) checkTombstone(t *Tag, tt zkclient.TagTombstone, ok bool, o CreateOptions) error {
	if !ok || o.ReuseNumbers {
		return nil
	}
	if t.Reset != nil || len(tt.Reset) > 0 {
		return s.checkResetTombstone(t, tt)
	}
	if tt.Opaque || t.Opaque != nil {
		// Another key is another permutation: counters kept apart do
		// not keep the numbers apart, nor do a plain counter and D-digit
		// numbers.
		return fmt.Errorf("%w: tag %q was deleted (at %s) with max_id %d, and an opaque tag's numbers (the deleted one's or the new one's) are a keyed permutation: "+
			"a tag created again under its name, with a new key, repeats some of them whatever its start. Use another name, or add --reuse-numbers only if no number of the deleted tag is kept anywhere",
			ErrNumbersIssued, t.Name, time.UnixMilli(tt.DeletedMS).UTC().Format(time.RFC3339), tt.MaxID)
	}
	if t.Start >= tt.MaxID {
		return nil
	}
	switch {
	case o.StartGiven:
		return fmt.Errorf("%w: tag %q was deleted (at %s) with max_id %d, so numbers below %d may have been handed out; start %d would hand them out again. "+
			"Leave --start out (the tag then starts at %d), give --start %d or more, or add --reuse-numbers only if no number of the deleted tag is kept anywhere",
			ErrNumbersIssued, t.Name, time.UnixMilli(tt.DeletedMS).UTC().Format(time.RFC3339), tt.MaxID, tt.MaxID, t.Start, tt.MaxID, tt.MaxID)
	}
	t.Start, t.MaxID = tt.MaxID, max(t.MaxID, tt.MaxID)
	return nil
}

// bury writes the tombstone of tag (zkclient.BuryTag) and returns the
// version of the record it was read from.
func (s *ZKStore) bury(ctx context.Context, tag string) (int32, error) {
	if err := s.ensureTombstoneParents(ctx); err != nil {
		return 0, err
	}
	v, ok, err := zkclient.BuryTag(ctx, s.z, s.clusterName(), tag, s.tagPath(tag), s.acl)
	if err == nil && !ok {
		err = fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
	}
	return v, err
}

// checkResetTombstone applies the tombstone tt to a tag t of which one
// resets by period: the new tag must print its IDs as the deleted one did,
// and continues its periods above its max_id (a period's numbers are its
// counter's values less the period's base, so the deleted tag's bases with
// a counter that starts above its max_id go on above every number it
// handed out).
func (s *ZKStore) checkResetTombstone(t *Tag, tt zkclient.TagTombstone) error {
	var old *Reset
	if len(tt.Reset) > 0 {
		old = new(Reset)
		if err := json.Unmarshal(tt.Reset, old); err != nil {
			return fmt.Errorf("the tombstone of tag %q holds a reset rule this release cannot read (%v): use another name, or add --reuse-numbers only if no ID of the deleted tag is kept anywhere", t.Name, err)
		}
	}
	if !old.Equal(t.Reset) {
		return fmt.Errorf("%w: tag %q was deleted (at %s) printing its IDs %s; a tag created again under its name %s would print some of them again. "+
			"Create it as the deleted one was, use another name, or add --reuse-numbers only if no ID of the deleted tag is kept anywhere",
			ErrNumbersIssued, t.Name, time.UnixMilli(tt.DeletedMS).UTC().Format(time.RFC3339), describeReset(old), describeReset(t.Reset))
	}
	if old != nil && t.Start < tt.Start {
		return fmt.Errorf("%w: tag %q was deleted (at %s) numbering its periods from %d; start %d would print its IDs again. Give --start %d or more, or add --reuse-numbers only if no ID of the deleted tag is kept anywhere",
			ErrNumbersIssued, t.Name, time.UnixMilli(tt.DeletedMS).UTC().Format(time.RFC3339), tt.Start, t.Start, tt.Start)
	}
	t.MaxID = max(t.MaxID, tt.MaxID)
	t.Periods = mergePeriods(tt.Periods, t.Periods)
	return nil
}

// describeReset says how a tag prints its IDs.
func describeReset(r *Reset) string {
	if r == nil {
		return "as plain numbers"
	}
	return fmt.Sprintf("as %q, reset %s in %s", r.Format, r.Every, r.zone())
}
