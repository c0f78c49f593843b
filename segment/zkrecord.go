package segment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// maxReturnNonces is how many returns' nonces a tag record keeps: a
// returner whose answer was lost can tell whether its return happened as
// long as fewer returns of the tag followed it.
const maxReturnNonces = 32

// tagRecord is a tag's znode: the tag, the nonce of the last allocation
// (which tells an allocator whose write's answer was lost whether the
// write happened), and the nonces of the last returns (the same for a
// returner). ReturnSeq counts the returns ever recorded; Returns holds the
// nonces of the last maxReturnNonces of them, oldest first, so the nonce of
// return number q (q <= ReturnSeq) is at Returns[len-1-(ReturnSeq-q)].
type tagRecord struct {
	Tag
	// Marker names the incarnation's marker znode (<tag>/inc-<marker>),
	// which every write of the record checks in the same multi (guard).
	// Empty in records of tags created before markers: the first write
	// of this release adds one.
	Marker    string   `json:"marker,omitempty"`
	LastAlloc string   `json:"last_alloc,omitempty"`
	ReturnSeq int64    `json:"return_seq,omitempty"`
	Returns   []string `json:"returns,omitempty"`
}

// decodeRecord reads a tag record and keeps every field as raw JSON too,
// so that a rewrite keeps the fields of other versions.
func decodeRecord(b []byte) (tagRecord, map[string]json.RawMessage, error) {
	var rec tagRecord
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &rec); err != nil {
		return tagRecord{}, nil, err
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return tagRecord{}, nil, err
	}
	return rec, raw, nil
}

// encodeRecord writes rec over raw: the fields this version knows from rec,
// every other field as it was.
func encodeRecord(rec tagRecord, raw map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	var known map[string]json.RawMessage
	if err := json.Unmarshal(b, &known); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(raw)+len(known))
	for k, v := range raw {
		out[k] = v
	}
	for _, k := range []string{"last_alloc", "return_seq", "returns", "description"} {
		delete(out, k) // omitempty: absent from known when empty
	}
	for k, v := range known {
		out[k] = v
	}
	return json.Marshal(out)
}

// rangeName is a returned range's znode name: the range and the
// incarnation of the tag it belongs to. Releases before incarnations wrote
// <lo>-<hi> and cannot parse this form (they skip it).
func rangeName(r Range, inc int64) string { return fmt.Sprintf("%019d-%019d@%d", r.Lo, r.Hi, inc) }

// parseRangeName reads a returned range's name; inc is 0 for the form of
// releases before incarnations, whose ranges belong to no known
// incarnation and are never taken (R7).
func parseRangeName(name string) (r Range, inc int64, ok bool) {
	rest, incText, withInc := strings.Cut(name, "@")
	lo, hi, ok := strings.Cut(rest, "-")
	if !ok {
		return Range{}, 0, false
	}
	l, err1 := strconv.ParseInt(lo, 10, 64)
	h, err2 := strconv.ParseInt(hi, 10, 64)
	if err1 != nil || err2 != nil || l < 1 || h <= l {
		return Range{}, 0, false
	}
	if withInc {
		i, err := strconv.ParseInt(incText, 10, 64)
		if err != nil || i < 1 {
			return Range{}, 0, false
		}
		inc = i
	}
	return Range{Lo: l, Hi: h}, inc, true
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only types of this package, which always marshal
	}
	return b
}

// Tag reads a tag's record, with its incarnation.
func (s *ZKStore) Tag(ctx context.Context, tag string) (Tag, error) {
	t, _, err := s.readTag(ctx, tag)
	return t, err
}

func (s *ZKStore) readTag(ctx context.Context, tag string) (Tag, int32, error) {
	rec, _, version, err := s.readRecord(ctx, tag)
	return rec.Tag, version, err
}

// readRecord reads a tag's whole record (raw: every field, for a rewrite)
// and its version. A max_id below one this store saw is read again after a
// sync before it counts as gone back: a new session (after an expiry the
// client forgets what it has seen) may talk to a follower that lags.
func (s *ZKStore) readRecord(ctx context.Context, tag string) (tagRecord, map[string]json.RawMessage, int32, error) {
	rec, raw, version, err := s.readRecordOnce(ctx, tag)
	if !errors.Is(err, ErrWentBack) {
		return rec, raw, version, err
	}
	if serr := s.z.Sync(ctx, s.tagPath(tag)); serr != nil {
		return tagRecord{}, nil, 0, fmt.Errorf("read tag %q: %w", tag, zkclient.Unavailable(serr))
	}
	rec, raw, version, err = s.readRecordOnce(ctx, tag)
	if errors.Is(err, ErrWentBack) {
		s.log.Error().Err(err).Str("tag", tag).
			Msg("segment: ZooKeeper's max_id went back: it lost acknowledged writes; no range is taken from it until max_id is raised above the one seen")
	}
	return rec, raw, version, err
}

// readRecordOnce is readRecord without the second look.
func (s *ZKStore) readRecordOnce(ctx context.Context, tag string) (tagRecord, map[string]json.RawMessage, int32, error) {
	if err := ValidateTag(tag); err != nil {
		return tagRecord{}, nil, 0, err
	}
	op := s.ops.Add(1)
	b, st, err := s.z.Get(ctx, s.tagPath(tag))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return tagRecord{}, nil, 0, fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
	case err != nil:
		return tagRecord{}, nil, 0, fmt.Errorf("read tag %q: %w", tag, zkclient.Unavailable(err))
	}
	rec, raw, err := decodeRecord(b)
	if err != nil {
		return tagRecord{}, nil, 0, fmt.Errorf("tag %q: bad record: %w", tag, err)
	}
	rec.Name, rec.Incarnation = tag, st.Czxid
	if err := rec.Check(); err != nil {
		return tagRecord{}, nil, 0, fmt.Errorf("tag %q: bad record: %w", tag, err)
	}
	if err := s.see(tag, rec.Incarnation, rec.MaxID, st.Version, op); err != nil {
		return tagRecord{}, nil, 0, err
	}
	return rec, raw, st.Version, nil
}

// see records the tag record (its max_id at version) as shown by operation
// op (numbered when it started) for tag, and fails with ErrWentBack when it
// is older (seenMax.below) than one an earlier operation had shown before op
// started. A read that started before a write of this store was answered
// may show the older record (the two race in this process, not in
// ZooKeeper, which answers one session's requests in order, and never lets
// a reconnecting client see an older state than it has seen).
//
// The version catches what max_id alone cannot: a forgotten take or return
// leaves max_id as it was, but every take and return writes the record.
// It is kept per incarnation: a tag created again starts low again.
func (s *ZKStore) see(tag string, inc, maxID int64, version int32, op uint64) error {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	if s.seen == nil {
		s.seen = map[tagInc]seenMax{}
	}
	k := tagInc{tag, inc}
	cur, shown := s.seen[k], seenMax{maxID: maxID, version: version, at: op}
	switch {
	case cur.below(maxID, version) && cur.at < op && !mutation.Broken(mutation.WentBackUnchecked):
		return fmt.Errorf("tag %q: %w: max_id %d at version %d, this node saw max_id %d at version %d (raise max_id above %d)",
			tag, ErrWentBack, maxID, version, cur.maxID, cur.version, cur.maxID)
	case shown.below(cur.maxID, cur.version):
		s.seen[k] = shown
	}
	return nil
}

// List reads every tag, by name.
func (s *ZKStore) List(ctx context.Context) ([]Tag, error) {
	names, err := s.z.Children(ctx, s.root())
	if err != nil {
		return nil, fmt.Errorf("list tags: %w", zkclient.Unavailable(err))
	}
	slices.Sort(names)
	out := make([]Tag, 0, len(names))
	for _, n := range names {
		t, err := s.Tag(ctx, n)
		if errors.Is(err, ErrUnknownTag) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
