package segment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// ErrMaxIDBelow: SetMax was asked to lower a tag's max_id (the IDs between
// were handed out already).
var ErrMaxIDBelow = errors.New("max_id only rises")

// SetMax raises a tag's max_id to n with a version-checked write (a lost
// race reads again): the next allocation starts at n. n below the current
// max_id fails with ErrMaxIDBelow; n equal to it changes nothing. It
// returns the max_id it found.
func (s *ZKStore) SetMax(ctx context.Context, tag string, n int64) (was int64, err error) {
	was, _, err = s.setMax(ctx, tag, n, false)
	return was, err
}

// Repair is the operator's answer to ErrWentBack (ZooKeeper forgot
// acknowledged writes): in one version-checked multi it deletes every
// returned range of the tag's incarnation (a forgotten take put back a
// range its taker holds; the ranges dropped are lost, never issued) and
// raises max_id to n, which must be at least the record's (equal: the
// ranges are dropped, max_id stays). Run it before restarting anything,
// with n above every ID issued (above the max_id the refusal names).
func (s *ZKStore) Repair(ctx context.Context, tag string, n int64) (was int64, dropped []Range, err error) {
	return s.setMax(ctx, tag, n, true)
}

// setMax is SetMax, and with drop Repair.
func (s *ZKStore) setMax(ctx context.Context, tag string, n int64, drop bool) (was int64, dropped []Range, err error) {
	if n < 1 || n > maxID {
		return 0, nil, fmt.Errorf("set max_id of %q to %d: want 1..%d", tag, n, int64(maxID))
	}
	for range maxCASAttempts {
		rec, raw, version, err := s.readRecord(ctx, tag)
		if err != nil {
			return 0, nil, err
		}
		switch {
		case n < rec.MaxID:
			return rec.MaxID, nil, fmt.Errorf("set max_id of %q to %d: %w: it is %d, and every ID below it was handed to some node", tag, n, ErrMaxIDBelow, rec.MaxID)
		case n == rec.MaxID && !drop:
			return rec.MaxID, nil, nil
		}
		was = rec.MaxID
		var dels []any
		if drop {
			returned, err := s.returned(ctx, tag, rec.Incarnation)
			if err != nil {
				return was, nil, err
			}
			for _, r := range returned {
				dels = append(dels, &zk.DeleteRequest{Path: s.returnedRangePath(tag, r, rec.Incarnation), Version: -1})
			}
			dropped = returned
			if !mutation.Broken(mutation.RepairForgetsPeriods) {
				if err := markRestart(&rec.Tag, n, time.Now()); err != nil {
					return was, nil, fmt.Errorf("repair %q: %w", tag, err)
				}
			}
		}
		rec.MaxID = n
		pre, rec := s.guard(tag, rec)
		data, err := encodeRecord(rec, raw)
		if err != nil {
			return was, nil, fmt.Errorf("set max_id of %q: %w", tag, err)
		}
		checked := version
		if mutation.Broken(mutation.SetMaxUnversioned) {
			checked = -1
		}
		ops := append(append(pre, dels...), &zk.SetDataRequest{Path: s.tagPath(tag), Data: data, Version: checked})
		failed, err := s.z.Multi(ctx, ops...)
		switch {
		case err != nil && failed >= 0 && failed < len(pre):
			continue // the tag was deleted and created again, or marked meanwhile: look again
		case err != nil && failed >= len(pre) && failed < len(pre)+len(dels) && errors.Is(err, zk.ErrNoNode):
			continue // a returned range was taken meanwhile: list them again
		case err == nil:
			_ = s.see(tag, rec.Incarnation, n, version+1, s.ops.Add(1))
			return was, dropped, nil
		case errors.Is(err, zk.ErrBadVersion):
			continue // an allocation moved it meanwhile: look again
		case errors.Is(err, zk.ErrNoNode):
			return was, nil, fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
		}
		// A lost answer: the write happened or not; max_id never goes down
		// either way, and the command can be run again.
		return was, nil, fmt.Errorf("set max_id of %q: %w", tag, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	return was, nil, fmt.Errorf("set max_id of %q: lost the compare-and-set %d times", tag, maxCASAttempts)
}
