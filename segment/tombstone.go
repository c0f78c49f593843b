package segment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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

// overTombstone applies the tombstone of a deleted tag of t's name, if
// any, to t's start (see CreateOptions).
func (s *ZKStore) overTombstone(ctx context.Context, t *Tag, o CreateOptions) error {
	tt, ok, err := zkclient.ReadTagTombstone(ctx, s.z, s.clusterName(), t.Name)
	if err != nil || !ok || t.Start >= tt.MaxID {
		return err
	}
	switch {
	case o.ReuseNumbers:
		return nil
	case o.StartGiven:
		return fmt.Errorf("%w: tag %q was deleted (at %s) with max_id %d, so numbers below %d may have been handed out; start %d would hand them out again. "+
			"Leave --start out (the tag then starts at %d), give --start %d or more, or add --reuse-numbers only if no number of the deleted tag is kept anywhere",
			ErrNumbersIssued, t.Name, time.UnixMilli(tt.DeletedMS).UTC().Format(time.RFC3339), tt.MaxID, tt.MaxID, t.Start, tt.MaxID, tt.MaxID)
	}
	t.Start, t.MaxID = tt.MaxID, max(t.MaxID, tt.MaxID)
	return nil
}

// bury writes the tombstone of tag as its record stands at version (its
// max_id), merged with an older one.
func (s *ZKStore) bury(ctx context.Context, tag string, rec tagRecord) error {
	rootACL := s.rootACL
	if rootACL == nil {
		rootACL = s.acl
	}
	return zkclient.WriteTagTombstone(ctx, s.z, s.clusterName(), zkclient.TagTombstone{
		Tag: tag, MaxID: rec.MaxID, Incarnation: rec.Incarnation, Opaque: rec.Opaque != nil, DeletedMS: time.Now().UnixMilli(),
	}, s.acl, rootACL)
}
