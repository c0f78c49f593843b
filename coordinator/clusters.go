package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// ErrNoCluster: the cluster znode does not exist. Nodes create a cluster
// only with --create-cluster (Config.CreateCluster); snowflakectl cluster
// create creates one on purpose.
var ErrNoCluster = errors.New("no such cluster")

// clusterNames lists the clusters under the root, sorted (none when the
// root does not exist).
func clusterNames(ctx context.Context, z zkclient.Client) ([]string, error) {
	names, err := z.Children(ctx, zkclient.Root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// missingCluster is the ErrNoCluster error for name on servers, naming the
// clusters there and the nearest one.
func missingCluster(name, servers string, names []string) error {
	there := "there is no cluster there yet"
	if len(names) > 0 {
		there = "the clusters there are " + strings.Join(names, ", ")
	}
	hint := ""
	if m := nearMatch(name, names); m != "" {
		hint = fmt.Sprintf("; did you mean %s?", m)
	}
	return fmt.Errorf("%w: cluster %q does not exist on ZooKeeper %s (%s)%s; create it with snowflakectl cluster create %s (or start the first node with --create-cluster)",
		ErrNoCluster, name, servers, there, hint, name)
}

// nearMatch is the name of names closest to name within edit distance 2
// ("" for none; the first in order on a tie).
func nearMatch(name string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(name, n); d < bestD && n != name {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b
// (insertions, deletions, substitutions and swaps of neighbours cost 1),
// over bytes; names are short.
func editDistance(a, b string) int {
	if len(a) > 255 || len(b) > 255 {
		return 1 << 30
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Overlap is another cluster on the same ensemble whose worker-ID range
// overlaps a cluster's.
type Overlap struct {
	Name    string // the other cluster
	Warning string // names both clusters and their ranges
}

// overlaps lists the clusters other than self whose worker-ID range
// overlaps d's. Clusters whose znode cannot be read are skipped.
func overlaps(ctx context.Context, z zkclient.Client, self string, d clusterData) ([]Overlap, error) {
	names, err := clusterNames(ctx, z)
	if err != nil {
		return nil, err
	}
	var out []Overlap
	for _, n := range names {
		if n == self {
			continue
		}
		b, _, err := z.Get(ctx, zkclient.ClusterPath(n))
		if err != nil {
			continue
		}
		o, err := decodeCluster(b)
		if err != nil || len(b) == 0 {
			continue
		}
		if o.WorkerIDs.Lo > d.WorkerIDs.Hi || d.WorkerIDs.Lo > o.WorkerIDs.Hi {
			continue
		}
		out = append(out, Overlap{Name: n, Warning: fmt.Sprintf(
			"cluster %q (worker IDs %s, layout %s) and cluster %q (worker IDs %s, layout %s) on this ZooKeeper ensemble have overlapping worker-ID ranges: IDs of the two may collide if they ever meet; give each cluster its own --worker-id-range",
			self, d.WorkerIDs, d.Layout, n, o.WorkerIDs, o.Layout)})
	}
	return out, nil
}

// ClusterSpec is what snowflakectl cluster create records: the settings
// every node of the cluster must share.
type ClusterSpec struct {
	Layout snowflake.Layout
	// WorkerIDs zero is the layout's whole worker field.
	WorkerIDs WorkerRange
	// RecycleAfter zero is "the cluster's", as for a node: a new cluster
	// gets DefaultRecycleAfter, and an existing cluster's value (which
	// SetCluster may have changed) is accepted whatever it is.
	RecycleAfter time.Duration
	// IgnoreTombstone creates the cluster as if no cluster of its name had
	// been deleted: no fence floor, any settings. Only for a name none of
	// whose IDs is kept anywhere.
	IgnoreTombstone bool
}

// ClusterInfo is one row of snowflakectl cluster list.
type ClusterInfo struct {
	Name   string `json:"name"`
	Layout string `json:"layout,omitempty"` // "41/10/12" (" gene K")
	Epoch  string `json:"epoch,omitempty"`
	Unit   string `json:"time_unit,omitempty"`
	// WorkerIDs is the worker-ID range, LO-HI.
	WorkerIDs    string `json:"worker_id_range,omitempty"`
	RecycleAfter string `json:"recycle_after,omitempty"`
	// Workers counts forever znodes (node keys that ever joined);
	// InService the alive znodes.
	Workers   int `json:"workers"`
	InService int `json:"in_service"`
	// Requires lists the features a node must know to join.
	Requires []string `json:"requires"`
	// Problem: the cluster znode could not be decoded ("" when fine).
	Problem string `json:"problem,omitempty"`
	// Deleted: no cluster of the name exists, only its tombstone.
	Deleted bool `json:"deleted,omitempty"`
	// Tombstone is what a deleted cluster of the name, or its deleted
	// tags, left (nil for none).
	Tombstone *TombstoneInfo `json:"tombstone,omitempty"`
}

// CreateResult is what CreateCluster did.
type CreateResult struct {
	// Created is false when the cluster already existed with the same
	// settings.
	Created bool
	// Requires is the cluster's required features.
	Requires []string
	// RecycleAfter is the recycle-after the cluster records (0 for none:
	// an existing cluster an older release wrote).
	RecycleAfter time.Duration
	// Overlaps are the other clusters whose worker-ID range overlaps.
	Overlaps []Overlap
	// FenceFloor is the fence of the deleted cluster of the same name that
	// every claim starts after (zero for none).
	FenceFloor time.Time
	// TombstoneIgnored: there was a tombstone, and IgnoreTombstone made the
	// new cluster start without its floor.
	TombstoneIgnored bool
}

// AdminOption changes how an Admin (the operator commands: CreateCluster,
// Retire, ReadCluster and the others) reaches ZooKeeper.
type AdminOption func(*adminOptions)

type adminOptions struct{ dial zkconn.Dialer }

// WithAdminDial makes the Admin open its ZooKeeper session with d instead
// of go-zookeeper over plain TCP (zkconn.TLSDial: over TLS; simulations:
// an in-memory ZooKeeper).
func WithAdminDial(d zkconn.Dialer) AdminOption { return func(o *adminOptions) { o.dial = d } }

// checkClusterSpec sets spec's defaults (RecycleAfter 0: the default) and
// checks it, returning its worker IDs; errors wrap ErrInvalidConfig.
func checkClusterSpec(spec *ClusterSpec) (WorkerRange, error) {
	if spec.RecycleAfter == 0 {
		spec.RecycleAfter = DefaultRecycleAfter
	}
	ids, err := spec.WorkerIDs.resolve(spec.Layout)
	switch {
	case err != nil:
		return WorkerRange{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	case spec.RecycleAfter < time.Millisecond:
		return WorkerRange{}, fmt.Errorf("%w: recycle-after %v is below 1ms", ErrInvalidConfig, spec.RecycleAfter)
	}
	if err := spec.Layout.Validate(time.Now()); err != nil {
		return WorkerRange{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return ids, nil
}

// CreateCluster creates cluster with spec's settings, on purpose (the
// command behind snowflakectl cluster create). Over the tombstone of a
// deleted cluster of the name, every claim of the new one starts after
// the deleted one's fence, and settings under which the deleted one's IDs
// could come back are ErrTombstone (unless spec.IgnoreTombstone). An existing cluster with
// the same settings is left as it is (Created false); one with other
// settings is ErrClusterMismatch naming both (recycle-after only when
// spec sets it). Other clusters whose worker-ID range overlaps come back
// as Overlaps.
func (a *Admin) CreateCluster(ctx context.Context, cluster string, spec ClusterSpec) (CreateResult, error) {
	anyRecycleAfter := spec.RecycleAfter == 0
	ids, err := checkClusterSpec(&spec)
	if err != nil {
		return CreateResult{}, err
	}
	ctx, cancel := clock.WithTimeout(ctx, a.timeout)
	defer cancel()
	z, err := a.session(ctx, cluster)
	if err != nil {
		return CreateResult{}, fmt.Errorf("create cluster %q: %w", cluster, err)
	}
	auth := a.auth
	want := newClusterData(spec.Layout, ids, spec.RecycleAfter)
	res := CreateResult{}
	p := newPaths(cluster)
	acl, rootACL := zkclient.ACLs(auth)
	if err := z.Ensure(ctx, zkclient.Root, nil, rootACL); err != nil {
		return res, fmt.Errorf("create cluster %q: %w", cluster, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	for round := 1; ; round++ {
		// The tombstone counts only for a cluster created now: one that
		// exists is compared with the settings asked for, as always.
		var exists bool
		exists, _, err = z.Exists(ctx, p.cluster)
		if err != nil {
			return res, fmt.Errorf("create cluster %q: %w", cluster, zkclient.Unavailable(err))
		}
		w, guard := want, []any(nil)
		if !exists {
			if w, guard, res.TombstoneIgnored, err = createdOverTombstone(ctx, z, cluster, want, spec.IgnoreTombstone, acl, rootACL); err != nil {
				if errors.Is(err, ErrTombstone) {
					return res, err
				}
				return res, fmt.Errorf("create cluster %q: %w", cluster, err)
			}
		}
		b, merr := json.Marshal(w)
		if merr != nil {
			return CreateResult{}, fmt.Errorf("create cluster %q: encode: %w", cluster, merr)
		}
		creates := []any{
			&zk.CreateRequest{Path: p.cluster, Data: b, Acl: acl},
			&zk.CreateRequest{Path: p.forever, Acl: acl},
			&zk.CreateRequest{Path: p.leases, Acl: acl},
			&zk.CreateRequest{Path: p.alive, Acl: acl},
		}
		var failed int
		failed, err = z.Multi(ctx, append(creates, guard...)...)
		if err != nil && failed >= len(creates) {
			if !zkclient.GuardLost(err) || round >= maxClusterRounds {
				return res, fmt.Errorf("create cluster %q: check its tombstone %s: %w", cluster, zkclient.TombstonePath(cluster), zkclient.Unavailable(zkclient.AuthHint(err)))
			}
			continue // a delete buried the name since the tombstone was read
		}
		want = w
		break
	}
	got := want
	switch {
	case err == nil:
		res.Created = true
	case errors.Is(err, zk.ErrNodeExists):
		gb, _, gerr := z.Get(ctx, p.cluster)
		if gerr != nil {
			return res, fmt.Errorf("create cluster %q: read %s: %w", cluster, p.cluster, zkclient.Unavailable(gerr))
		}
		if got, err = decodeCluster(gb); err != nil {
			return res, fmt.Errorf("create cluster %q: it exists, and %s holds data this release cannot use %s: %w", cluster, p.cluster, quoteShort(gb), err)
		}
		asked := want
		if anyRecycleAfter {
			asked.RecycleAfterMs = got.RecycleAfterMs
		}
		if err := sameSettings(cluster, got, asked); err != nil {
			return res, err
		}
		if auth != "" {
			if err := checkClusterACLs(ctx, z, cluster, p); err != nil {
				return res, err
			}
		}
	default:
		return res, fmt.Errorf("create cluster %q: %w", cluster, zkclient.Unavailable(zkclient.AuthHint(err)))
	}
	res.Requires, res.RecycleAfter = got.Requires, msDuration(got.RecycleAfterMs)
	if got.FenceFloor > 0 {
		res.FenceFloor = got.FenceFloor.Time()
	}
	res.Overlaps, _ = overlaps(ctx, z, cluster, got)
	return res, nil
}

// sameSettings compares an existing cluster's settings with those asked
// for (ErrClusterMismatch naming both values).
func sameSettings(cluster string, got, want clusterData) error {
	var diff []string
	if !got.Layout.Equal(want.Layout) {
		diff = append(diff, fmt.Sprintf("layout %s, asked for %s", got.Layout.Describe(), want.Layout.Describe()))
	}
	if got.WorkerIDs != want.WorkerIDs {
		diff = append(diff, fmt.Sprintf("--worker-id-range %s, asked for %s", got.WorkerIDs, want.WorkerIDs))
	}
	if got.RecycleAfterMs != 0 && got.RecycleAfterMs != want.RecycleAfterMs {
		diff = append(diff, fmt.Sprintf("--recycle-after %v, asked for %v",
			time.Duration(got.RecycleAfterMs)*time.Millisecond, time.Duration(want.RecycleAfterMs)*time.Millisecond))
	}
	if len(diff) == 0 {
		return nil
	}
	return fmt.Errorf("%w: cluster %q exists with %s", ErrClusterMismatch, cluster, strings.Join(diff, "; "))
}

// ClusterChange is what snowflakectl cluster set changes on an existing
// cluster: the settings that may change safely (zero fields are left as
// they are). The layout (bits, epoch, unit, gene bits) gives IDs their
// meaning and the worker-ID range keeps regions apart: neither can change
// on a cluster; they take a new one.
type ClusterChange struct {
	// RecycleAfter is the cluster's new recycle-after (1ms or more). A
	// policy, not a safety bound (see Config.RecycleAfter): no value lets
	// an ID be issued twice. A value shorter than a node's session
	// timeout plus a few reports lets another node take the worker ID of
	// one whose session lapsed briefly, which then stays out of service
	// until restarted. Nodes use it from their next claim; a node started
	// with --recycle-after set to another value is refused from then on.
	RecycleAfter time.Duration
}

// SetResult is what SetCluster did.
type SetResult struct {
	// OldRecycleAfter is what the cluster recorded before (0: none, as an
	// older release wrote it); RecycleAfter what it records now.
	OldRecycleAfter, RecycleAfter time.Duration
	// Changed is false when the cluster recorded the value already.
	Changed bool
}

// SetCluster changes the settings of change on cluster (the command
// behind snowflakectl cluster set): a version-checked write of the
// cluster znode that replaces the bytes of recycle_after_ms and keeps every
// other byte (the shape, the features it requires, the incarnation) as it
// was, retried a bounded number of times when the znode changed meanwhile.
// A value the cluster records already writes nothing (Changed false). A
// cluster that does not exist, or that cluster delete marked as being
// deleted, is ErrNoCluster; no setting or a bad value ErrInvalidConfig.
func (a *Admin) SetCluster(ctx context.Context, cluster string, change ClusterChange) (SetResult, error) {
	switch {
	case change.RecycleAfter == 0:
		return SetResult{}, fmt.Errorf("%w: set cluster %q: no setting to change", ErrInvalidConfig, cluster)
	case change.RecycleAfter < time.Millisecond:
		return SetResult{}, fmt.Errorf("%w: recycle-after %v is below 1ms", ErrInvalidConfig, change.RecycleAfter)
	}
	ctx, cancel := clock.WithTimeout(ctx, a.timeout)
	defer cancel()
	z, err := a.session(ctx, cluster)
	if err != nil {
		return SetResult{}, fmt.Errorf("set cluster %q: %w", cluster, err)
	}
	servers := a.servers
	p := newPaths(cluster)
	want := change.RecycleAfter.Milliseconds()
	for round := 1; round <= maxClusterRounds; round++ {
		b, st, err := z.Get(ctx, p.cluster)
		if errors.Is(err, zk.ErrNoNode) {
			names, err := clusterNames(ctx, z)
			if err != nil {
				return SetResult{}, fmt.Errorf("set cluster %q: %w", cluster, zkclient.Unavailable(err))
			}
			return SetResult{}, missingCluster(cluster, strings.Join(servers, ","), names)
		}
		if err != nil {
			return SetResult{}, fmt.Errorf("set cluster %q: read %s: %w", cluster, p.cluster, zkclient.Unavailable(err))
		}
		if markedDeleting(b) {
			return SetResult{}, fmt.Errorf("%w: cluster %q is being deleted (snowflakectl cluster delete marked it, and no node may join it): "+
				"finish with snowflakectl cluster delete %s --yes, then create it again if it is still wanted", ErrNoCluster, cluster, cluster)
		}
		d, err := decodeCluster(b)
		if err != nil {
			return SetResult{}, fmt.Errorf("set cluster %q: its znode holds data this release cannot use %s: %w", cluster, quoteShort(b), err)
		}
		res := SetResult{OldRecycleAfter: msDuration(d.RecycleAfterMs), RecycleAfter: msDuration(want)}
		if d.RecycleAfterMs == want {
			return res, nil
		}
		nb, err := setTopLevelInt(b, "recycle_after_ms", want)
		if err == nil {
			err = sameButRecycleAfter(d, nb, want)
		}
		if err != nil {
			return SetResult{}, fmt.Errorf("set cluster %q: rewrite %s: %w", cluster, quoteShort(b), err)
		}
		_, err = z.Set(ctx, p.cluster, nb, st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return SetResult{}, fmt.Errorf("set cluster %q: write %s: %w", cluster, p.cluster, zkclient.Unavailable(zkclient.AuthHint(err)))
		}
		res.Changed = true
		return res, nil
	}
	return SetResult{}, fmt.Errorf("set cluster %q: its znode kept changing: gave up after %d tries; run the command again", cluster, maxClusterRounds)
}

// setTopLevelInt returns the JSON object b with its top-level member key
// set to v: the bytes of its value replaced where they are, or the member
// added before the closing brace when there is none. Every other byte
// stays as it was (member order matters to the format-2 shape).
func setTopLevelInt(b []byte, key string, v int64) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	start, end, members := -1, -1, 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		members++
		if k != key {
			continue
		}
		if start >= 0 {
			return nil, fmt.Errorf("%q appears twice", key)
		}
		end = int(dec.InputOffset())
		start = end - len(raw)
		if start < 0 || !bytes.Equal(b[start:end], raw) {
			return nil, fmt.Errorf("cannot locate the value of %q", key)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errors.New("not a JSON object")
	}
	num := strconv.AppendInt(nil, v, 10)
	if start >= 0 {
		return slices.Concat(b[:start], num, b[end:]), nil
	}
	closing := int(dec.InputOffset()) - 1
	member := fmt.Appendf(nil, "%q:%s", key, num)
	if members > 0 {
		member = append([]byte(","), member...)
	}
	return slices.Concat(b[:closing], member, b[closing:]), nil
}

// sameButRecycleAfter checks that nb decodes to d with recycle-after ms
// and nothing else changed.
func sameButRecycleAfter(d clusterData, nb []byte, ms int64) error {
	got, err := decodeCluster(nb)
	if err != nil {
		return err
	}
	if got.RecycleAfterMs != ms || !got.Layout.Equal(d.Layout) || got.WorkerIDs != d.WorkerIDs ||
		got.Incarnation != d.Incarnation || !slices.Equal(got.Requires, d.Requires) {
		return fmt.Errorf("the rewritten znode %s does not decode to the same settings", quoteShort(nb))
	}
	return nil
}

// ListClusters reads every cluster on the ensemble for snowflakectl
// cluster list, sorted by name, with the tombstones of deleted clusters
// and tags (a deleted cluster's name is a row with Deleted set). A cluster
// znode that cannot be decoded is a row with Problem set.
func (a *Admin) ListClusters(ctx context.Context) ([]ClusterInfo, error) {
	ctx, cancel := clock.WithTimeout(ctx, a.timeout)
	defer cancel()
	z, err := a.session(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	names, err := clusterNames(ctx, z)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", zkclient.Unavailable(err))
	}
	tombs, err := listTombstones(ctx, z)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	out := []ClusterInfo{}
	for _, n := range names {
		info, err := readClusterInfo(ctx, z, n)
		if err != nil {
			return nil, fmt.Errorf("list clusters: %w", zkclient.Unavailable(err))
		}
		out = append(out, info)
	}
	for i := range tombs {
		t := &tombs[i]
		at := slices.IndexFunc(out, func(c ClusterInfo) bool { return c.Name == t.Name })
		if at < 0 {
			out = append(out, ClusterInfo{Name: t.Name, Requires: []string{}, Deleted: true})
			at = len(out) - 1
		}
		out[at].Tombstone = t
	}
	slices.SortFunc(out, func(a, b ClusterInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// readClusterInfo reads one cluster's row.
func readClusterInfo(ctx context.Context, z zkclient.Client, name string) (ClusterInfo, error) {
	p := newPaths(name)
	info := ClusterInfo{Name: name, Requires: []string{}}
	b, _, err := z.Get(ctx, p.cluster)
	if errors.Is(err, zk.ErrNoNode) {
		info.Problem = "deleted while listing"
		return info, nil
	}
	if err != nil {
		return info, fmt.Errorf("read %s: %w", p.cluster, err)
	}
	d, err := decodeCluster(b)
	switch {
	case len(b) == 0:
		info.Problem = "the cluster znode holds no data: not a snowflaked cluster"
	case err != nil:
		info.Problem = fmt.Sprintf("malformed cluster znode %s: %v", quoteShort(b), err)
	}
	if err == nil && len(b) > 0 {
		info.Layout, info.Epoch, info.Unit = d.Layout.String(), d.Layout.Epoch.UTC().Format(time.RFC3339Nano), d.Layout.Unit.String()
		info.WorkerIDs = d.WorkerIDs.String()
		if d.RecycleAfterMs > 0 {
			info.RecycleAfter = (time.Duration(d.RecycleAfterMs) * time.Millisecond).String()
		}
	}
	if d.Requires != nil {
		info.Requires = d.Requires
	}
	for _, c := range []struct {
		dir string
		n   *int
	}{{p.forever, &info.Workers}, {p.alive, &info.InService}} {
		kids, err := z.Children(ctx, c.dir)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return info, fmt.Errorf("list %s: %w", c.dir, err)
		}
		*c.n = len(kids)
	}
	return info, nil
}
