package segment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// Returned lists the returned ranges of the tag's current incarnation,
// lowest first (those of no or another incarnation are never taken, R7).
func (s *ZKStore) Returned(ctx context.Context, tag string) ([]Range, error) {
	t, err := s.Tag(ctx, tag)
	if err != nil {
		return nil, err
	}
	return s.returned(ctx, tag, t.Incarnation)
}

// returned lists tag's returned ranges of incarnation inc, lowest first.
func (s *ZKStore) returned(ctx context.Context, tag string, inc int64) ([]Range, error) {
	names, err := s.z.Children(ctx, s.returnedPath(tag))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
	}
	if err != nil {
		return nil, fmt.Errorf("list returned ranges of %q: %w", tag, zkclient.Unavailable(err))
	}
	var out []Range
	for _, n := range names {
		if r, i, ok := parseRangeName(n); ok && i == inc {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Range) int { return cmp.Compare(a.Lo, b.Lo) })
	return out, nil
}

// errReturnUnknown: a return's answer was lost and whether it happened can
// no longer be told; its range is counted possibly lost (never handed out
// twice, since the return is not tried again).
var errReturnUnknown = errors.New("outcome of the return unknown")

// pendingReturn is a return whose answer was lost: it happened if the
// record shows nonce as return number seq; it can still happen only while
// the record is at version.
type pendingReturn struct {
	seq     int64
	nonce   string
	version int32
}

// Return records r as returned, for the next Alloc anywhere, in one multi
// that also records the return's nonce in the tag record (version-checked).
// It is never retried blindly: a retry of a return whose answer was lost,
// after another node took the range (deleting its znode), would create it
// again and hand it out twice. When an answer is lost, the record read back
// (after a sync) says whether the return happened (its nonce is there),
// could still happen or cannot have (tried again, version-checked, so at
// most one of the attempts lands), or can no longer tell (more than
// maxReturnNonces returns since: errReturnUnknown, the range counted
// possibly lost). Reads are retried while ZooKeeper is unreachable, until
// ctx ends. A tag that no longer exists (ErrUnknownTag), one of another
// incarnation than inc (ErrTagGone: the range is never put into it) or a
// refusal (ErrNoAuth) ends it at once. The range's znode name carries inc,
// so even a multi that landed on a newer incarnation of the same version
// leaves a range no allocator of that incarnation takes.
func (s *ZKStore) Return(ctx context.Context, tag string, inc int64, r Range) error {
	if r.Len() <= 0 {
		return nil
	}
	return s.returnFrom(ctx, tag, inc, r, nil)
}

// returnFrom is Return after the attempts in pending lost their answers.
func (s *ZKStore) returnFrom(ctx context.Context, tag string, inc int64, r Range, pending []pendingReturn) error {
	for range maxCASAttempts {
		rec, raw, version, err := s.readRecordWhileUnavailable(ctx, tag, len(pending) > 0)
		if err == nil && rec.Incarnation != inc {
			err = fmt.Errorf("tag %q: %w: incarnation %d, now %d", tag, ErrTagGone, inc, rec.Incarnation)
		}
		if err != nil {
			s.lostIfPending(pending, r)
			return fmt.Errorf("return %v of %q: %w", r, tag, err)
		}
		var still []pendingReturn
		for _, p := range pending {
			switch returnOutcome(rec, version, p) {
			case returnApplied:
				return nil
			case returnUnknown:
				s.possiblyLost.Add(r.Len())
				return fmt.Errorf("return %v of %q: %w", r, tag, errReturnUnknown)
			case returnMayApply:
				still = append(still, p)
			}
		}
		pending = still
		p := pendingReturn{seq: rec.ReturnSeq + 1, nonce: zkclient.NewToken(), version: version}
		rec.ReturnSeq = p.seq
		rec.Returns = append(rec.Returns, p.nonce)
		if n := len(rec.Returns); n > maxReturnNonces {
			rec.Returns = rec.Returns[n-maxReturnNonces:]
		}
		pre, rec := s.guard(tag, rec)
		data, err := encodeRecord(rec, raw)
		if err != nil {
			return fmt.Errorf("return %v of %q: %w", r, tag, err)
		}
		failed, err := s.z.Multi(ctx, append(pre,
			&zk.SetDataRequest{Path: s.tagPath(tag), Data: data, Version: version},
			&zk.CreateRequest{Path: s.returnedRangePath(tag, r, inc), Acl: s.acl, Flags: zk.FlagPersistent})...)
		switch {
		case err == nil:
			_ = s.see(tag, inc, rec.MaxID, version+1, s.ops.Add(1))
			return nil
		case failed >= 0 && failed < len(pre):
			// Not applied: the incarnation's marker is gone, or another
			// writer added one first. Read again (the incarnation check
			// there puts nothing into another incarnation).
			continue
		case errors.Is(err, zk.ErrBadVersion):
			continue // not applied (a multi is atomic): the record moved on
		case errors.Is(err, zk.ErrNodeExists):
			return nil // not applied, but the range is there already
		case errors.Is(err, zk.ErrNoNode):
			s.lostIfPending(pending, r)
			return fmt.Errorf("return %v of %q: %w", r, tag, ErrUnknownTag)
		case !zkclient.Transient(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
			// ZooKeeper answered no (ErrNoAuth…): this attempt did nothing.
			s.lostIfPending(pending, r)
			return fmt.Errorf("return %v of %q: %w", r, tag, zkclient.AuthHint(err))
		}
		// The answer was lost: the record read next says what happened.
		if mutation.Broken(mutation.ReturnRetriedBlindly) {
			continue
		}
		pending = append(pending, p)
	}
	s.lostIfPending(pending, r)
	return fmt.Errorf("return %v of %q: lost the compare-and-set %d times", r, tag, maxCASAttempts)
}

// lostIfPending counts r possibly lost when a return gives up with
// attempts whose outcome it never learned.
func (s *ZKStore) lostIfPending(pending []pendingReturn, r Range) {
	if len(pending) > 0 {
		s.possiblyLost.Add(r.Len())
	}
}

// The outcomes of a return whose answer was lost, read from the record.
const (
	returnApplied  = iota // the record shows its nonce
	returnNot             // it did not happen and never will
	returnMayApply        // not yet, but the record is still at its version
	returnUnknown         // it fell out of the record's window of nonces
)

// returnOutcome says what became of p, the record now being rec at
// version. It concludes that p did not land only from a record that moved
// past p's version with the return count exactly where p found it: a count
// that went back (a rewrite that dropped the fields: a node of a version
// before return nonces, a hand edit) or a first return (whose count a
// dropped field would also show) leaves it unknown, and a record at or
// below p's version (a read that lags) decides nothing yet.
func returnOutcome(rec tagRecord, version int32, p pendingReturn) int {
	behind := rec.ReturnSeq - p.seq
	switch {
	case behind < 0 && version <= p.version:
		return returnMayApply // not recorded yet; it can still land on its version
	case behind < 0 && rec.ReturnSeq == p.seq-1 && p.seq > 1:
		return returnNot
	case behind < 0:
		return returnUnknown
	case behind >= int64(len(rec.Returns)):
		return returnUnknown
	case rec.Returns[len(rec.Returns)-1-int(behind)] == p.nonce:
		return returnApplied
	}
	return returnNot
}

// readRecordWhileUnavailable reads the tag record, retrying while
// ZooKeeper is unreachable until ctx ends; synced first, it is at least as
// new as the leader (a follower that lags must not make a return that
// happened look as if it did not).
func (s *ZKStore) readRecordWhileUnavailable(ctx context.Context, tag string, synced bool) (tagRecord, map[string]json.RawMessage, int32, error) {
	backoff := 50 * time.Millisecond
	for {
		var err error
		if synced {
			err = s.z.Sync(ctx, s.tagPath(tag))
		}
		if err == nil {
			rec, raw, version, rerr := s.readRecord(ctx, tag)
			if rerr == nil || !zkclient.Transient(rerr) {
				return rec, raw, version, rerr
			}
			err = rerr
		}
		if errors.Is(err, zk.ErrNoNode) {
			return tagRecord{}, nil, 0, fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
		}
		if !zkclient.Transient(err) {
			return tagRecord{}, nil, 0, err
		}
		if !clock.Sleep(ctx, backoff) {
			return tagRecord{}, nil, 0, fmt.Errorf("%w (%w)", zkclient.Unavailable(err), ctx.Err())
		}
		backoff = min(2*backoff, time.Second)
	}
}

// holderRecord is a holders/ znode.
type holderRecord struct {
	Held      []Range `json:"held"`
	UpdatedMS int64   `json:"updated_ms"`
}

// Publish records which ranges holder has (ephemeral: it goes with the
// session); an empty list removes the record.
func (s *ZKStore) Publish(ctx context.Context, tag, holder string, held []Range) error {
	path := s.holdersPath(tag) + "/" + zkclient.EscapeName(holder)
	if len(held) == 0 {
		if err := s.z.Delete(ctx, path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("clear holder %s of %q: %w", holder, tag, zkclient.Unavailable(err))
		}
		return nil
	}
	data, err := json.Marshal(holderRecord{Held: held, UpdatedMS: time.Now().UnixMilli()})
	if err != nil {
		return err
	}
	if _, err := s.z.Set(ctx, path, data, -1); err == nil {
		return nil
	} else if !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("publish holder %s of %q: %w", holder, tag, zkclient.Unavailable(err))
	}
	if _, err := s.z.Create(ctx, path, data, zk.FlagEphemeral, s.acl); err != nil {
		return fmt.Errorf("publish holder %s of %q: %w", holder, tag, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	return nil
}

// Holders reads which node holds which ranges of tag.
func (s *ZKStore) Holders(ctx context.Context, tag string) (map[string][]Range, error) {
	names, err := s.z.Children(ctx, s.holdersPath(tag))
	if err != nil {
		return nil, fmt.Errorf("list holders of %q: %w", tag, zkclient.Unavailable(err))
	}
	out := map[string][]Range{}
	for _, n := range names {
		b, _, err := s.z.Get(ctx, s.holdersPath(tag)+"/"+n)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read holder %s of %q: %w", n, tag, zkclient.Unavailable(err))
		}
		var h holderRecord
		if json.Unmarshal(b, &h) == nil {
			name, err := zkclient.UnescapeName(n)
			if err != nil {
				name = n
			}
			out[name] = h.Held
		}
	}
	return out, nil
}
