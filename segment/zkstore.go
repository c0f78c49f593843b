package segment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

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
