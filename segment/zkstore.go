package segment

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// maxCASAttempts bounds the compare-and-set loop of one Alloc: every lost
// race means another allocator got a range, so the loop ends quickly unless
// hundreds of allocators race one tag.
const maxCASAttempts = 1000

// ZKStore keeps segment tags in ZooKeeper (Store):
//
//	/snowflaked/<cluster>/segments/<tag>                 {"max_id","start","step","max_step",…}
//	/snowflaked/<cluster>/segments/<tag>/returned/<lo>-<hi>@<inc>  (persistent, empty; lo, hi 19 digits; inc the tag's incarnation)
//	/snowflaked/<cluster>/segments/<tag>/holders/<node>      (ephemeral, {"held":[…],"updated_ms"})
//	/snowflaked/<cluster>/segments/<tag>/key                 (an opaque tag's key; the cluster's credentials only)
//	/snowflaked/<cluster>/segments/<tag>/token               (a token tag's token hashes, TokenSet; the cluster's credentials only)
//
// A tag's incarnation is its znode's creation zxid: every range and key is
// bound to it, so a tag deleted and created again shares nothing with the
// one before (R7).
type ZKStore struct {
	conn    zkconn.Conn
	z       zkclient.Client
	cluster string // the cluster znode
	acl     []zk.ACL
	rootACL []zk.ACL // of the tombstones' root, shared by every cluster
	keyACL  []zk.ACL // of opaque tags' keys: the cluster's credentials only (open without --zk-auth)
	log     zerolog.Logger

	possiblyLost atomic.Int64

	ops    atomic.Uint64 // numbers the reads and writes of tag records, in the order they start
	seenMu sync.Mutex
	seen   map[tagInc]seenMax // per tag incarnation, the highest record this store has read or written

	tokensMu   sync.Mutex
	tokens     map[tagInc]cachedTokens // token tags' hashes, as last read (Tokens, WatchTag's poll)
	tokenStale time.Duration           // ZKConfig.TokenStaleLimit (0: DefaultTokenStaleLimit)
}

// cachedTokens is a token set and when the read that gave it started (a
// monotonic reading): its age counts from then, not from the answer, so a
// slow read never stretches how long a rotated-out token serves.
type cachedTokens struct {
	set TokenSet
	at  time.Time
}

// tagInc names one incarnation of a tag.
type tagInc struct {
	tag string
	inc int64
}

// seenMax is the highest tag record a store has seen for a tag, and the
// number of the operation that showed it. Records are ordered by max_id,
// then by version (the tag znode's Stat.Version): within one incarnation
// both only grow, since every write of the record (alloc, return, take,
// set-max) is a version-checked set that never lowers max_id.
type seenMax struct {
	maxID   int64
	version int32
	at      uint64
}

// below reports whether a record of max_id maxID at version is older than
// the one seen: a lower max_id, or the same at a lower version. A max_id
// above the one seen is newer whatever its version: set-max, the
// operator's answer to ErrWentBack, raises max_id above the one forgotten.
func (m seenMax) below(maxID int64, version int32) bool {
	return maxID < m.maxID || maxID == m.maxID && version < m.version
}

// ErrWentBack: a tag's record in ZooKeeper is older than one this store saw
// before (a lower max_id, or the same max_id at a lower version). ZooKeeper
// lost acknowledged writes (a 3.8 ensemble that lost a quorum's disks, or a
// known bug of its sync under repeated leader kills): the ranges allocated,
// or taken from returned/, since were handed out already, so none is taken
// from it.
var ErrWentBack = errors.New("ZooKeeper's record went back")

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

// PossiblyLost counts the IDs of ranges whose allocation or take had an
// unknown outcome (ZooKeeper's answer lost, and the record moved on since):
// they may be lost, never issued twice.
func (s *ZKStore) PossiblyLost() int64 { return s.possiblyLost.Load() }

// ZKConfig says which cluster's tags to use.
type ZKConfig struct {
	Servers []string // ZooKeeper "host:port" addresses
	Cluster string
	Auth    string // "user:password" or ""
	// Timeout bounds the wait for a first session and each ZooKeeper call
	// (default 10s).
	Timeout time.Duration
	Log     zerolog.Logger
	// Dial opens the ZooKeeper client; nil means zkconn.Dial.
	Dial zkconn.Dialer
	// TokenStaleLimit is how long token hashes the store could not read
	// again are honoured, from the start of the read that gave them
	// (0: DefaultTokenStaleLimit; else within CheckTokenStaleLimit).
	TokenStaleLimit time.Duration
}

// OpenZK connects to ZooKeeper with a session of its own (segment
// serving depends neither on the worker lease nor on the clock) and makes
// sure segments/ exists. The cluster must exist.
func OpenZK(ctx context.Context, cfg ZKConfig) (*ZKStore, error) {
	stale := cmp.Or(cfg.TokenStaleLimit, DefaultTokenStaleLimit)
	if err := CheckTokenStaleLimit(stale); err != nil {
		return nil, fmt.Errorf("open segments: %w", err)
	}
	z, err := zkclient.DialCluster(ctx, zkclient.Config{Servers: cfg.Servers, Cluster: cfg.Cluster, Auth: cfg.Auth, Timeout: cfg.Timeout, Log: cfg.Log, Dial: cfg.Dial})
	if err != nil {
		return nil, fmt.Errorf("open segments: %w", err)
	}
	acl, rootACL := zkclient.ACLs(cfg.Auth)
	s := &ZKStore{conn: z.Conn, z: z, cluster: zkclient.ClusterPath(cfg.Cluster), acl: acl, rootACL: rootACL, log: cfg.Log, keyACL: zk.WorldACL(zk.PermAll), tokenStale: stale}
	if user, pass, ok := strings.Cut(cfg.Auth, ":"); ok {
		s.keyACL = zk.DigestACL(zk.PermAll, user, pass) // no world read: the cluster's credentials only
	}
	if err := s.z.Ensure(ctx, s.root(), nil, acl); err != nil {
		s.conn.Close()
		return nil, fmt.Errorf("open segments: %w", zkclient.Unavailable(err))
	}
	return s, nil
}

// Cluster returns the store's ZooKeeper client and the cluster znode's
// path, for commands that change the cluster's settings (its required
// features) around what they do to tags.
func (s *ZKStore) Cluster() (zkclient.Client, string) { return s.z, s.cluster }

// Close ends the store's session (its holder records go with it).
func (s *ZKStore) Close() { s.conn.Close() }

// Connected reports whether the session is up right now.
func (s *ZKStore) Connected() bool { return s.conn.State() == zk.StateHasSession }

func (s *ZKStore) root() string                   { return s.cluster + "/segments" }
func (s *ZKStore) tagPath(tag string) string      { return s.root() + "/" + tag }
func (s *ZKStore) returnedPath(tag string) string { return s.tagPath(tag) + "/returned" }
func (s *ZKStore) holdersPath(tag string) string  { return s.tagPath(tag) + "/holders" }
func (s *ZKStore) keyPath(tag string) string      { return s.tagPath(tag) + "/key" }
func (s *ZKStore) tokenPath(tag string) string    { return s.tagPath(tag) + "/token" }

// returnedRangePath is the znode of returned range r of incarnation inc.
func (s *ZKStore) returnedRangePath(tag string, r Range, inc int64) string {
	return s.returnedPath(tag) + "/" + rangeName(r, inc)
}

// markedPath is the znode every incarnation gets once it has a marker: a
// stale write that would add a marker to a newer incarnation fails on it.
func (s *ZKStore) markedPath(tag string) string { return s.tagPath(tag) + "/incarnation" }

// markerPath is the marker znode of one incarnation.
func (s *ZKStore) markerPath(tag, marker string) string { return s.tagPath(tag) + "/inc-" + marker }

// guard returns the operations that make a write of rec (read from tag)
// commit only on rec's incarnation, to go first in the write's multi, and
// rec as it must then be written. A version-checked set alone is not
// enough: a tag deleted and created again can reach the version a stalled
// writer read, and the set would put the old incarnation's max_id back
// into the new one. ZooKeeper cannot check a creation zxid, so each
// incarnation has a marker znode of its own: the multi checks it exists.
// A record without a marker (a tag created before markers) gets one in
// the same multi, which also creates markedPath: on a newer incarnation,
// which has it already, that fails and nothing is written.
func (s *ZKStore) guard(tag string, rec tagRecord) ([]any, tagRecord) {
	if rec.Marker != "" {
		return []any{&zk.CheckVersionRequest{Path: s.markerPath(tag, rec.Marker), Version: -1}}, rec
	}
	rec.Marker = zkclient.NewToken()
	return []any{
		&zk.CreateRequest{Path: s.markedPath(tag), Data: []byte(rec.Marker), Acl: s.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: s.markerPath(tag, rec.Marker), Acl: s.acl, Flags: zk.FlagPersistent},
	}, rec
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

// Incarnation is the cluster's incarnation, which binds a node's segment
// state file to this ZooKeeper. A cluster that requires a feature this
// release does not know (or is being deleted) is an error wrapping
// zkclient.ErrUnknownFeature: segment mode must not bind to it.
func (s *ZKStore) Incarnation(ctx context.Context) (string, error) {
	b, _, err := s.z.Get(ctx, s.cluster)
	if err != nil {
		return "", fmt.Errorf("read cluster: %w", zkclient.Unavailable(err))
	}
	h, err := zkclient.DecodeClusterHeader(b)
	if err != nil {
		return "", fmt.Errorf("read cluster: %w", err)
	}
	return h.Incarnation, nil
}

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

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only types of this package, which always marshal
	}
	return b
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
	var returned []Range
	if period == "" {
		var err error
		if returned, err = s.returned(ctx, tag, inc); err != nil {
			return Range{}, Tag{}, err
		}
	}
	for _, r := range returned {
		if r.Lo < above {
			continue
		}
		t, took, err := s.take(ctx, tag, inc, r)
		if err != nil {
			return Range{}, Tag{}, err
		}
		if took {
			return r, t, nil
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

// ErrNoToken: the tag does not require a token (RotateToken).
var ErrNoToken = errors.New("the tag requires no token")

// RotateToken gives a tag that requires a token a new one, which it
// returns (shown once): the tokens valid before stay valid for grace
// (0: not at all), then expire. The write is checked against the tag's
// incarnation (its marker) and the token znode's version: a tag deleted
// and created again meanwhile is not touched. ErrNoToken when the tag
// requires none.
func (s *ZKStore) RotateToken(ctx context.Context, tag string, grace time.Duration) (string, error) {
	if grace < 0 {
		return "", fmt.Errorf("rotate the token of %q: grace %v is negative", tag, grace)
	}
	for range maxCASAttempts {
		rec, _, _, err := s.readRecord(ctx, tag)
		if err != nil {
			return "", fmt.Errorf("rotate the token of %q: %w", tag, err)
		}
		if !rec.RequireToken {
			return "", fmt.Errorf("rotate the token of %q: %w (it was created without --require-token)", tag, ErrNoToken)
		}
		if rec.Marker == "" {
			return "", fmt.Errorf("rotate the token of %q: its record has no incarnation marker", tag)
		}
		b, tst, err := s.z.Get(ctx, s.tokenPath(tag))
		if err != nil {
			return "", fmt.Errorf("rotate the token of %q: read %s: %w", tag, s.tokenPath(tag), zkclient.Unavailable(zkclient.AuthHint(err)))
		}
		var set TokenSet
		if err := json.Unmarshal(b, &set); err != nil {
			return "", fmt.Errorf("rotate the token of %q: %s: %w", tag, s.tokenPath(tag), err)
		}
		if set.Incarnation != rec.Incarnation {
			set = TokenSet{} // another incarnation's (or unbound): nothing of it stays valid
		}
		token := NewToken()
		next := set.rotated(HashToken([]byte(token)), time.Now(), grace)
		next.Incarnation = rec.Incarnation
		_, err = s.z.Multi(ctx,
			&zk.CheckVersionRequest{Path: s.markerPath(tag, rec.Marker), Version: -1},
			&zk.SetDataRequest{Path: s.tokenPath(tag), Data: mustJSON(next), Version: tst.Version})
		switch {
		case err == nil:
			return token, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			continue // rotated, or deleted, meanwhile: look again
		}
		return "", fmt.Errorf("rotate the token of %q: %w", tag, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	return "", fmt.Errorf("rotate the token of %q: lost the compare-and-set %d times", tag, maxCASAttempts)
}

// Tokens implements TokenStore: the token set of incarnation inc of tag,
// from the cache when it was read within two tag polls (WatchTag's poll
// refreshes it), else from ZooKeeper (the tag's incarnation checked before
// and after, as for a key). When ZooKeeper cannot answer, the set last read
// serves (its grace expiries still apply) while the read that gave it
// started at most the token stale limit ago; past that, or with no set
// read at all, ErrTokensUnconfirmed, until a read succeeds again. It needs
// the cluster's credentials when the cluster runs with --zk-auth.
func (s *ZKStore) Tokens(ctx context.Context, tag string, inc int64) (TokenSet, error) {
	k := tagInc{tag, inc}
	limit := s.tokenStaleLimit()
	if c, ok := s.cachedTokens(k); ok && time.Since(c.at) < min(2*tagPoll, limit) {
		return c.set, nil
	}
	set, err := s.readTokens(ctx, tag, inc)
	switch {
	case err == nil:
		return set, nil
	case errors.Is(err, ErrTagGone), errors.Is(err, ErrUnknownTag),
		!zkclient.Transient(err) && !errors.Is(err, context.DeadlineExceeded):
		return TokenSet{}, err
	}
	// ZooKeeper does not answer. The cache is looked at again, now: a
	// poll may have filled it meanwhile, and the age that counts is the
	// one at the answer, not at the request.
	c, ok := s.cachedTokens(k)
	if !ok {
		return TokenSet{}, fmt.Errorf("%w: tag %q: no token hashes read yet, and ZooKeeper does not answer: %w", ErrTokensUnconfirmed, tag, err)
	}
	if age := time.Since(c.at); age > limit && !mutation.Broken(mutation.TokenStaleUnbounded) {
		return TokenSet{}, fmt.Errorf("%w: tag %q: token hashes last read %v ago, past the token stale limit %v, and ZooKeeper does not answer: %w",
			ErrTokensUnconfirmed, tag, age.Round(time.Millisecond), limit, err)
	}
	return c.set, nil
}

// tokenStaleLimit is ZKConfig.TokenStaleLimit (DefaultTokenStaleLimit for
// a store made without OpenZK).
func (s *ZKStore) tokenStaleLimit() time.Duration {
	return cmp.Or(s.tokenStale, DefaultTokenStaleLimit)
}

// cachedTokens is the cache's set of k, if it has one.
func (s *ZKStore) cachedTokens(k tagInc) (cachedTokens, bool) {
	s.tokensMu.Lock()
	defer s.tokensMu.Unlock()
	c, ok := s.tokens[k]
	return c, ok
}

// readTokens reads and caches the token set of incarnation inc of tag,
// stamped with when the read started. A read that started before the one
// cached (its answer came later) leaves the cache as it is: one session's
// requests are answered in order, so it shows no newer set.
func (s *ZKStore) readTokens(ctx context.Context, tag string, inc int64) (TokenSet, error) {
	start := time.Now()
	if err := s.checkIncarnation(ctx, tag, inc); err != nil {
		return TokenSet{}, err
	}
	b, _, err := s.z.Get(ctx, s.tokenPath(tag))
	if err == nil {
		err = s.checkIncarnation(ctx, tag, inc)
	}
	switch {
	case errors.Is(err, ErrTagGone), errors.Is(err, ErrUnknownTag):
		return TokenSet{}, err
	case errors.Is(err, zk.ErrNoAuth):
		return TokenSet{}, fmt.Errorf("%w: %s is readable only with the --zk-auth credentials the tag was created with, %s", err, s.tokenPath(tag), s.ownAuth())
	case errors.Is(err, zk.ErrNoNode):
		return TokenSet{}, fmt.Errorf("tag %q requires a token and has no token znode %s", tag, s.tokenPath(tag))
	case err != nil:
		return TokenSet{}, fmt.Errorf("read %s: %w", s.tokenPath(tag), zkclient.Unavailable(err))
	}
	var set TokenSet
	if err := json.Unmarshal(b, &set); err != nil {
		return TokenSet{}, fmt.Errorf("tag %q: bad token znode: %w", tag, err)
	}
	k := tagInc{tag, inc}
	s.tokensMu.Lock()
	if s.tokens == nil {
		s.tokens = map[tagInc]cachedTokens{}
	}
	if len(s.tokens) >= maxCachedTokenSets {
		clear(s.tokens)
	}
	if c, ok := s.tokens[k]; !ok || !start.Before(c.at) {
		s.tokens[k] = cachedTokens{set: set, at: start}
	}
	s.tokensMu.Unlock()
	return set, nil
}

// ownAuth says which credentials this store's session has, for a read
// its ACL refused.
func (s *ZKStore) ownAuth() string {
	if len(s.keyACL) == 1 && s.keyACL[0].Scheme == "digest" {
		user, _, _ := strings.Cut(s.keyACL[0].ID, ":")
		return fmt.Sprintf("and this node has those of user %q, not them", user)
	}
	return "and this node runs without --zk-auth"
}

// maxCachedTokenSets bounds the token cache (tags, incarnations).
const maxCachedTokenSets = 4096
