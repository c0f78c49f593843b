package segment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// cachedTokens is a token set and when the read that gave it started (a
// monotonic reading): its age counts from then, not from the answer, so a
// slow read never stretches how long a rotated-out token serves.
type cachedTokens struct {
	set TokenSet
	at  time.Time
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
