package clockguard

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// DefaultPeerSample is how many peers a round asks by default: enough that
// one bad clock is one vote of many, few enough that a node's cost per
// round does not grow with the cluster.
const DefaultPeerSample = 12

// MinPeerSample is the smallest sample allowed: with fewer, one bad peer
// would be a third of the votes or more.
const MinPeerSample = 3

// peerWideFactor is how many times Sample peers a re-check asks while the
// peer check keeps the node out (all of them in a cluster no larger): a
// node leaves on two samples of Sample, but returns only on two wide ones,
// so that a bad clock shared by a third or more of the cluster does not
// return on the first lucky sample while most clocks disagree with it. The
// cost stays bounded by the sample, whatever the cluster's size.
const peerWideFactor = 4

// peerJitter is the fraction of the interval a round's start varies by,
// either way, so nodes started at once do not ask in lockstep.
const peerJitter = 10 // percent

// peerSampler picks the peers a round asks: min(size, live) of them at
// random, keeping half of the previous sample (so their connections are
// reused) and replacing the other half (so every peer is asked in time).
// Rounds are serialised, so it needs no lock of its own.
type peerSampler struct {
	size int
	rng  *rand.Rand
	cur  []int64 // the last sample, sorted
}

// wideSize is the size of a wide sample (before the cluster bounds it).
func (s *peerSampler) wideSize() int { return peerWideFactor * s.size }

// next returns the sample of a round over the live peers, sorted, and
// remembers it.
func (s *peerSampler) next(live []int64) []int64 { return s.nextOf(live, s.size) }

// nextWide returns the sample of a re-check while the node is out: as
// next, of min(wideSize, live) peers, and remembers it, so the re-check
// after it keeps half of it (and its connections).
func (s *peerSampler) nextWide(live []int64) []int64 { return s.nextOf(live, s.wideSize()) }

// nextOf returns a sample of min(size, live) of the live peers, sorted,
// keeping half of the last sample (as much of it as the size allows), and
// remembers it.
func (s *peerSampler) nextOf(live []int64, size int) []int64 {
	live = sortedUnique(live)
	n := min(size, len(live))
	if n == len(live) {
		s.cur = live
		return slices.Clone(live)
	}
	stay, fresh := split(live, s.cur)
	s.shuffle(stay)
	s.shuffle(fresh)
	keep := min(len(stay), n/2)
	sample := append(slices.Clone(stay[:keep]), fresh[:min(len(fresh), n-keep)]...)
	// Fewer new peers than the half to replace: keep more of the old.
	sample = append(sample, stay[keep:keep+n-len(sample)]...)
	slices.Sort(sample)
	s.cur = sample
	return slices.Clone(sample)
}

// confirmation returns a second sample for a round whose first one did not
// settle it (a sample that found the node the outlier, a wide one that did
// not): min(size, live) peers, min(wideSize, live) when wide, those outside
// first before any of it (disjoint, where the cluster has enough peers
// outside first), sorted. It does not change the sample kept for the next
// round.
func (s *peerSampler) confirmation(live, first []int64, wide bool) []int64 {
	live = sortedUnique(live)
	size := s.size
	if wide {
		size = s.wideSize()
	}
	n := min(size, len(live))
	again, fresh := split(live, first)
	s.shuffle(fresh)
	s.shuffle(again)
	sample := append(slices.Clone(fresh[:min(len(fresh), n)]), again[:max(0, n-len(fresh))]...)
	slices.Sort(sample)
	return sample
}

// shuffle puts ids in a random order.
func (s *peerSampler) shuffle(ids []int64) {
	s.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
}

// split returns the IDs of live that are in prev and those that are not,
// in live's order.
func split(live, prev []int64) (in, out []int64) {
	for _, id := range live {
		if _, found := slices.BinarySearch(prev, id); found {
			in = append(in, id)
		} else {
			out = append(out, id)
		}
	}
	return in, out
}

// sortedUnique returns ids sorted, without repeats (a copy).
func sortedUnique(ids []int64) []int64 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return slices.Compact(s)
}

// jitterer varies the interval between rounds by up to peerJitter percent
// either way. Safe for concurrent use.
type jitterer struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// spread returns d moved by a uniformly random amount within ±peerJitter
// percent of it.
func (j *jitterer) spread(d time.Duration) time.Duration {
	span := d * peerJitter / 100
	if span <= 0 {
		return d
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return d - span + time.Duration(j.rng.Int64N(2*int64(span)+1))
}

// newPeerRands returns the sampler's and the jitter's random sources, both
// drawn from r (nil: seeded at random), so a seed gives the same samples
// and the same intervals whatever order two goroutines draw them in.
func newPeerRands(r *rand.Rand) (sample, jitter *rand.Rand) {
	if r == nil {
		r = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	sample = rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
	jitter = rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
	return sample, jitter
}
