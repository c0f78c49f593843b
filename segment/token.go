package segment

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors of tags that require a token (Tag.RequireToken).
var (
	// ErrTokenRequired: the tag requires a token and the request had none.
	ErrTokenRequired = errors.New("token required")
	// ErrTokenInvalid: the request's token is none of the tag's valid ones.
	ErrTokenInvalid = errors.New("token invalid")
	// ErrTokensUnconfirmed: the store cannot say which tokens the tag
	// accepts now: ZooKeeper does not answer, and the hashes it last gave
	// were read longer ago than the store's token stale limit (or never).
	// No token is honoured until ZooKeeper answers again, so a rotation
	// reaches a node cut off from ZooKeeper within that limit.
	ErrTokensUnconfirmed = errors.New("tokens unconfirmed")
	// ErrCountAboveMax: a request asked for more IDs than the tag's
	// per-request ceiling (Tag.MaxCount).
	ErrCountAboveMax = errors.New("count above the tag's max count")
)

// CountAboveMaxError is ErrCountAboveMax with the count asked for and the
// tag's ceiling.
type CountAboveMaxError struct {
	Tag        string
	Asked, Max int64
}

// Error names the tag, the count asked for and the ceiling.
func (e *CountAboveMaxError) Error() string {
	return fmt.Sprintf("tag %q: %v: %d IDs asked, at most %d per request", e.Tag, ErrCountAboveMax, e.Asked, e.Max)
}

// Unwrap gives ErrCountAboveMax.
func (e *CountAboveMaxError) Unwrap() error { return ErrCountAboveMax }

// TokenSize is how many random bytes a tag's token has (printed base64url,
// 43 characters).
const TokenSize = 32

// NewToken makes a tag token: TokenSize bytes of crypto/rand, base64url
// without padding. Only its hash (HashToken) is stored.
func NewToken() string {
	b := make([]byte, TokenSize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// HashToken is the SHA-256 of a token's text, hex: what ZooKeeper keeps. A
// plain hash suffices for a random 256-bit token (nothing to guess from).
func HashToken(token []byte) string {
	h := sha256.Sum256(token)
	return hex.EncodeToString(h[:])
}

// TokenHash is one valid token of a tag, by its hash.
type TokenHash struct {
	SHA256 string `json:"sha256"`
	// ExpiresMS (milliseconds since the Unix epoch) ends the token's
	// validity; 0: valid until the next rotation (which gives it an
	// expiry, the grace period).
	ExpiresMS int64 `json:"expires_ms,omitempty"`
}

// TokenSet is a tag's token znode (segments/<tag>/token): the hashes of the
// tokens it accepts, bound to the tag's incarnation (a tag created again
// never accepts the tokens of the one before, R7).
type TokenSet struct {
	Incarnation int64       `json:"incarnation"`
	Hashes      []TokenHash `json:"hashes"`
}

// Match reports whether token is one of the set's tokens valid at now. It
// compares every hash in constant time.
func (s TokenSet) Match(token []byte, now time.Time) bool {
	h := sha256.Sum256(token)
	want := make([]byte, sha256.Size)
	ok := 0
	for _, th := range s.Hashes {
		if th.ExpiresMS != 0 && now.UnixMilli() >= th.ExpiresMS {
			continue
		}
		if n, err := hex.Decode(want, []byte(th.SHA256)); err != nil || n != sha256.Size {
			continue
		}
		ok |= subtle.ConstantTimeCompare(h[:], want)
	}
	return ok == 1
}

// rotated is the set after a rotation at now: the new hash, valid until
// the next rotation, and every hash still valid, expiring at now+grace at
// the latest (grace 0: at once, dropped).
func (s TokenSet) rotated(hash string, now time.Time, grace time.Duration) TokenSet {
	out := TokenSet{Incarnation: s.Incarnation, Hashes: []TokenHash{{SHA256: hash}}}
	until := now.Add(grace).UnixMilli()
	for _, th := range s.Hashes {
		exp := th.ExpiresMS
		if exp == 0 || exp > until {
			exp = until
		}
		if exp > now.UnixMilli() {
			out.Hashes = append(out.Hashes, TokenHash{SHA256: th.SHA256, ExpiresMS: exp})
		}
	}
	return out
}

// The token stale limit: how long a store that cannot reach ZooKeeper
// goes on honouring the token hashes it read last, counted from when that
// read started (ZKConfig.TokenStaleLimit, snowflaked's --token-stale-limit).
// Past it, a token tag answers ErrTokensUnconfirmed until ZooKeeper answers
// again: a token rotated out reaches a node cut off from ZooKeeper within
// the limit.
const (
	// DefaultTokenStaleLimit is the limit when none is set.
	DefaultTokenStaleLimit = 10 * time.Second
	// MinTokenStaleLimit is two polls of a tag: a shorter limit would
	// refuse tokens whenever one poll's read is late.
	MinTokenStaleLimit = 2 * tagPoll
	// MaxTokenStaleLimit bounds how long a rotated-out token may serve on
	// a node cut off from ZooKeeper.
	MaxTokenStaleLimit = 10 * time.Minute
)

// CheckTokenStaleLimit says what is wrong with a token stale limit (nil
// when it is within MinTokenStaleLimit..MaxTokenStaleLimit).
func CheckTokenStaleLimit(d time.Duration) error {
	if d < MinTokenStaleLimit || d > MaxTokenStaleLimit {
		return fmt.Errorf("token stale limit %v: want %v..%v", d, MinTokenStaleLimit, MaxTokenStaleLimit)
	}
	return nil
}

// TokenStore is what a Store gives for tags that require a token: their
// token hashes. A store without it serves no such tag.
type TokenStore interface {
	// Tokens returns the token hashes of incarnation inc of tag, from a
	// cache at most a tag poll old when there is one (no ZooKeeper read
	// per request): ErrTagGone when the tag is of another incarnation,
	// ErrTokensUnconfirmed when the store cannot read them and has none
	// read recently enough to go on honouring.
	Tokens(ctx context.Context, tag string, inc int64) (TokenSet, error)
}

// admitLocked checks a request for n IDs of b's tag against its ceiling;
// it reports whether the tag requires a token as well (checkToken, without
// b.mu held: the token hashes may have to be read from the store).
func (b *tagBuf) admitLocked(n int) (needToken bool, err error) {
	if b.maxCount > 0 && int64(n) > b.maxCount {
		return false, &CountAboveMaxError{Tag: b.name, Asked: int64(n), Max: b.maxCount}
	}
	return b.token, nil
}

// checkToken checks token against the hashes of incarnation inc of b's
// tag.
func (b *tagBuf) checkToken(ctx context.Context, token []byte, inc int64) error {
	if len(token) == 0 {
		b.refusedRequired.Add(1)
		return fmt.Errorf("tag %q: %w", b.name, ErrTokenRequired)
	}
	ts, ok := b.svc.cfg.Store.(TokenStore)
	if !ok {
		return fmt.Errorf("%w: tag %q requires a token and this store holds none", ErrUnavailable, b.name)
	}
	lctx, cancel := b.svc.takeRead(ctx)
	set, err := ts.Tokens(lctx, b.name, inc)
	cancel()
	switch {
	case errors.Is(err, ErrTagGone), errors.Is(err, ErrUnknownTag):
		// Deleted (perhaps created again) since the buffer was made: it
		// is dropped, and the Take looks the tag up afresh (unknown tag,
		// or the new incarnation), as after a load that finds it gone.
		_ = b.retire(err) // a failed state write is the mark worker's to report
		return errRetired
	case errors.Is(err, ErrTokensUnconfirmed):
		err = fmt.Errorf("%w: tag %q: %w", ErrUnavailable, b.name, err)
		b.tokenLog.failed(b, err)
		return err
	case err != nil:
		err = fmt.Errorf("%w: read the tokens of tag %q: %v", ErrUnavailable, b.name, err)
		b.tokenLog.failed(b, err)
		return err
	}
	if set.Incarnation != inc || !set.Match(token, b.svc.cfg.Now()) {
		b.refusedInvalid.Add(1)
		return fmt.Errorf("tag %q: %w", b.name, ErrTokenInvalid)
	}
	return nil
}

// tokenLogEvery is how often, at most, a node logs that it cannot read one
// tag's tokens: once at the first failure, then once a minute while they
// go on, each line with the cause and the requests refused since the last.
const tokenLogEvery = time.Minute

// tokenFailLog rate-limits the log of one tag's failed token reads.
type tokenFailLog struct {
	mu      sync.Mutex
	at      time.Time // when the last line was written (zero: none yet)
	refused int64     // requests refused since, not logged yet
}

// failed notes a request of b's tag refused because its tokens could not
// be read (err), and logs it when no line was written for the tag within
// tokenLogEvery.
func (l *tokenFailLog) failed(b *tagBuf, err error) {
	now := b.svc.cfg.Now()
	l.mu.Lock()
	l.refused++
	if !l.at.IsZero() && now.Sub(l.at) < tokenLogEvery && now.After(l.at) {
		l.mu.Unlock()
		return
	}
	refused := l.refused
	l.at, l.refused = now, 0
	l.mu.Unlock()
	b.svc.cfg.Log.Warn().Err(err).Str("tag", b.name).Int64("refused", refused).
		Msg("segment: the tag's requests answer 503 segment_unavailable: this node cannot check their tokens (logged at most once a minute per tag)")
}
