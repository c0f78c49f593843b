package segment

import (
	"cmp"
	"codeberg.org/snowflaked/snowflaked/internal/partstatus"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/ctxlock"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
)

// Defaults of Config.
const (
	defaultLongRange   = 30 * time.Minute
	defaultLoadTimeout = 5 * time.Second
	defaultWait        = 2 * time.Second
	defaultMarkAhead   = 250 * time.Millisecond
	// UnknownTagTTL: a tag the store said does not exist is answered from
	// memory for this long, so requests for made-up tags do not each read
	// ZooKeeper (at most maxUnknownTags remembered).
	UnknownTagTTL  = time.Second
	maxUnknownTags = 4096
)

// Config configures a Service.
type Config struct {
	Store Store // required
	// StateFile keeps, per tag, the IDs of the ranges held that are
	// certainly unissued, so a restart on the same disk resumes them (R2).
	// "" keeps nothing: a crash then loses every range held.
	StateFile string
	// Disk holds the state file (default disk.OS).
	Disk disk.Disk
	// Incarnation binds the state file to one ZooKeeper (R4).
	Incarnation string
	// Holder names this node in the tags' holders/ records.
	Holder string
	// LongRange: the step doubles while a range lasts less than half of it
	// and halves when one lasts longer (default 30m, Leaf's rule).
	LongRange time.Duration
	// LoadTimeout bounds one range load (default 5s).
	LoadTimeout time.Duration
	// Wait bounds how long Take waits for a range when the node has no ID
	// of the tag left (default 2s); then ErrUnavailable.
	Wait time.Duration
	// MarkAhead: the state file's mark stays at least a tenth of the step
	// ahead of issuing, or this long's worth of IDs at the recent rate if
	// that is more (default 250ms). A kill -9 loses at most that chunk.
	MarkAhead time.Duration
	// Now is the clock for the step rule (default time.Now).
	Now func() time.Time
	// PeriodClock is the clock that picks a reset tag's period: the node's
	// guarded clock, with an error while the node's clock checks do not
	// vouch for it (a reset tag is then not served). Default: Now.
	PeriodClock func() (time.Time, error)
	// Schedule arms the service's timers (nil: each waits as asked); the
	// simulations order them with one.
	Schedule clock.Schedule
	Log      zerolog.Logger
}

// Service hands out the IDs of every tag asked for, loading ranges on
// demand. It is safe for concurrent use.
type Service struct {
	cfg    Config
	ctx    context.Context // cancelled once Close's own deadline passes: loads in flight give up
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close: the workers end after the operation in flight
	wg     sync.WaitGroup

	mu      sync.Mutex
	tags    map[string]*tagBuf
	unknown map[string]time.Time // tags the store said do not exist, until when to believe it
	closed  bool

	fileMu ctxlock.Mutex // serialises state-file writes (and their snapshots; a write may hang)
	stalls atomic.Int64  // Takes that waited for a load or a mark
}

// state is the state file.
type state struct {
	Incarnation string `json:"incarnation"` // the cluster's (R4)
	// Unissued is the form of releases before tag incarnations: per tag,
	// the ranges, of no known incarnation. Read only to be dropped (R7):
	// never written, so a release that reads only it resumes nothing of a
	// file this one wrote.
	Unissued map[string][]Range  `json:"unissued,omitempty"`
	Tags     map[string]tagState `json:"tags,omitempty"` // per tag
}

// tagState is one tag's entry in the state file: the IDs certainly
// unissued, of the tag's incarnation inc.
type tagState struct {
	Incarnation int64   `json:"incarnation"`
	Opaque      *Opaque `json:"opaque,omitempty"` // the tag is opaque: served only with its incarnation's key
	Token       bool    `json:"token,omitempty"`  // the tag requires a token: served only once its hashes are read
	// MaxCount is the tag's ceiling per request (0: none, or a file of a
	// release before it was kept): a resumed tag keeps it while ZooKeeper
	// cannot say it.
	MaxCount int64   `json:"max_count,omitempty"`
	Ranges   []Range `json:"ranges"`
	// A reset tag's: it is one (served only once ZooKeeper confirmed its
	// record), the newest period it served and that period's base, so a
	// restart never serves an earlier period nor a value below the base.
	Reset  bool   `json:"reset,omitempty"`
	Period string `json:"period,omitempty"`
	Floor  int64  `json:"floor,omitempty"`
	Base   int64  `json:"base,omitempty"`
}

// takeRead bounds a read of the store made for a Take: a Take waits at
// most Wait (and a read at most LoadTimeout), its timer armed under the
// service's schedule.
func (s *Service) takeRead(ctx context.Context) (context.Context, context.CancelFunc) {
	return clock.WithTimeout(clock.WithSchedule(ctx, s.cfg.Schedule), min(s.cfg.LoadTimeout, s.cfg.Wait))
}

// stateLocked is what the state file keeps of b with its unissued ranges
// rs: what a resumed buffer needs before ZooKeeper answers.
func (b *tagBuf) stateLocked(rs []Range) tagState {
	return tagState{Incarnation: b.inc, Opaque: b.opaque, Token: b.token, MaxCount: b.maxCount, Ranges: rs, Reset: b.reset, Period: b.period, Floor: b.floor, Base: b.pbase}
}

// New checks cfg, reads the state file (ranges a crashed predecessor held)
// and returns the service. Tags are loaded when first asked for; resumed
// tags at once.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("new segment service: Store is required")
	}
	if cfg.LongRange <= 0 {
		cfg.LongRange = defaultLongRange
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = defaultLoadTimeout
	}
	if cfg.Wait <= 0 {
		cfg.Wait = defaultWait
	}
	if cfg.MarkAhead <= 0 {
		cfg.MarkAhead = defaultMarkAhead
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Disk == nil {
		cfg.Disk = disk.OS{}
	}
	if cfg.PeriodClock == nil {
		now := cfg.Now
		cfg.PeriodClock = func() (time.Time, error) { return now(), nil }
	}
	ctx, cancel := context.WithCancel(clock.WithSchedule(context.Background(), cfg.Schedule))
	s := &Service{cfg: cfg, ctx: ctx, cancel: cancel, stop: make(chan struct{}), fileMu: ctxlock.New(), tags: map[string]*tagBuf{}, unknown: map[string]time.Time{}}
	var resume map[string]tagState
	if cfg.StateFile != "" {
		st, err := readState(cfg.Disk, cfg.StateFile)
		switch {
		case err != nil:
			cancel()
			return nil, fmt.Errorf("new segment service: %w", err)
		case st.Incarnation != "" && st.Incarnation != cfg.Incarnation && !mutation.Broken(mutation.StateFileOfOtherZooKeeper):
			// R4: another ZooKeeper's ranges mean nothing here.
			cfg.Log.Warn().Str("file", cfg.StateFile).Str("file_incarnation", st.Incarnation).Str("incarnation", cfg.Incarnation).
				Msg("segment state file belongs to another ZooKeeper incarnation: its ranges are dropped")
		default:
			resume = st.Tags
			for tag, rs := range st.Unissued {
				// R7: ranges of no known incarnation may be of a tag deleted
				// since; they are lost, never resumed.
				var n int64
				for _, r := range rs {
					n += r.Len()
				}
				cfg.Log.Warn().Str("tag", tag).Int64("ids", n).
					Msg("segment: the state file's ranges of this tag carry no tag incarnation (written by an older release): they are dropped, never reissued")
			}
		}
		for tag, e := range resume {
			if ValidateTag(tag) != nil || len(e.Ranges) == 0 && e.Period == "" {
				continue
			}
			b := s.newBuf(tag, Tag{})
			b.inc, b.opaque, b.token, b.maxCount = e.Incarnation, e.Opaque, e.Token, e.MaxCount
			b.reset, b.period, b.floor, b.pbase, b.periodSaved = e.Reset, e.Period, e.Floor, e.Base, e.Period
			b.ranges = slices.Clone(e.Ranges)
			for _, r := range e.Ranges {
				b.held += r.Len()
			}
			if len(e.Ranges) > 0 {
				b.curLen = e.Ranges[0].Len()
			}
			s.tags[tag] = b
			cfg.Log.Info().Str("tag", tag).Int64("tag_incarnation", e.Incarnation).Int64("ids", b.held).Msg("segment: resumed ranges from the state file")
		}
	}
	// The buffers first, then their workers: a started worker may retire
	// its buffer (a gone incarnation) and take it out of s.tags at once.
	resumed := make([]*tagBuf, 0, len(s.tags))
	for _, b := range s.tags {
		resumed = append(resumed, b)
	}
	for _, b := range resumed {
		s.start(b)
		b.kickLoader() // a resumed tag's incarnation is checked at once
	}
	return s, nil
}

func readState(d disk.Disk, path string) (state, error) {
	data, err := d.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return state{}, nil
	}
	if err != nil {
		return state{}, fmt.Errorf("read segment state: %w", err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return state{}, fmt.Errorf("segment state file %s: %w (remove it to start without its ranges: they are then lost, never reissued)", path, err)
	}
	for tag, e := range st.Tags {
		rs := e.Ranges
		for i, r := range rs {
			if r.Lo < 1 || r.Hi <= r.Lo || (i > 0 && r.Lo < rs[i-1].Hi) {
				return state{}, fmt.Errorf("segment state file %s: tag %q: range %v is not increasing", path, tag, r)
			}
		}
		if e.Opaque != nil {
			if err := e.Opaque.check(); err != nil {
				return state{}, fmt.Errorf("segment state file %s: tag %q: %w", path, tag, err)
			}
		}
	}
	return st, nil
}

// maxRetired bounds how often one Take looks for a tag again after the
// incarnation it found was deleted under it.
const maxRetired = 3

// Take appends n IDs of tag to dst, increasing (and above every ID this
// service issued for the tag's incarnation before). It waits up to
// Config.Wait (and ctx) for a range load when the node has none left. An
// opaque tag's IDs are its counter's numbers under the key of the
// incarnation their ranges came from.
func (s *Service) Take(ctx context.Context, tag string, dst []int64, n int) ([]int64, error) {
	return s.TakeWithToken(ctx, tag, nil, dst, n)
}

// Period is the period a reset tag's numbers were issued in (the zero
// Period for other tags).
type Period struct {
	// Key is the period: 2026-12-07, 2026-12 or 2026.
	Key  string
	rule *ResetRule
}

// NewPeriod is the period of key (as ResetRule.PeriodOf names it) under
// rule: what TakePeriod returns, for a SegmentSource of another kind.
func NewPeriod(rule *ResetRule, key string) Period { return Period{Key: key, rule: rule} }

// IsZero reports whether p is no period: the numbers are a plain or
// opaque tag's IDs.
func (p Period) IsZero() bool { return p.rule == nil }

// Date is the period's date as the tag's format prints it.
func (p Period) Date() string { return p.rule.Date(p.Key) }

// AppendID appends the text of number n of the period, in the tag's format.
func (p Period) AppendID(dst []byte, n int64) []byte { return p.rule.AppendID(dst, p.Key, n) }

// TakePeriod is TakeWithToken that also says which period a reset tag's
// numbers are of: n numbers of one period, each printed by
// Period.AppendID. For other tags the Period is zero.
func (s *Service) TakePeriod(ctx context.Context, tag string, token []byte, dst []int64, n int) ([]int64, Period, error) {
	if n < 1 {
		return dst, Period{}, fmt.Errorf("take %d IDs of %q: want at least 1", n, tag)
	}
	for range maxRetired {
		b, err := s.buf(ctx, tag)
		if err != nil {
			return dst, Period{}, err
		}
		var key string
		dst, key, err = b.take(ctx, dst, n, token)
		if !errors.Is(err, errRetired) {
			var p Period
			if key != "" {
				b.mu.Lock()
				p = Period{Key: key, rule: b.rule}
				b.mu.Unlock()
			}
			return dst, p, err
		}
	}
	return dst, Period{}, fmt.Errorf("%w: tag %q was deleted under this node %d times in a row", ErrUnavailable, tag, maxRetired)
}

// Resets reports whether tag resets by period (reading its record on
// first use, as a Take does).
func (s *Service) Resets(ctx context.Context, tag string) (bool, error) {
	b, err := s.buf(ctx, tag)
	if err != nil {
		return false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reset, nil
}

// PeriodStore is what a Store gives for reset tags.
type PeriodStore interface {
	// AllocPeriod is Alloc for a node that serves period of a reset tag:
	// it starts the period (its base the record's max_id) if the record
	// has not got it, in the write that allocates the caller's range;
	// ErrPeriodPassed when a later period started already.
	AllocPeriod(ctx context.Context, tag string, inc, step int64, period string) (Range, Tag, error)
}

// TakeWithToken is Take for a request that carries token (nil: none). A
// tag that requires a token answers ErrTokenRequired without one and
// ErrTokenInvalid with one that is not among its valid tokens (its hashes
// are read from the store's cache, not from ZooKeeper per request); a
// request above the tag's MaxCount answers ErrCountAboveMax.
func (s *Service) TakeWithToken(ctx context.Context, tag string, token []byte, dst []int64, n int) ([]int64, error) {
	dst, _, err := s.TakePeriod(ctx, tag, token, dst, n)
	return dst, err
}

// KeyStore is what a Store gives for opaque tags: their keys. A store
// without it serves no opaque tag.
type KeyStore interface {
	// Key reads the key of incarnation inc of an opaque tag (ErrTagGone
	// when the tag is of another incarnation now).
	Key(ctx context.Context, tag string, inc int64) ([]byte, error)
}

// TagWatcher is what a Store gives to learn of a tag's deletion as it
// happens, not only at the next request for the tag. A store without it
// leaves a node serving a deleted tag's ranges until its next load.
type TagWatcher interface {
	// WatchTag arms a one-shot watch on incarnation inc of tag: the channel
	// yields true once that incarnation is deleted, false when the watch
	// ended for another reason (a lost session, or ctx ended: arm it again).
	// ctx bounds the watch's life, not only the call. ErrTagGone or
	// ErrUnknownTag when inc is gone already.
	WatchTag(ctx context.Context, tag string, inc int64) (<-chan bool, error)
}

// permutation returns the permutation of an opaque tag t, of its
// incarnation (nil for a plain one).
func (s *Service) permutation(ctx context.Context, tag string, t Tag) (*Permutation, error) {
	if t.Opaque == nil {
		return nil, nil
	}
	ks, ok := s.cfg.Store.(KeyStore)
	if !ok {
		return nil, fmt.Errorf("tag %q is opaque and this store holds no keys", tag)
	}
	key, err := ks.Key(ctx, tag, t.Incarnation)
	if err != nil {
		return nil, err
	}
	return NewPermutation(*t.Opaque, key)
}

// buf returns the tag's buffer, creating it (after checking the tag exists)
// on first use.
func (s *Service) buf(ctx context.Context, tag string) (*tagBuf, error) {
	s.mu.Lock()
	b, closed := s.tags[tag], s.closed
	until, known := s.unknown[tag]
	s.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case b != nil:
		return b, nil
	case known && s.cfg.Now().Before(until):
		return nil, fmt.Errorf("tag %q: %w", tag, ErrUnknownTag)
	}
	if err := ValidateTag(tag); err != nil {
		return nil, err
	}
	lctx, cancel := s.takeRead(ctx)
	t, err := s.cfg.Store.Tag(lctx, tag)
	var perm *Permutation
	if err == nil {
		perm, err = s.permutation(lctx, tag, t)
	}
	cancel()
	if err != nil {
		if errors.Is(err, ErrUnknownTag) {
			s.mu.Lock()
			if len(s.unknown) >= maxUnknownTags {
				clear(s.unknown)
			}
			s.unknown[tag] = s.cfg.Now().Add(UnknownTagTTL)
			s.mu.Unlock()
			return nil, err
		}
		return nil, fmt.Errorf("%w: read tag %q: %v", ErrUnavailable, tag, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if b = s.tags[tag]; b == nil {
		b = s.newBuf(tag, t)
		b.inc, b.opaque, b.perm = t.Incarnation, t.Opaque, perm
		b.to(bufVerified)
		s.tags[tag] = b
		s.start(b)
		b.kickWatch()
	}
	return b, nil
}

func (s *Service) newBuf(tag string, t Tag) *tagBuf {
	b := &tagBuf{svc: s, name: tag, kick: make(chan struct{}, 1), markKick: make(chan struct{}, 1), wake: make(chan struct{}), retired: make(chan struct{})}
	if t.Step > 0 {
		b.setTagLocked(t)
	}
	return b
}

func (s *Service) start(b *tagBuf) {
	s.wg.Add(2)
	go b.worker(markWork, b.markKick)
	go b.worker(loadWork, b.kick)
}

// persist writes the state file with b's mark moved to at least target
// (an ordinal), then lets b issue below it. Every write snapshots every
// tag, under fileMu, so marks on disk only rise (R2). b nil writes the
// snapshot only (a retired buffer's ranges leave the file).
func (s *Service) persist(b *tagBuf, target int64) error {
	if b == nil && s.cfg.StateFile == "" {
		return nil
	}
	if s.cfg.StateFile == "" {
		b.mu.Lock()
		b.permitted = b.held
		b.broadcastLocked()
		b.mu.Unlock()
		return nil
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	s.mu.Lock()
	bufs := s.buffersLocked()
	s.mu.Unlock()
	st := state{Incarnation: s.cfg.Incarnation, Tags: map[string]tagState{}}
	var newPermitted int64
	periods := make([]string, len(bufs))
	for i, t := range bufs {
		t.mu.Lock()
		p := t.permitted
		if t == b {
			p = max(p, min(target, t.held))
			newPermitted = p
		}
		// A reset tag's entry stays while it has a period, ranges or
		// not: the period must not go back after a restart.
		if rs := t.unissuedFromLocked(p); len(rs) > 0 || t.period != "" {
			st.Tags[t.name] = t.stateLocked(rs)
		}
		periods[i] = t.period
		t.mu.Unlock()
	}
	if err := s.write(st); err != nil {
		return err
	}
	for i, t := range bufs {
		t.mu.Lock()
		if t.periodSaved != periods[i] {
			t.periodSaved = periods[i]
			t.broadcastLocked()
		}
		t.mu.Unlock()
	}
	if b == nil {
		return nil
	}
	b.mu.Lock()
	b.permitted = max(b.permitted, newPermitted)
	b.broadcastLocked()
	b.mu.Unlock()
	return nil
}

func (s *Service) write(st state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode segment state: %w", err)
	}
	if err := s.cfg.Disk.WriteFileAtomic(s.cfg.StateFile, data, 0o600); err != nil {
		return fmt.Errorf("write segment state: %w", err)
	}
	return nil
}

// Close stops the service: no more IDs; the ranges held leave the state
// file (fsynced) and only then go back to ZooKeeper (R3), so a clean stop
// wastes nothing. It returns the IDs it could not give back (lost, never
// reissued) with the first error.
func (s *Service) Close(ctx context.Context) (wasted int64, err error) {
	bufs, ok := s.markClosed()
	if !ok {
		return 0, nil
	}
	// Loaders finish the operation in flight (a load cut short could lose
	// its range) unless ctx ends first; a range they got is in b.ranges.
	s.stopLoaders(ctx.Done())
	rest := map[*tagBuf][]Range{}
	for _, b := range bufs {
		b.mu.Lock()
		b.to(bufClosed)
		rest[b] = b.ranges
		b.ranges, b.held = nil, b.issued
		b.broadcastLocked()
		b.mu.Unlock()
	}
	if s.cfg.StateFile != "" && !mutation.Broken(mutation.ReturnBeforeFileWrite) {
		s.fileMu.Lock()
		werr := s.write(state{Incarnation: s.cfg.Incarnation})
		s.fileMu.Unlock()
		if werr != nil {
			// The file still lists the ranges: a restart resumes them. Giving
			// them back now could hand them out twice.
			return 0, fmt.Errorf("close segments: %w (the ranges stay in the state file for the next start)", werr)
		}
	}
	for _, b := range bufs {
		for _, r := range rest[b] {
			s.cfg.Log.Debug().Str("tag", b.name).Stringer("range", r).Msg("segment: returning a range")
			// Once: retried after its answer was lost and another node took
			// the range meanwhile, a return would hand it out twice. The
			// store resolves a lost answer itself; an error left means the
			// range is lost, never reissued.
			rerr := s.cfg.Store.Return(ctx, b.name, b.inc, r)
			if errors.Is(rerr, ErrTagGone) || errors.Is(rerr, ErrUnknownTag) {
				// Its incarnation is gone: never into the newer one.
				s.cfg.Log.Warn().Str("tag", b.name).Int64("tag_incarnation", b.inc).Stringer("range", r).
					Msg("segment: the tag was deleted since this node took the range: dropped, not returned")
				continue
			}
			if rerr != nil {
				wasted += r.Len()
				b.wasted.Add(r.Len())
				err = errors.Join(err, fmt.Errorf("return %s %v: %w", b.name, r, rerr))
				s.cfg.Log.Warn().Err(rerr).Str("tag", b.name).Stringer("range", r).Msg("segment: could not return a range: its IDs are lost, never reissued")
			}
		}
		if perr := s.cfg.Store.Publish(ctx, b.name, s.cfg.Holder, nil); perr != nil {
			s.cfg.Log.Debug().Err(perr).Str("tag", b.name).Msg("segment: clear holder record")
		}
	}
	return wasted, err
}

// Abandon stops the service without giving anything back, for a stop
// while ZooKeeper is unreachable (Close would take the ranges out of the
// state file and then fail to return them): no more IDs, and the state file
// lists exactly the IDs not issued, so the next start on this disk resumes
// right after the last one. If that write fails the file keeps its last
// mark (the IDs up to it are lost, none reissued).
func (s *Service) Abandon() error {
	bufs := s.halt()
	if s.cfg.StateFile == "" || bufs == nil {
		return nil
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	st := state{Incarnation: s.cfg.Incarnation, Tags: map[string]tagState{}}
	for _, b := range bufs {
		b.mu.Lock()
		if rs := b.unissuedFromLocked(b.issued); len(rs) > 0 {
			st.Tags[b.name] = b.stateLocked(rs)
		}
		b.mu.Unlock()
	}
	if err := s.write(st); err != nil {
		return fmt.Errorf("abandon segments: %w", err)
	}
	return nil
}

// halt stops issuing and the loaders, writing and returning nothing (what a
// kill -9 leaves); it returns the buffers, nil when already closed.
func (s *Service) halt() []*tagBuf {
	bufs, ok := s.markClosed()
	if !ok {
		return nil
	}
	s.stopLoaders(closedChan)
	for _, b := range bufs {
		b.mu.Lock()
		b.to(bufClosed)
		b.broadcastLocked()
		b.mu.Unlock()
	}
	return bufs
}

// stopLoaders ends the tags' workers (marks and loads): each finishes the
// operation in flight until giveUp is closed, then loads in flight are
// cancelled. It returns once every worker has.
func (s *Service) stopLoaders(giveUp <-chan struct{}) {
	close(s.stop)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-giveUp:
		s.cancel()
		<-done
	}
	s.cancel()
}

// closedChan is a closed channel: stopLoaders(closedChan) gives up at once.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// markClosed closes the service to new Takes of new tags and returns its
// buffers; ok is false when it was closed already.
func (s *Service) markClosed() (bufs []*tagBuf, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.closed = true
	return s.buffersLocked(), true
}

// buffersLocked lists the tag buffers; s.mu is held.
func (s *Service) buffersLocked() []*tagBuf {
	bufs := make([]*tagBuf, 0, len(s.tags))
	for _, b := range s.tags {
		bufs = append(bufs, b)
	}
	return bufs
}

// Serves reports whether the service holds a buffer for tag now: a tag
// loaded since the start, or resumed from the state file. It reads no store.
func (s *Service) Serves(tag string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tags[tag]
	return ok
}

// TagStatus is one tag as this node holds it: a plain value of
// internal/partstatus, so that the views that render it need not import
// this package.
type TagStatus = partstatus.Tag

// Status lists the tags this node serves, by name.
func (s *Service) Status() []TagStatus {
	s.mu.Lock()
	bufs := s.buffersLocked()
	s.mu.Unlock()
	out := make([]TagStatus, 0, len(bufs))
	for _, b := range bufs {
		b.mu.Lock()
		ts := TagStatus{Tag: b.name, Held: slices.Clone(b.ranges), Available: b.held - b.issued, Issued: b.delivered,
			Ahead: min(b.permitted, b.held) - b.issued, Chunk: b.chunkLocked(), Loads: b.loads, Step: b.step, LastLoad: b.lastLoadTook.Seconds(), Wasted: b.wasted.Load(),
			Token: b.token, RefusedRequired: b.refusedRequired.Load(), RefusedInvalid: b.refusedInvalid.Load()}
		if err := b.lastErrLocked(); err != nil {
			ts.Error = err.Error()
		}
		b.mu.Unlock()
		out = append(out, ts)
	}
	slices.SortFunc(out, func(a, b TagStatus) int { return cmp.Compare(a.Tag, b.Tag) })
	return out
}
