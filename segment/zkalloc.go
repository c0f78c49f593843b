package segment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// Alloc takes the lowest returned range of incarnation inc at or above
// above (the take that succeeds owns it, R1; see take), else advances
// max_id by step with a version-checked write; a lost race reads again and
// retries. Every read of the record checks its incarnation (ErrTagGone, R7).
func (s *ZKStore) Alloc(ctx context.Context, tag string, inc, step, above int64) (Range, Tag, error) {
	return s.alloc(ctx, tag, inc, step, above, "")
}

// AllocPeriod implements PeriodStore: Alloc for a reset tag's node that
// serves period, which it starts (at the record's max_id) when the record
// has not got it, in the same version-checked write that allocates the
// caller its first range. It takes no returned range.
func (s *ZKStore) AllocPeriod(ctx context.Context, tag string, inc, step int64, period string) (Range, Tag, error) {
	r, t, err := s.alloc(ctx, tag, inc, step, 0, period)
	if err == nil && t.Periods[period] == r.Lo {
		s.dropPastReturns(ctx, tag, inc, t)
	}
	return r, t, err
}

// maxPastReturns bounds the returned ranges one period start drops.
const maxPastReturns = 100

// dropPastReturns deletes, best effort, the returned ranges of incarnation
// inc of a reset tag that lie below the base of the period before its
// newest: no node serves them any more (a node of the newest period serves
// nothing below its base, one of the period before nothing below that
// one's), so they would only lengthen every allocation's list of returned/.
// They are lost, as IDs dropped at a period change are; a delete ZooKeeper
// forgets puts back a range nobody holds.
func (s *ZKStore) dropPastReturns(ctx context.Context, tag string, inc int64, t Tag) {
	keys := slices.Sorted(maps.Keys(t.Periods))
	if len(keys) < 2 {
		return
	}
	below := t.Periods[keys[len(keys)-2]]
	returned, err := s.returned(ctx, tag, inc)
	if err != nil {
		return
	}
	n := 0
	for _, r := range returned {
		if r.Hi > below || n == maxPastReturns {
			continue
		}
		n++
		if err := s.z.Delete(ctx, s.returnedRangePath(tag, r, inc), -1); err == nil {
			s.log.Debug().Str("tag", tag).Stringer("range", r).Msg("segment: dropped a returned range below the last period's base")
		}
	}
}

func (s *ZKStore) alloc(ctx context.Context, tag string, inc, step, above int64, period string) (Range, Tag, error) {
	if step < 1 {
		return Range{}, Tag{}, fmt.Errorf("alloc %q: step %d: want at least 1", tag, step)
	}
	if err := s.checkIncarnation(ctx, tag, inc); err != nil {
		return Range{}, Tag{}, err
	}
	if period == "" {
		if r, t, took, err := s.takeReturned(ctx, tag, inc, above); err != nil || took {
			return r, t, err
		}
	}
	for range maxCASAttempts {
		rec, raw, version, err := s.readRecord(ctx, tag)
		if err != nil {
			return Range{}, Tag{}, err
		}
		if rec.Incarnation != inc {
			return Range{}, Tag{}, fmt.Errorf("tag %q: %w: incarnation %d, now %d", tag, ErrTagGone, inc, rec.Incarnation)
		}
		t := rec.Tag
		if period != "" {
			if t.Reset == nil {
				return Range{}, Tag{}, fmt.Errorf("alloc %q in period %s: the tag does not reset by period", tag, period)
			}
			if _, err := startPeriod(&t, period); err != nil {
				return Range{}, Tag{}, err
			}
		}
		if t.MaxID > maxID-step {
			return Range{}, Tag{}, fmt.Errorf("alloc %q: %w: max_id %d + step %d", tag, ErrExhausted, t.MaxID, step)
		}
		r := Range{Lo: t.MaxID, Hi: t.MaxID + step}
		t.MaxID = r.Hi
		nonce := zkclient.NewToken()
		// Every other field (the returns' nonces, fields of other
		// versions) stays as it was.
		rec.Tag, rec.LastAlloc = t, nonce
		pre, rec := s.guard(tag, rec)
		data, err := encodeRecord(rec, raw)
		if err != nil {
			return Range{}, Tag{}, fmt.Errorf("alloc %q: %w", tag, err)
		}
		checked := version
		if mutation.Broken(mutation.AllocUnversioned) {
			checked = -1
		}
		failed, err := s.z.Multi(ctx, append(pre, &zk.SetDataRequest{Path: s.tagPath(tag), Data: data, Version: checked})...)
		switch {
		case err != nil && failed >= 0 && failed < len(pre):
			// The incarnation's marker is gone (the tag was deleted, perhaps
			// created again) or another writer added one first: nothing was
			// written. Read again: the incarnation check says which.
			if gerr := s.checkIncarnation(ctx, tag, inc); gerr != nil {
				return Range{}, Tag{}, gerr
			}
			continue
		case err == nil:
			s.log.Debug().Str("tag", tag).Stringer("range", r).Int32("version", version+1).Msg("segment: advanced max_id")
			_ = s.see(tag, inc, r.Hi, version+1, s.ops.Add(1)) // higher than read: cannot fail
			return r, t, nil
		case errors.Is(err, zk.ErrBadVersion):
			continue // another allocator advanced max_id first
		}
		// The answer was lost. The write happened if the record is now the
		// next version with our nonce; if it moved past that, nobody can
		// tell: count r as possibly lost (never issued twice either way).
		won, known := s.allocOutcome(ctx, tag, inc, version+1, nonce)
		s.log.Debug().Err(err).Str("tag", tag).Stringer("range", r).Bool("won", won).Bool("known", known).Msg("segment: max_id write's answer lost")
		if known && won {
			_ = s.see(tag, inc, r.Hi, version+1, s.ops.Add(1))
			return r, t, nil
		} else if known {
			continue
		}
		s.possiblyLost.Add(r.Len())
		return Range{}, Tag{}, fmt.Errorf("alloc %q: advance max_id: %w", tag, zkclient.Unavailable(err))
	}
	return Range{}, Tag{}, fmt.Errorf("alloc %q: lost the compare-and-set %d times", tag, maxCASAttempts)
}

// takeReturned takes the first returned range of tag's incarnation inc
// that starts at or above above, if one is left (took).
func (s *ZKStore) takeReturned(ctx context.Context, tag string, inc, above int64) (Range, Tag, bool, error) {
	returned, err := s.returned(ctx, tag, inc)
	if err != nil {
		return Range{}, Tag{}, false, err
	}
	for _, r := range returned {
		if r.Lo < above {
			continue
		}
		t, took, err := s.take(ctx, tag, inc, r)
		if err != nil {
			return Range{}, Tag{}, false, err
		}
		if took {
			return r, t, true, nil
		}
	}
	return Range{}, Tag{}, false, nil
}

// take deletes the returned range r of incarnation inc, in one multi with
// the record's guard and a version-checked set of the record (its data as
// it was): the caller whose multi succeeds holds r (R1), and the record's
// version shows the take, so a store that saw it refuses a ZooKeeper that
// forgot it (R6: the range would be back in returned/ while its taker holds
// it). A lost race for the record reads it again; took is false when
// another allocator took r first. When the answer is lost, r counts as
// possibly lost unless it is still there: never issued twice.
func (s *ZKStore) take(ctx context.Context, tag string, inc int64, r Range) (t Tag, took bool, err error) {
	path := s.returnedRangePath(tag, r, inc)
	for range maxCASAttempts {
		rec, raw, version, err := s.readRecord(ctx, tag)
		if err != nil {
			return Tag{}, false, err
		}
		if rec.Incarnation != inc {
			return Tag{}, false, fmt.Errorf("tag %q: %w: incarnation %d, now %d", tag, ErrTagGone, inc, rec.Incarnation)
		}
		pre, rec := s.guard(tag, rec)
		data, err := encodeRecord(rec, raw)
		if err != nil {
			return Tag{}, false, fmt.Errorf("take returned range %v of %q: %w", r, tag, err)
		}
		ops := append(pre, &zk.DeleteRequest{Path: path, Version: -1},
			&zk.SetDataRequest{Path: s.tagPath(tag), Data: data, Version: version})
		written := version + 1
		if mutation.Broken(mutation.TakeUnrecorded) {
			ops, written = ops[:len(pre)+1], version
		}
		failed, err := s.z.Multi(ctx, ops...)
		switch {
		case err == nil:
			s.log.Debug().Str("tag", tag).Stringer("range", r).Int32("version", written).Msg("segment: took a returned range")
			_ = s.see(tag, inc, rec.MaxID, written, s.ops.Add(1))
			return rec.Tag, true, nil
		case failed >= 0 && failed < len(pre):
			// The incarnation's marker is gone or another writer added one
			// first: nothing was written. The incarnation check says which.
			if gerr := s.checkIncarnation(ctx, tag, inc); gerr != nil {
				return Tag{}, false, gerr
			}
			continue
		case failed == len(pre) && errors.Is(err, zk.ErrNoNode):
			return Tag{}, false, nil // another allocator took it
		case errors.Is(err, zk.ErrBadVersion):
			continue // the record moved on: read it again
		case errors.Is(err, zk.ErrNoNode):
			return Tag{}, false, fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
		case !zkclient.Transient(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
			// ZooKeeper answered no (ErrNoAuth…): nothing was written.
			return Tag{}, false, fmt.Errorf("take returned range %v of %q: %w", r, tag, zkclient.AuthHint(err))
		}
		// Unknown whether the multi happened: if it did, the range is lost
		// (never issued by anyone); if not, it stays for others.
		if ok, _, eerr := s.z.Exists(ctx, path); eerr != nil || !ok {
			s.possiblyLost.Add(r.Len())
		}
		return Tag{}, false, fmt.Errorf("take returned range %v of %q: %w", r, tag, zkclient.Unavailable(err))
	}
	return Tag{}, false, fmt.Errorf("take returned range %v of %q: lost the compare-and-set %d times", r, tag, maxCASAttempts)
}

// allocOutcome reads the tag record after a lost answer (synced, so a
// follower that lags cannot show a version below want although the write
// happened; retried while ZooKeeper is unreachable, until ctx ends): won
// when it is version want with our nonce; known false when it cannot tell
// (unreadable, or moved on past want).
func (s *ZKStore) allocOutcome(ctx context.Context, tag string, inc int64, want int32, nonce string) (won, known bool) {
	rec, _, version, err := s.readRecordWhileUnavailable(ctx, tag, true)
	switch {
	case err != nil || rec.Incarnation != inc:
		return false, false
	case version == want:
		return rec.LastAlloc == nonce, true
	case version < want:
		return false, true // our write did not happen
	}
	return false, false
}
