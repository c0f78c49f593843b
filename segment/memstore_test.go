package segment_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/segment"
)

// memStore is segment.Store in memory, with the same rules as ZooKeeper's:
// a compare-and-set on max_id, returned ranges taken by one deleter.
type memStore struct {
	mu        sync.Mutex
	tags      map[string]*segment.Tag
	returned  map[string][]segment.Range
	holders   map[string]map[string][]segment.Range
	allocs    int
	publishes int
	steps     []int64 // the step of every Alloc
	tagReads  int
	down      bool          // every call fails
	latency   time.Duration // each Alloc takes this long
}

func newMemStore() *memStore {
	return &memStore{tags: map[string]*segment.Tag{}, returned: map[string][]segment.Range{}, holders: map[string]map[string][]segment.Range{}}
}

var errDown = errors.New("store down")

func (m *memStore) create(name string, start, step, maxStep int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tags[name] = &segment.Tag{Name: name, Start: start, MaxID: start, Step: step, MaxStep: maxStep}
}

func (m *memStore) setDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

func (m *memStore) Alloc(ctx context.Context, tag string, step, above int64) (segment.Range, segment.Tag, error) {
	m.mu.Lock()
	lat := m.latency
	m.mu.Unlock()
	if lat > 0 {
		select {
		case <-time.After(lat):
		case <-ctx.Done():
			return segment.Range{}, segment.Tag{}, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return segment.Range{}, segment.Tag{}, errDown
	}
	t := m.tags[tag]
	if t == nil {
		return segment.Range{}, segment.Tag{}, segment.ErrUnknownTag
	}
	m.allocs++
	m.steps = append(m.steps, step)
	rs := m.returned[tag]
	slices.SortFunc(rs, func(a, b segment.Range) int { return int(a.Lo - b.Lo) })
	for i, r := range rs {
		if r.Lo >= above {
			m.returned[tag] = slices.Delete(rs, i, i+1)
			return r, *t, nil
		}
	}
	r := segment.Range{Lo: t.MaxID, Hi: t.MaxID + step}
	t.MaxID = r.Hi
	return r, *t, nil
}

func (m *memStore) Return(_ context.Context, tag string, r segment.Range) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errDown
	}
	m.returned[tag] = append(m.returned[tag], r)
	return nil
}

func (m *memStore) Tag(_ context.Context, tag string) (segment.Tag, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tagReads++
	if m.down {
		return segment.Tag{}, errDown
	}
	t := m.tags[tag]
	if t == nil {
		return segment.Tag{}, fmt.Errorf("tag %q: %w", tag, segment.ErrUnknownTag)
	}
	return *t, nil
}

func (m *memStore) Publish(_ context.Context, tag, holder string, held []segment.Range) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.publishes++
	if m.holders[tag] == nil {
		m.holders[tag] = map[string][]segment.Range{}
	}
	m.holders[tag][holder] = slices.Clone(held)
	return nil
}

func (m *memStore) returnedTotal(tag string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, r := range m.returned[tag] {
		n += r.Len()
	}
	return n
}

func (m *memStore) maxID(tag string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tags[tag].MaxID
}
