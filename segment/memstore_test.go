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
// a compare-and-set on max_id, returned ranges taken by one deleter, and a
// new incarnation each time a tag is created (its returned ranges start
// empty).
type memStore struct {
	mu        sync.Mutex
	lastInc   int64
	tags      map[string]*segment.Tag
	returned  map[string][]segment.Range
	holders   map[string]map[string][]segment.Range
	allocs    int
	publishes int
	steps     []int64 // the step of every Alloc
	tagReads  int
	watchers  map[string][]chan bool // WatchTag's, fired by remove
	noWatch   bool                   // WatchTag fails (a store without watches)
	down      bool                   // every call fails
	latency   time.Duration          // each Alloc takes this long
}

func newMemStore() *memStore {
	return &memStore{tags: map[string]*segment.Tag{}, returned: map[string][]segment.Range{}, holders: map[string]map[string][]segment.Range{}}
}

var errDown = errors.New("store down")

func (m *memStore) create(name string, start, step, maxStep int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastInc += 10
	m.tags[name] = &segment.Tag{Name: name, Start: start, MaxID: start, Step: step, MaxStep: maxStep, Incarnation: m.lastInc}
	delete(m.returned, name)
}

// remove deletes a tag with its returned ranges (create makes it again,
// a new incarnation).
func (m *memStore) remove(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tags, name)
	delete(m.returned, name)
	for _, ch := range m.watchers[name] {
		ch <- true
	}
	delete(m.watchers, name)
}

func (m *memStore) WatchTag(_ context.Context, tag string, inc int64) (<-chan bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down || m.noWatch {
		return nil, errDown
	}
	if err := m.goneLocked(tag, inc); err != nil {
		return nil, err
	}
	if m.watchers == nil {
		m.watchers = map[string][]chan bool{}
	}
	ch := make(chan bool, 1)
	m.watchers[tag] = append(m.watchers[tag], ch)
	return ch, nil
}

// gone is what the store answers for a range of incarnation inc.
func (m *memStore) goneLocked(tag string, inc int64) error {
	t := m.tags[tag]
	switch {
	case t == nil:
		return fmt.Errorf("tag %q: %w", tag, segment.ErrUnknownTag)
	case t.Incarnation != inc:
		return fmt.Errorf("tag %q: %w", tag, segment.ErrTagGone)
	}
	return nil
}

func (m *memStore) setDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

func (m *memStore) Alloc(ctx context.Context, tag string, inc, step, above int64) (segment.Range, segment.Tag, error) {
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
	if err := m.goneLocked(tag, inc); err != nil {
		return segment.Range{}, segment.Tag{}, err
	}
	t := m.tags[tag]
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

func (m *memStore) Return(_ context.Context, tag string, inc int64, r segment.Range) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errDown
	}
	if err := m.goneLocked(tag, inc); err != nil {
		return err
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

// allocCount is how many ranges were allocated so far (a service's
// background load may still be adding to it).
func (m *memStore) allocCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.allocs
}

func (m *memStore) maxID(tag string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tags[tag].MaxID
}
