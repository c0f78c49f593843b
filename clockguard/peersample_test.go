package clockguard

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// badOffset is the offset of a peer whose clock is off.
const badOffset = 5 * time.Second

// fleet is n running time peers, worker IDs 1..n, all agreeing at first.
type fleet struct {
	fc    *clocktest.Fake
	tps   []*timePeer
	peers []Peer
}

func startFleet(t *testing.T, n int) *fleet {
	t.Helper()
	f := &fleet{fc: clocktest.NewFake(t0)}
	for i := range n {
		tp := startTimePeer(t, f.fc, 0)
		f.tps = append(f.tps, tp)
		f.peers = append(f.peers, Peer{WorkerID: int64(i + 1), Addr: tp.addr})
	}
	return f
}

// setBad puts the clocks of the peers with these worker IDs off, the others
// right.
func (f *fleet) setBad(ids ...int64) {
	for i, tp := range f.tps {
		off := time.Duration(0)
		if slices.Contains(ids, int64(i+1)) {
			off = badOffset
		}
		tp.offset.Store(int64(off))
	}
}

// requests returns how many requests each peer has had, by index.
func (f *fleet) requests() []int64 {
	out := make([]int64, len(f.tps))
	for i, tp := range f.tps {
		out[i] = tp.requests.Load()
	}
	return out
}

// conns is how many connections the peers have had requests on, in all.
func (f *fleet) conns() int {
	n := 0
	for _, tp := range f.tps {
		n += tp.connCount()
	}
	return n
}

// seeded returns a config with a rand seeded with seed.
func seeded(seed uint64, sample int) PeersConfig {
	return PeersConfig{Sample: sample, Rand: rand.New(rand.NewPCG(seed, 7))}
}

// firstSampleOf returns the worker IDs the first round of a check built
// with cfg's seed asks out of ids: a twin of the check, same seed, so a
// test can rig the peers that seed picks.
func firstSampleOf(t *testing.T, seed uint64, sample int, ids []int64) []int64 {
	t.Helper()
	twin := newTestPeers(t, newGuard(t), clocktest.NewFake(t0), StaticPeers{}, seeded(seed, sample))
	return twin.sampler.next(ids)
}

func resultIDs(s PeerSnapshot) []int64 { return peerResultIDs(s.Peers) }

// TestPeersSampleSize: each round asks min(Sample, live) peers,
// peerSamples times each, and no other; the snapshot holds that sample and
// says how many peers were live.
func TestPeersSampleSize(t *testing.T) {
	f := startFleet(t, 40)
	for _, tc := range []struct {
		name   string
		sample int
		live   int
		want   int
	}{
		{"3 of 40", 3, 40, 3},
		{"8 of 40", 8, 40, 8},
		{"the default (12) of 40", 0, 40, DefaultPeerSample},
		{"16 of 40", 16, 40, 16},
		{"12 of 5: all of them", 12, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := StaticPeers(f.peers[:tc.live])
			p := newTestPeers(t, newGuard(t), f.fc, src, seeded(1, tc.sample))
			for round := range 3 {
				before := f.requests()
				snap, err := p.checkNow(context.Background())
				if err != nil {
					t.Fatalf("round %d: %v", round+1, err)
				}
				asked := 0
				for i, n := range f.requests() {
					switch d := n - before[i]; d {
					case 0:
					case peerSamples:
						asked++
					default:
						t.Fatalf("round %d: peer %d asked %d times, want 0 or %d", round+1, i+1, d, peerSamples)
					}
				}
				if asked != tc.want || len(snap.Peers) != tc.want || snap.Reachable != tc.want || snap.LivePeers != tc.live {
					t.Fatalf("round %d: %d peers asked, snapshot of %d (%d reachable) with %d live; want %d of %d",
						round+1, asked, len(snap.Peers), snap.Reachable, snap.LivePeers, tc.want, tc.live)
				}
			}
		})
	}
}

// TestPeersReuseConnections: a round keeps half the sample of the one
// before and asks it over the connections of that round; only the peers
// new to the sample are dialled. The pool never holds more than the
// sample.
func TestPeersReuseConnections(t *testing.T) {
	const rounds = 5
	for _, tc := range []struct {
		name          string
		live, sample  int
		wantConns     int // sample + replacements: sample - sample/2 a round after the first
		wantOverlap   int // peers a round shares with the round before
		wantPerRound1 int
	}{
		{"12 of 40: half kept each round", 40, 12, 12 + (rounds-1)*6, 6, 12},
		{"3 of 40: one kept each round", 40, 3, 3 + (rounds-1)*2, 1, 3},
		{"all of 5: one connection each, ever", 5, 12, 5, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, tc.live)
			p := newTestPeers(t, newGuard(t), f.fc, StaticPeers(f.peers), seeded(2, tc.sample))
			var prev []int64
			for round := range rounds {
				snap, err := p.checkNow(context.Background())
				if err != nil || snap.Unreachable != 0 {
					t.Fatalf("round %d: %v, %d unreachable", round+1, err, snap.Unreachable)
				}
				ids := resultIDs(snap)
				if round > 0 {
					if n := len(intersect(prev, ids)); n != tc.wantOverlap {
						t.Fatalf("round %d shares %d peers with the one before (%v, %v), want %d", round+1, n, prev, ids, tc.wantOverlap)
					}
				}
				if _, kept := p.pool.open(); kept > min(tc.sample, tc.live) {
					t.Fatalf("round %d: %d connections kept, more than the sample", round+1, kept)
				}
				prev = ids
			}
			if got := f.conns(); got != tc.wantConns {
				t.Fatalf("%d connections over %d rounds, want %d (without reuse: %d)", got, rounds, tc.wantConns, rounds*min(tc.sample, tc.live))
			}
		})
	}
}

func intersect(a, b []int64) []int64 {
	var out []int64
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestPeersKeptConnectionBrokenIsRedialled: a kept connection the peer
// closed while idle is replaced by a new one within the round, and the
// peer counts as reachable; a peer that is gone still counts as
// unreachable.
func TestPeersKeptConnectionBrokenIsRedialled(t *testing.T) {
	for _, tc := range []struct {
		name            string
		refuse          bool // the peer also closes every new connection
		wantUnreachable int
		wantConns       int
	}{
		{"closed while idle: redialled", false, 0, 2},
		{"closing every connection: unreachable after one redial", true, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, 3)
			p := newTestPeers(t, newGuard(t), f.fc, StaticPeers(f.peers), PeersConfig{})
			if _, err := p.checkNow(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.tps[0].ln.refuse.Store(tc.refuse)
			f.tps[0].dropConns()
			snap, err := p.checkNow(context.Background())
			if err != nil || snap.Unreachable != tc.wantUnreachable {
				t.Fatalf("checkNow = %v, %d unreachable (%+v), want %d", err, snap.Unreachable, snap.Peers, tc.wantUnreachable)
			}
			if got := f.tps[0].connCount(); got != tc.wantConns {
				t.Fatalf("the peer saw %d connections, want %d", got, tc.wantConns)
			}
			if got := f.tps[1].connCount(); got != 1 {
				t.Fatalf("an untouched peer saw %d connections, want 1", got)
			}
		})
	}
}

// TestPeersConfirmationSample: a sample that finds the node the outlier
// takes it out only when a second, fresh sample (disjoint where the
// cluster allows) finds it too; a sample that held every live peer needs
// no confirmation.
func TestPeersConfirmationSample(t *testing.T) {
	f := startFleet(t, 40)
	all := peerIDs(f.peers)
	const seed = 3
	first := firstSampleOf(t, seed, 12, all)
	_, outside := split(all, first)
	for _, tc := range []struct {
		name       string
		live       int
		bad        []int64
		wantOut    bool
		wantConfs  int64
		wantUnconf int64
		disjoint   bool
	}{
		// 12 bad of 40, 8 of them in the first sample: 8 of 13 clocks
		// disagree there; the confirmation, from the 28 others, holds 4.
		{"an unlucky first sample: the confirmation keeps a good node in", 40, append(slices.Clone(first[:8]), outside[:4]...), false, 1, 1, true},
		{"the node is the outlier: confirmed, out", 40, all, true, 1, 0, true},
		{"13 live: the confirmation adds 11 of the first to the 1 outside", 13, all[:13], true, 1, 0, false},
		{"12 live, 7 bad: the sample is everyone, out without a confirmation", 12, all[:7], true, 0, 0, false},
		{"12 bad of 40, 4 in the first sample: in, no confirmation", 40, append(slices.Clone(first[:4]), outside[:8]...), false, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.setBad(tc.bad...)
			g := newGuard(t)
			p := newTestPeers(t, g, f.fc, StaticPeers(f.peers[:tc.live]), seeded(seed, 12))
			snap, err := p.checkNow(context.Background())
			if errors.Is(err, errPeerOffset) != tc.wantOut || g.Ready() == tc.wantOut {
				t.Fatalf("checkNow = %v, ready %v; want out %v (%s)", err, g.Ready(), tc.wantOut, snap.Detail)
			}
			if snap.Confirmations != tc.wantConfs || snap.Unconfirmed != tc.wantUnconf || snap.Confirmation != (tc.wantConfs > 0) {
				t.Fatalf("confirmations %d, unconfirmed %d, confirmation %v; want %d, %d", snap.Confirmations, snap.Unconfirmed,
					snap.Confirmation, tc.wantConfs, tc.wantUnconf)
			}
			if tc.wantConfs > 0 && (snap.FirstSample == "" || len(snap.Peers) != 12) {
				t.Fatalf("a confirmed round's snapshot: first sample %q, %d peers; want its detail and 12", snap.FirstSample, len(snap.Peers))
			}
			if tc.wantUnconf > 0 && !strings.Contains(snap.Detail, "did not confirm") {
				t.Fatalf("detail %q does not say the confirmation kept the node in", snap.Detail)
			}
			if tc.disjoint && len(intersect(resultIDs(snap), first)) != 0 {
				t.Fatalf("confirmation sample %v shares peers with the first %v", resultIDs(snap), first)
			}
		})
	}
}

// TestPeersOneBadPeerOfASample: one bad clock in a sample is one vote of
// at least four (three peers and the node), never a majority: a good node
// stays in, whatever the sample's size and however many of its other
// peers cannot be reached.
func TestPeersOneBadPeerOfASample(t *testing.T) {
	f := startFleet(t, 40)
	all := peerIDs(f.peers)
	for _, tc := range []struct {
		name        string
		live        int
		sample      int
		unreachable int // peers of the sample, other than the bad one, with no server
		wantSplit   bool
	}{
		{"sample 3 of 3", 3, 3, 0, false},
		{"sample 3 of 40", 40, 3, 0, false},
		{"sample 3 of 40, one other unreachable: 1 of 3", 40, 3, 1, false},
		{"sample 3 of 40, the two others unreachable: 1 of 2, split", 40, 3, 2, true},
		{"sample 8 of 40", 40, 8, 0, false},
		{"sample 12 of 40, 5 others unreachable", 40, 12, 5, false},
		{"sample 16 of 40", 40, 16, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 5; seed++ {
				first := firstSampleOf(t, seed, tc.sample, all[:tc.live])
				bad := first[seed%uint64(len(first))] // a bad peer the sample holds
				f.setBad(bad)
				peers := slices.Clone(f.peers[:tc.live])
				down := 0
				for i, p := range peers {
					if down < tc.unreachable && p.WorkerID != bad && slices.Contains(first, p.WorkerID) {
						peers[i].Addr = closedTCPAddr(t)
						down++
					}
				}
				g := newGuard(t)
				p := newTestPeers(t, g, f.fc, StaticPeers(peers), seeded(seed, tc.sample))
				snap, err := p.checkNow(context.Background())
				if err != nil || !g.Ready() || snap.Disagree != 1 || snap.Split != tc.wantSplit || snap.Confirmations != 0 {
					t.Fatalf("seed %d: checkNow = %v, ready %v, %d disagree, split %v, %d confirmations; want in, 1, split %v, none (%s)",
						seed, err, g.Ready(), snap.Disagree, snap.Split, snap.Confirmations, tc.wantSplit, snap.Detail)
				}
			}
		})
	}
}

// TestPeersForgetsUnreachablePeers: the source is told to forget every
// peer the round could not reach (its address may have changed), and no
// other; a source without ForgetPeer works as well.
func TestPeersForgetsUnreachablePeers(t *testing.T) {
	fc := clocktest.NewFake(t0)
	ok, broken := startTimePeer(t, fc, 0), startTimePeer(t, fc, 0)
	broken.mode.Store(answerStatus500)
	peers := []Peer{{1, ok.addr}, {2, closedTCPAddr(t)}, {3, broken.addr}, {4, "no-port"}}
	src := &staticPeers{peers: peers}
	p := newTestPeers(t, newGuard(t), fc, src, PeersConfig{})
	snap, err := p.checkNow(context.Background())
	if err != nil || snap.Unreachable != 3 {
		t.Fatalf("checkNow = %v, %d unreachable; want 3", err, snap.Unreachable)
	}
	if got := src.forgottenIDs(); !slices.Equal(got, []int64{2, 3, 4}) {
		t.Fatalf("forgotten %v, want [2 3 4]", got)
	}
	plain := newTestPeers(t, newGuard(t), fc, StaticPeers(peers), PeersConfig{})
	if snap, err := plain.checkNow(context.Background()); err != nil || snap.Unreachable != 3 {
		t.Fatalf("without a forgetter: %v, %d unreachable", err, snap.Unreachable)
	}
}

// TestPeerJitter: a regular interval varies within ±10%, both ways, and a
// seed gives the same intervals again.
func TestPeerJitter(t *testing.T) {
	for _, d := range []time.Duration{30 * time.Second, time.Hour, time.Millisecond, 9 * time.Nanosecond} {
		j := &jitterer{rng: rand.New(rand.NewPCG(1, 2))}
		again := &jitterer{rng: rand.New(rand.NewPCG(1, 2))}
		lo, hi := d-d/10, d+d/10
		minSeen, maxSeen := d, d
		for range 10000 {
			got := j.spread(d)
			if got < lo || got > hi {
				t.Fatalf("spread(%v) = %v, outside [%v, %v]", d, got, lo, hi)
			}
			if replay := again.spread(d); replay != got {
				t.Fatalf("spread(%v) with the same seed: %v then %v", d, got, replay)
			}
			minSeen, maxSeen = min(minSeen, got), max(maxSeen, got)
		}
		if d/10 > 0 && (minSeen >= d-d/20 || maxSeen <= d+d/20) {
			t.Fatalf("spread(%v) stays within [%v, %v]: not jittered both ways", d, minSeen, maxSeen)
		}
	}
}

// TestPeersRunJittersTheInterval: Run's regular rounds come 27s to 33s
// apart with a 30s interval, not all the same; re-checks of a verdict
// against the node keep their exact backoff (TestRounds...).
func TestPeersRunJittersTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 30 * time.Second
		p, err := NewPeers(health.New(testLogger(t), nil), clocktest.NewFake(t0), StaticPeers{},
			PeersConfig{Interval: interval, Rand: rand.New(rand.NewPCG(4, 4))})
		if err != nil {
			t.Fatal(err)
		}
		l := &roundLog{r: p.sched}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.sched.run(ctx, interval, l.round)
		}()
		time.Sleep(20 * interval)
		cancel()
		<-done
		gaps := l.gaps()
		if len(gaps) < 15 {
			t.Fatalf("%d rounds in %v", len(gaps)+1, 20*interval)
		}
		for _, g := range gaps {
			if g < interval*9/10 || g > interval*11/10 {
				t.Fatalf("gap %v outside ±10%% of %v (%v)", g, interval, gaps)
			}
		}
		if slices.Min(gaps) == slices.Max(gaps) {
			t.Fatalf("every gap %v: no jitter", gaps[0])
		}
	})
}

// TestPeerSampler: a sample is min(size, live) distinct live peers,
// sorted; it keeps half of the one before (those still live) and replaces
// the rest with peers new to it; in time every peer is asked. A
// confirmation sample avoids the first where the cluster allows.
func TestPeerSampler(t *testing.T) {
	live := make([]int64, 100)
	for i := range live {
		live[i] = int64(i * 3) // not contiguous
	}
	s := &peerSampler{size: 12, rng: rand.New(rand.NewPCG(5, 5))}
	seen := map[int64]bool{}
	var prev []int64
	for round := range 200 {
		got := s.next(live)
		if len(got) != 12 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != 12 || len(intersect(got, live)) != 12 {
			t.Fatalf("round %d: sample %v", round, got)
		}
		if prev != nil && len(intersect(prev, got)) != 6 {
			t.Fatalf("round %d keeps %d of the last sample, want 6", round, len(intersect(prev, got)))
		}
		for _, id := range got {
			seen[id] = true
		}
		prev = got
	}
	if len(seen) != len(live) {
		t.Fatalf("%d of %d peers asked in 200 rounds", len(seen), len(live))
	}
	for _, tc := range []struct {
		live         int
		wantFromRest int
	}{{100, 12}, {20, 8}, {13, 1}} {
		first := s.next(live[:tc.live])
		conf := s.confirmation(live[:tc.live], first, false)
		if len(conf) != 12 || len(intersect(conf, first)) != 12-tc.wantFromRest {
			t.Fatalf("%d live: confirmation %v against first %v: want 12 with %d outside the first", tc.live, conf, first, tc.wantFromRest)
		}
	}
	// A peer gone from the list leaves the sample.
	gone := prev[0]
	if got := s.next(slices.DeleteFunc(slices.Clone(live), func(id int64) bool { return id == gone })); slices.Contains(got, gone) {
		t.Fatalf("sample %v holds %d, no longer live", got, gone)
	}
}
