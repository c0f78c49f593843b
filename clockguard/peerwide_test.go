package clockguard

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
)

// twinSampler returns the sampler of a twin of a check built with seed and
// sample: it draws what that check's sampler draws, call for call, so a
// test can rig the peers of each sample that check will ask.
func twinSampler(t *testing.T, seed uint64, sample int) *peerSampler {
	t.Helper()
	twin := newTestPeers(t, newGuard(t), clocktest.NewFake(t0), StaticPeers{}, seeded(seed, sample))
	return &twin.sampler
}

// TestPeersWideRecheckKeepsASharedBadClockOut: a node whose clock is
// wrong, shared by a third or more of the cluster (a rack on one bad
// source), leaves on its samples as before (two of 12 that find it the
// outlier: each round with probability 0.4 to 0.6 here) and, once out, is
// re-checked with wide samples (4 × Sample) and needs two of them to come
// back: while a majority of all the clocks disagrees with it, it does not
// return, in any of the seeds' rounds after its removal. With one sample
// of 12 per re-check it returned on the first lucky one (the 39 peers: in
// service after 39 of 60 seeded rounds).
func TestPeersWideRecheckKeepsASharedBadClockOut(t *testing.T) {
	for _, tc := range []struct {
		name        string
		live        int
		disagree    int // peers whose clocks are badOffset from the node's; the others share its clock
		seeds       int
		rounds      int // a check's rounds per seed
		maxRoundsIn int // rounds before the first that takes it out (leaving is as before: two samples of 12)
		wantWide    int // peers of a wide sample
	}{
		// 23 of 40 clocks disagree: a wide sample (48) is every live
		// peer, exactly the all-peers check: 23 of 40, out, no
		// confirmation needed.
		{"39 peers, 23 disagree, 16 share the node's clock", 39, 23, 6, 10, 15, 39},
		// 65 of 101 clocks disagree; 35 % of the cluster shares the
		// node's bad clock. A wide sample is 48 of the 100.
		{"100 peers, 35 share the node's clock, 65 disagree", 100, 65, 3, 20, 15, 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, tc.live)
			all := peerIDs(f.peers)
			f.setBad(all[:tc.disagree]...)
			wideRounds, in := 0, 0
			for seed := uint64(1); seed <= uint64(tc.seeds); seed++ {
				g := newGuard(t)
				p := newTestPeers(t, g, f.fc, StaticPeers(f.peers), seeded(seed, DefaultPeerSample))
				left := 0 // the round that took it out
				for round := 1; left == 0 || round <= left+tc.rounds; round++ {
					before := f.requests()
					snap, err := p.checkNow(context.Background())
					out := errors.Is(err, errPeerOffset)
					if out == g.Ready() {
						t.Fatalf("seed %d round %d: checkNow = %v but ready %v", seed, round, err, g.Ready())
					}
					if !out {
						in++
					}
					if left == 0 {
						if out {
							left = round
						} else if round > tc.maxRoundsIn {
							t.Fatalf("seed %d: still in after %d rounds (%s)", seed, round, snap.Detail)
						}
						continue
					}
					if !out {
						t.Fatalf("seed %d round %d: returned to service, out since round %d, while %d of %d clocks disagree: %s",
							seed, round, left, tc.disagree, tc.live+1, snap.Detail)
					}
					wideRounds++
					if !snap.Wide || len(snap.Peers) != tc.wantWide || snap.Confirmation {
						t.Fatalf("seed %d round %d: wide %v, %d peers, confirmation %v; want a wide sample of %d deciding alone",
							seed, round, snap.Wide, len(snap.Peers), snap.Confirmation, tc.wantWide)
					}
					if asked := askedPeers(before, f.requests()); asked > 2*tc.wantWide {
						t.Fatalf("seed %d round %d: %d peers asked, more than two wide samples", seed, round, asked)
					}
				}
				if snap := p.Snapshot(); snap.WideRounds != int64(tc.rounds) {
					t.Fatalf("seed %d: %d wide rounds, want %d (every round after round %d)", seed, snap.WideRounds, tc.rounds, left)
				}
			}
			if wideRounds != tc.seeds*tc.rounds {
				t.Fatalf("%d wide re-checks, want %d", wideRounds, tc.seeds*tc.rounds)
			}
			t.Logf("%d rounds in service before the removals, then %d wide re-checks, all out", in, wideRounds)
		})
	}
}

// askedPeers counts the peers asked between two f.requests().
func askedPeers(before, after []int64) int {
	n := 0
	for i := range after {
		if after[i] != before[i] {
			n++
		}
	}
	return n
}

// TestPeersWideRecheckReturnsAGoodNode: a good node that unlucky samples
// took out (rigged: the first sample and its confirmation each hold 7 bad
// clocks of 12, in a cluster where 14 to 39 of 100 are bad) comes back by
// itself at its re-checks, once two consecutive wide samples do not find
// it the outlier; a wide sample that clears it while the second finds it
// the outlier keeps it out until a later re-check. Back in, it asks
// samples of 12 again, and keeps no more connections than that.
func TestPeersWideRecheckReturnsAGoodNode(t *testing.T) {
	const (
		live        = 100
		seed        = 11
		maxRechecks = 10
	)
	f := startFleet(t, live)
	all := peerIDs(f.peers)
	tw := twinSampler(t, seed, DefaultPeerSample)
	first := tw.next(all)
	conf := tw.confirmation(all, first, false)
	wide1 := tw.nextWide(all)
	wide2 := tw.confirmation(all, wide1, true)
	if len(wide1) != 4*DefaultPeerSample || len(wide2) != len(wide1) || len(intersect(wide1, wide2)) != 0 {
		t.Fatalf("wide samples of %d and %d sharing %d peers: want two of %d, disjoint", len(wide1), len(wide2), len(intersect(wide1, wide2)), 4*DefaultPeerSample)
	}
	unlucky := slices.Concat(first[:7], conf[:7])
	for _, tc := range []struct {
		name     string
		bad      []int64
		wantHeld bool // the first re-check's second wide sample finds it the outlier
	}{
		{"14 bad of 100, all in its first two samples: back at the first re-check", unlucky, false},
		{"and 25 of the second wide sample: held at the first re-check, back at a later one",
			sortedUnique(slices.Concat(unlucky, wide2[:25])), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.setBad(tc.bad...)
			g := newGuard(t)
			p := newTestPeers(t, g, f.fc, StaticPeers(f.peers), seeded(seed, DefaultPeerSample))
			if snap, err := p.checkNow(context.Background()); !errors.Is(err, errPeerOffset) || snap.Confirmations != 1 || snap.Wide {
				t.Fatalf("first round: %v, %d confirmations, wide %v; want out on a confirmed sample of 12 (%s)", err, snap.Confirmations, snap.Wide, snap.Detail)
			}
			rechecks, snap := recheckUntilBack(t, p, len(wide1), maxRechecks, tc.wantHeld)
			if !g.Ready() || !snap.Confirmation || snap.WideRounds != int64(rechecks) || (rechecks == 1) == tc.wantHeld {
				t.Fatalf("back after %d re-checks: ready %v, confirmation %v, %d wide rounds (%s)", rechecks, g.Ready(), snap.Confirmation, snap.WideRounds, snap.Detail)
			}
			t.Logf("back after %d re-checks", rechecks)
			snap, err := p.checkNow(context.Background())
			if err != nil || snap.Wide || len(snap.Peers) != DefaultPeerSample {
				t.Fatalf("the round after the return: %v, wide %v, %d peers; want a sample of %d", err, snap.Wide, len(snap.Peers), DefaultPeerSample)
			}
			if _, kept := p.pool.open(); kept > DefaultPeerSample {
				t.Fatalf("back in service: %d connections kept, more than the sample", kept)
			}
		})
	}
}

// recheckUntilBack re-checks p, out, until it returns, at most limit times,
// and returns how many re-checks that took and the last snapshot. Each
// re-check must ask a wide sample of wideSize; with held, the first must
// be held by its second wide sample.
func recheckUntilBack(t *testing.T, p *Peers, wideSize, limit int, held bool) (int, PeerSnapshot) {
	t.Helper()
	for rechecks := 1; ; rechecks++ {
		snap, err := p.checkNow(context.Background())
		if !snap.Wide || len(snap.Peers) != wideSize {
			t.Fatalf("re-check %d: wide %v, %d peers; want a wide sample of %d", rechecks, snap.Wide, len(snap.Peers), wideSize)
		}
		if _, kept := p.pool.open(); kept > wideSize {
			t.Fatalf("re-check %d: %d connections kept, more than a wide sample", rechecks, kept)
		}
		switch {
		case rechecks == 1 && held:
			if !errors.Is(err, errPeerOffset) || !snap.Confirmation || snap.ReturnsHeld != 1 {
				t.Fatalf("re-check 1: %v, confirmation %v, %d returns held; want held by the second wide sample (%s)",
					err, snap.Confirmation, snap.ReturnsHeld, snap.Detail)
			}
		case err == nil:
			return rechecks, snap
		case rechecks == limit:
			t.Fatalf("still out after %d re-checks: %s", rechecks, snap.Detail)
		}
	}
}

// TestPeerSamplerWide: a wide sample is min(4 × size, live) distinct live
// peers, sorted, keeping the sample before it (half of it when that is
// wide too, and at most half of a wide one for a sample of size after
// it); a wide confirmation avoids the first where the cluster allows; a
// wide sample of a cluster no larger than it is every live peer.
func TestPeerSamplerWide(t *testing.T) {
	live := make([]int64, 130)
	for i := range live {
		live[i] = int64(i*7 + 1)
	}
	s := &peerSampler{size: 12, rng: rand.New(rand.NewPCG(6, 6))}
	valid := func(what string, got []int64, n int) {
		t.Helper()
		if len(got) != n || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != n || len(intersect(got, live)) != n {
			t.Fatalf("%s: %v, want %d distinct live peers, sorted", what, got, n)
		}
	}
	regular := s.next(live)
	wide := s.nextWide(live)
	valid("wide after a regular sample", wide, 48)
	if n := len(intersect(regular, wide)); n != 12 {
		t.Fatalf("a wide sample keeps %d of the regular one before it, want all 12", n)
	}
	again := s.nextWide(live)
	valid("wide after a wide one", again, 48)
	if n := len(intersect(wide, again)); n != 24 {
		t.Fatalf("a wide sample keeps %d of the wide one before it, want 24", n)
	}
	back := s.next(live)
	valid("regular after a wide one", back, 12)
	if n := len(intersect(again, back)); n != 6 {
		t.Fatalf("a regular sample keeps %d of the wide one before it, want 6", n)
	}
	for _, tc := range []struct {
		live         int
		wantFromRest int
	}{{130, 48}, {96, 48}, {60, 12}} {
		first := s.nextWide(live[:tc.live])
		conf := s.confirmation(live[:tc.live], first, true)
		if len(conf) != 48 || len(intersect(conf, first)) != 48-tc.wantFromRest {
			t.Fatalf("%d live: wide confirmation %v against first %v: want 48 with %d outside the first", tc.live, conf, first, tc.wantFromRest)
		}
	}
	if got := s.nextWide(live[:40]); !slices.Equal(got, live[:40]) {
		t.Fatalf("a wide sample of 40 live peers: %v, want all of them", got)
	}
}
