package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// clusterUsage is the usage line of "snowflakectl cluster".
const clusterUsage = "cluster create <name> [--layout 41/10/12 --epoch … --time-unit 1ms --gene-bits 0 --worker-id-range LO-HI --recycle-after 24h] | set <name> --recycle-after 24h | list [--json] | delete <name> --yes | purge <name> --yes  (--zk host:2181,… [--zk-auth user:pass] [--timeout 10s] " + zkTLSUsage + ")"

// clusterUsages are the usage lines of cluster's subcommands.
var clusterUsages = map[string]string{
	"create": "cluster create <name> --zk host:2181,… [--layout 41/10/12] [--epoch 2024-01-01T00:00:00Z] [--time-unit 1ms] [--gene-bits 0] [--worker-id-range LO-HI] [--recycle-after 24h] [--ignore-tombstone] [--zk-auth user:pass] [--timeout 10s] " + zkTLSUsage,
	"set":    "cluster set <name> --recycle-after 24h --zk host:2181,… [--zk-auth user:pass] [--timeout 10s] " + zkTLSUsage,
	"list":   "cluster list --zk host:2181,… [--json] [--zk-auth user:pass] [--timeout 10s] " + zkTLSUsage,
	"delete": "cluster delete <name> --yes --zk host:2181,… [--zk-auth user:pass] [--timeout 10s] " + zkTLSUsage,
	"purge":  "cluster purge <name> --yes --zk host:2181,… [--zk-auth user:pass] [--timeout 10s] " + zkTLSUsage,
}

// nodeUsage is the usage line of "snowflakectl node".
const nodeUsage = "node retire <node-key> --zk host:2181,… [--cluster default] [--zk-auth user:pass] [--zk-session-timeout 10s] [--timeout 10s] " + zkTLSUsage

// cluster is "snowflakectl cluster": create, list and delete the clusters
// of a ZooKeeper ensemble (the ZooKeeper side is coordinator's).
func cluster(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "snowflakectl cluster: want a subcommand:", clusterUsage)
		return exitUsage
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stdout, "Usage: snowflakectl %s\n\nRun 'snowflakectl cluster <create|set|list|delete|purge> --help' for a subcommand's flags.\n", clusterUsage)
		return exitOK
	}
	usageLine, ok := clusterUsages[sub]
	if !ok {
		fmt.Fprintf(stderr, "snowflakectl cluster: unknown subcommand %q: %s\n", sub, clusterUsage)
		return exitUsage
	}
	authHelp := "user:password for digest ACLs (reading needs none)"
	if sub != "list" {
		authHelp = "user:password of the digest ACL the cluster's nodes run with (--zk-auth)"
	}
	c := newAdminCmd("cluster "+sub, usageLine, authHelp, stdout, stderr)
	fs := c.fs
	var layout, epoch, unit, workerRange *string
	var geneBits *uint
	var recycleAfter *time.Duration
	var asJSON, yes, ignoreTomb *bool
	switch sub {
	case "create":
		layout = fs.String("layout", snowflake.PresetDefault, "ID bit split time/worker/sequence, or js53 (as snowflaked --layout)")
		epoch = fs.String("epoch", snowflake.DefaultEpoch.Format(time.RFC3339), "start of ID time, RFC 3339 (as snowflaked --epoch)")
		unit = fs.String("time-unit", "1ms", "length of one timestamp tick (as snowflaked --time-unit)")
		geneBits = fs.Uint("gene-bits", 0, fmt.Sprintf("low bits of the sequence given to a gene, 0..%d (as snowflaked --gene-bits)", snowflake.MaxGeneBits))
		workerRange = fs.String("worker-id-range", "", "LO-HI: the worker IDs the cluster claims (default all of the layout's; as snowflaked --worker-id-range)")
		recycleAfter = fs.Duration("recycle-after", 0, "a worker ID without lease and fence renewal for this long may be taken over (as snowflaked --recycle-after); unset: 24h for a new cluster, and an existing cluster's value, whatever it is, is accepted")
		ignoreTomb = fs.Bool("ignore-tombstone", false, "create the cluster as if no cluster of its name had been deleted: no fence to start after, any settings (IDs of the deleted cluster may then be issued again: only when none is kept anywhere)")
	case "set":
		recycleAfter = fs.Duration("recycle-after", 0, "the cluster's new recycle-after: a worker ID without lease and fence renewal for this long may be taken over (1ms or more)")
		for _, f := range fixedSettings {
			fs.String(f.flag, "", "refused: cannot change on an existing cluster ("+f.short+")")
		}
	case "list":
		asJSON = fs.Bool("json", false, "print the clusters as a JSON array")
	case "delete":
		yes = fs.Bool("yes", false, "really delete the cluster's znodes (their fences and max_ids stay in its tombstone)")
	case "purge":
		yes = fs.Bool("yes", false, "really forget the tombstone: a cluster or tag created afterwards under the name may issue the deleted ones' IDs again")
	}
	wantPos := 1
	if sub == "list" {
		wantPos = 0
	}
	if code, ok := c.parse(args, c.wantArgs(wantPos, usageLine)); !ok {
		return code
	}
	switch sub {
	case "create":
		return clusterCreate(c, c.pos[0], createFlags{*layout, *epoch, *unit, *geneBits, *workerRange, *recycleAfter, *ignoreTomb})
	case "set":
		return clusterSet(c, c.pos[0], *recycleAfter)
	case "list":
		return clusterList(c, *asJSON)
	case "purge":
		return clusterPurge(c, c.pos[0], *yes)
	}
	return clusterDelete(c, c.pos[0], *yes)
}

// clusterDelete is "snowflakectl cluster delete".
func clusterDelete(c *adminCmd, name string, yes bool) int {
	if !yes {
		fmt.Fprintf(c.stderr, "%s: deleting cluster %q removes its znodes (its tombstone keeps the fence and the tags' max_ids a cluster created again under the name starts after): add --yes to do it\n", c.cmd, name)
		return exitUsage
	}
	return c.withAdmin(func(ctx context.Context, adm *coordinator.Admin) int {
		if err := adm.DeleteCluster(ctx, name); err != nil {
			return c.failed(err)
		}
		fmt.Fprintf(c.stdout, "deleted cluster %q; its tombstone stays (snowflakectl cluster list shows it): a cluster created again under the name starts after its fence and tags' max_ids\n", name)
		return exitOK
	})
}

// clusterPurge is "snowflakectl cluster purge": forget a tombstone.
func clusterPurge(c *adminCmd, name string, yes bool) int {
	if !yes {
		fmt.Fprintf(c.stderr, "%s: purging the tombstone of %q forgets the fence and the tags' max_ids a cluster or tag created again under the name starts after, so their IDs may be issued again: add --yes to do it\n", c.cmd, name)
		return exitUsage
	}
	return c.withAdmin(func(ctx context.Context, adm *coordinator.Admin) int {
		res, err := adm.PurgeTombstone(ctx, name)
		if err != nil {
			return c.failed(err)
		}
		return printPurged(c.stdout, name, res)
	})
}

// printPurged prints what cluster purge of name forgot.
func printPurged(stdout io.Writer, name string, res coordinator.PurgeResult) int {
	what := "no cluster tombstone"
	if res.Cluster {
		what = "the cluster's tombstone"
	}
	tags := "no tag tombstones"
	if len(res.Tags) > 0 {
		tags = "the tombstones of tags " + strings.Join(res.Tags, ", ")
	}
	fmt.Fprintf(stdout, "forgot %s and %s of %q\n", what, tags, name)
	return exitOK
}

// createFlags are cluster create's settings flags, as given.
type createFlags struct {
	layout, epoch, unit string
	geneBits            uint
	workerRange         string
	recycleAfter        time.Duration
	ignoreTombstone     bool
}

// spec parses the flags as snowflaked parses its own.
func (f createFlags) spec(now time.Time) (coordinator.ClusterSpec, error) {
	l, err := snowflake.ParseLayout(f.layout, f.epoch, f.unit, now)
	if err != nil {
		return coordinator.ClusterSpec{}, fmt.Errorf("--layout %s --epoch %s --time-unit %s: %w", f.layout, f.epoch, f.unit, err)
	}
	l.GeneBits = f.geneBits
	if err := l.Validate(now); err != nil {
		return coordinator.ClusterSpec{}, fmt.Errorf("--gene-bits %d: %w", f.geneBits, err)
	}
	r, err := coordinator.ParseWorkerRange(f.workerRange)
	if err != nil {
		return coordinator.ClusterSpec{}, fmt.Errorf("--worker-id-range: %w", err)
	}
	if r.Hi > l.MaxWorkerID() {
		return coordinator.ClusterSpec{}, fmt.Errorf("--worker-id-range %s: layout %s holds worker IDs 0..%d", f.workerRange, l, l.MaxWorkerID())
	}
	if f.recycleAfter != 0 && f.recycleAfter < time.Millisecond {
		return coordinator.ClusterSpec{}, fmt.Errorf("--recycle-after %s: want 1ms or more (or leave it unset)", f.recycleAfter)
	}
	return coordinator.ClusterSpec{Layout: l, WorkerIDs: r, RecycleAfter: f.recycleAfter, IgnoreTombstone: f.ignoreTombstone}, nil
}

// clusterCreate is "snowflakectl cluster create".
func clusterCreate(c *adminCmd, name string, f createFlags) int {
	spec, err := f.spec(time.Now())
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		return exitUsage
	}
	return c.withAdmin(func(ctx context.Context, adm *coordinator.Admin) int {
		res, err := adm.CreateCluster(ctx, name, spec)
		if err != nil {
			return c.failed(err)
		}
		printCreated(c.stdout, c.stderr, c.cmd, name, spec, res)
		return exitOK
	})
}

// printCreated prints what cluster create of name with spec did.
func printCreated(stdout, stderr io.Writer, cmd, name string, spec coordinator.ClusterSpec, res coordinator.CreateResult) {
	for _, o := range res.Overlaps {
		fmt.Fprintf(stderr, "%s: warning: %s\n", cmd, o.Warning)
	}
	what := "created cluster"
	if !res.Created {
		what = "cluster exists with these settings, nothing to do:"
	}
	rng := spec.WorkerIDs.String()
	if spec.WorkerIDs == (coordinator.WorkerRange{}) {
		rng = "0-" + strconv.FormatInt(spec.Layout.MaxWorkerID(), 10)
	}
	ra := "none recorded"
	if res.RecycleAfter > 0 {
		ra = res.RecycleAfter.String()
	}
	fmt.Fprintf(stdout, "%s %q: layout %s, worker IDs %s, recycle-after %s, requires %s\n", what, name, spec.Layout.Describe(), rng, ra,
		strings.Join(res.Requires, ","))
	if !res.FenceFloor.IsZero() {
		fmt.Fprintf(stdout, "a cluster of this name was deleted: every worker ID starts after its fence %s\n", res.FenceFloor.UTC().Format(time.RFC3339Nano))
	}
	if res.TombstoneIgnored {
		fmt.Fprintf(stderr, "%s: warning: the tombstone of the deleted cluster %q was ignored (--ignore-tombstone): its IDs may be issued again\n", cmd, name)
	}
}

// fixedSettings are the cluster create flags cluster set refuses: the
// settings that cannot change on an existing cluster, what to do instead
// (short, for --help) and why.
var fixedSettings = []struct{ flag, short, why string }{
	{"layout", "part of the layout: a new cluster", layoutFixed},
	{"epoch", "part of the layout: a new cluster", layoutFixed},
	{"time-unit", "part of the layout: a new cluster", layoutFixed},
	{"gene-bits", "part of the layout: a new cluster", layoutFixed},
	{"worker-id-range", "a new cluster", "narrowing it strands the nodes holding worker IDs outside the new range, and widening it may overlap " +
		"another region's cluster, which nothing can check across ensembles; create a new cluster with the range you want " +
		"(snowflakectl cluster create) and move the nodes to it: see docs/procedures.md, \"Move to a new cluster or layout\""},
}

// layoutFixed is why the layout's flags cannot change on a cluster.
const layoutFixed = "the layout gives the cluster's IDs their meaning: with another one, IDs already issued would read as other times " +
	"and workers, and new IDs could repeat them; create a new cluster (snowflakectl cluster create) and move the nodes to it: " +
	"see docs/procedures.md, \"Move to a new cluster or layout\""

// clusterSet is "snowflakectl cluster set": it changes the settings that
// may change on an existing cluster and refuses the others (exit 2).
func clusterSet(c *adminCmd, name string, recycleAfter time.Duration) int {
	refused := false
	for _, f := range fixedSettings {
		if c.given[f.flag] {
			fmt.Fprintf(c.stderr, "%s: --%s cannot change on an existing cluster: %s\n", c.cmd, f.flag, f.why)
			refused = true
		}
	}
	switch {
	case refused:
		return exitUsage
	case !c.given["recycle-after"]:
		fmt.Fprintf(c.stderr, "%s: want a setting to change: %s\n", c.cmd, clusterUsages["set"])
		return exitUsage
	case recycleAfter < time.Millisecond:
		fmt.Fprintf(c.stderr, "%s: --recycle-after %s: want 1ms or more\n", c.cmd, recycleAfter)
		return exitUsage
	}
	return c.withAdmin(func(ctx context.Context, adm *coordinator.Admin) int {
		res, err := adm.SetCluster(ctx, name, coordinator.ClusterChange{RecycleAfter: recycleAfter})
		if err != nil {
			return c.failed(err)
		}
		printSet(c.stdout, name, res)
		return exitOK
	})
}

// printSet prints what cluster set of name did.
func printSet(stdout io.Writer, name string, res coordinator.SetResult) {
	if !res.Changed {
		fmt.Fprintf(stdout, "cluster %q: recycle-after is %s already, nothing to do\n", name, res.RecycleAfter)
		return
	}
	old := res.OldRecycleAfter.String()
	if res.OldRecycleAfter == 0 {
		old = "none recorded"
	}
	fmt.Fprintf(stdout, "cluster %q: recycle-after %s → %s; nodes use it from their next start (one started with --recycle-after set to another value is refused then: leave the flag unset)\n",
		name, old, res.RecycleAfter)
}

// clusterList is "snowflakectl cluster list".
func clusterList(c *adminCmd, asJSON bool) int {
	return c.withAdmin(func(ctx context.Context, adm *coordinator.Admin) int {
		rows, err := adm.ListClusters(ctx)
		if err != nil {
			return c.failed(err)
		}
		if asJSON {
			return writeJSON(c.stdout, c.stderr, c.cmd, rows)
		}
		printClusters(c.stdout, rows)
		return exitOK
	})
}

// printClusters prints the table of cluster list, and its tombstones'.
func printClusters(stdout io.Writer, rows []coordinator.ClusterInfo) {
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no clusters")
		return
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLAYOUT\tEPOCH\tUNIT\tWORKER IDS\tRECYCLE AFTER\tWORKERS\tIN SERVICE\tREQUIRES\tPROBLEM")
	var tombs []coordinator.TombstoneInfo
	for _, r := range rows {
		if r.Tombstone != nil {
			tombs = append(tombs, *r.Tombstone)
		}
		if r.Deleted {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Name, dash(r.Layout), dash(r.Epoch), dash(r.Unit), dash(r.WorkerIDs),
			dash(r.RecycleAfter), r.Workers, r.InService, dash(strings.Join(r.Requires, ",")), dash(r.Problem))
	}
	tw.Flush()
	if len(tombs) == 0 {
		return
	}
	fmt.Fprintln(stdout, "\nTombstones (a cluster or tag created again under the name starts after them; snowflakectl cluster purge forgets one):")
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDELETED\tLAYOUT\tEPOCH\tUNIT\tWORKER IDS\tFENCE\tTAGS (MAX_ID)\tPROBLEM")
	for _, t := range tombs {
		tags := make([]string, 0, len(t.Tags))
		for _, tt := range t.Tags {
			tags = append(tags, fmt.Sprintf("%s (%d)", tt.Tag, tt.MaxID))
		}
		deleted := t.Deleted
		if deleted == "" && t.Exists {
			deleted = "exists"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, dash(deleted), dash(t.Layout), dash(t.Epoch), dash(t.Unit), dash(t.WorkerIDs),
			dash(t.Fence), dash(strings.Join(tags, ", ")), dash(t.Problem))
	}
	tw.Flush()
}

// node is "snowflakectl node retire": let a dead node's worker ID be
// recycled before recycle-after, after its fence.
func node(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "snowflakectl node: want a subcommand:", nodeUsage)
		return exitUsage
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stdout, "Usage: snowflakectl %s\n", nodeUsage)
		return exitOK
	case "retire":
	default:
		fmt.Fprintf(stderr, "snowflakectl node: unknown subcommand %q: %s\n", sub, nodeUsage)
		return exitUsage
	}
	c := newAdminCmd("node retire", nodeUsage, "user:password of the digest ACL the cluster's nodes run with (--zk-auth)", stdout, stderr)
	cluster := c.fs.String("cluster", "default", "cluster name (ZooKeeper path /snowflaked/<cluster>)")
	sessionTimeout := c.fs.Duration("zk-session-timeout", coordinator.DefaultSessionTimeout,
		"the nodes' --zk-session-timeout: how long ZooKeeper keeps a dead node's session, and with it its lease (for the wait a refusal names)")
	oneKey := func(pos []string) bool {
		if len(pos) == 1 {
			return true
		}
		fmt.Fprintf(stderr, "%s: want one node key, got %q: %s\n", c.cmd, pos, nodeUsage)
		return false
	}
	if code, ok := c.parse(args, oneKey); !ok {
		return code
	}
	key := c.pos[0]
	return c.withAdmin(func(ctx context.Context, adm *coordinator.Admin) int {
		res, err := adm.Retire(ctx, *cluster, key)
		if err != nil {
			msg := err.Error()
			if errors.Is(err, coordinator.ErrLeaseHeld) {
				msg = heldLease(msg, *sessionTimeout, func() (coordinator.WorkerInfo, bool) {
					return workerRow(ctx, adm, *cluster, key)
				})
			}
			fmt.Fprintf(stderr, "%s: %s\n", c.cmd, msg)
			return adminExit(err)
		}
		ids := make([]string, len(res.WorkerIDs))
		for i, id := range res.WorkerIDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
		what := "retired"
		if res.Already {
			what = "already retired"
		}
		fmt.Fprintf(stdout, "%s node key %q of cluster %q: worker ID %s may be taken over now; its next holder issues only after the fence %s\n",
			what, key, *cluster, strings.Join(ids, ","), res.Fence.Time().Format(time.RFC3339Nano))
		return exitOK
	})
}

// heldLeaseRE reads Retire's refusal for a held lease: the lease's path,
// its holder, the holder's address and session.
var heldLeaseRE = regexp.MustCompile(`its worker ID's lease (\S+) is held by (node key "[^"]*" at (\S+) \(session (0x[0-9a-f]+)\)); stop that node first \(retire is for nodes that are gone\)`)

// answerTimeout bounds heldLease's check that the holder's address answers.
var answerTimeout = time.Second

// heldLease rewords Retire's refusal msg for a lease held when the node
// holding it does not answer at its address: a node that died (kill -9,
// its machine gone) keeps its ZooKeeper session, and with it the lease,
// until ZooKeeper expires the session, one session timeout after the
// node's last contact. That is no other process to stop but a wait, which
// it says, with the node's last report (row, when it can be read). A
// holder that answers is a running node: msg as it is.
func heldLease(msg string, sessionTimeout time.Duration, row func() (coordinator.WorkerInfo, bool)) string {
	m := heldLeaseRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	lease, holder, addr, session := m[1], m[2], m[3], m[4]
	why, answers := nodeAnswers(addr, answerTimeout)
	if answers {
		return msg
	}
	last := ""
	if r, ok := row(); ok && r.LastReportAgeMs >= 0 {
		last = fmt.Sprintf("; its last report was %s ago", (time.Duration(r.LastReportAgeMs) * time.Millisecond).Round(100*time.Millisecond))
	}
	head, _, _ := strings.Cut(msg, "its worker ID's lease")
	head = strings.TrimPrefix(head, coordinator.ErrLeaseHeld.Error()+": ") // "held by another process": it is not
	head = strings.Replace(head, "cannot be retired:", "cannot be retired yet:", 1)
	return fmt.Sprintf("%sits worker ID's lease %s is held by %s, and the node does not answer there (%s): "+
		"the node's last session %s has not expired yet: it expires within %s (ZooKeeper ends a dead node's session "+
		"one --zk-session-timeout, %s, after its last contact%s); retry then, or, if the node runs but cannot be reached from here, stop it first",
		head, lease, holder, why, session, sessionTimeout, sessionTimeout, last)
}

// nodeAnswers reports whether something answers at addr within timeout:
// a TCP connection accepted, then any byte or the connection's end in
// answer to a request (a node serving HTTPS closes it on a plain
// request). Without it, why says what happened.
func nodeAnswers(addr string, timeout time.Duration) (why string, ok bool) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		var se *os.SyscallError
		if errors.As(err, &se) {
			err = se.Err // "connection refused"
		}
		return err.Error(), false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.0\r\n\r\n"); err != nil {
		return "", true // it took the connection, and went away
	}
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Sprintf("it took the connection and said nothing within %s: a frozen process?", timeout), false
		}
	}
	return "", true
}

// workerRow reads the forever znode row of nodeKey in cluster (false when
// it cannot be read).
func workerRow(ctx context.Context, adm *coordinator.Admin, cluster, nodeKey string) (coordinator.WorkerInfo, bool) {
	rows, err := adm.ListWorkers(ctx, cluster)
	if err != nil {
		return coordinator.WorkerInfo{}, false
	}
	for _, r := range rows {
		if r.NodeKey == nodeKey && r.Retired == 0 && r.WorkerID >= 0 {
			return r, true
		}
	}
	return coordinator.WorkerInfo{}, false
}
