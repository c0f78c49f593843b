package ctl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// segmentUsage is the usage line of "snowflakectl segment".
const segmentUsage = "segment create <tag> [--start 1] [--reuse-numbers] [--step 1000] [--max-step N] [--description …] [--opaque --digits D] [--require-token] [--max-count N] [--reset daily|monthly|yearly [--tz Zone] [--format '{date}{seq:6}']] | token rotate <tag> [--grace 10m] | list [--json] | status <tag> [--json] | decode <tag> <id> | set-max <tag> <N> [--drop-returned] | delete <tag> --yes  (--zk host:2181,… [--cluster default] [--zk-auth user:pass] [--timeout 10s] " + zkTLSUsage + ")"

// segmentSub is a subcommand of "snowflakectl segment".
type segmentSub struct {
	usage    string // its usage line
	args     int    // how many positional arguments it takes
	authHelp string // the help of its --zk-auth
	// flags registers the subcommand's own flags into f (nil: none).
	flags func(fs *flag.FlagSet, f *segmentFlags)
	// prepare checks what can be checked without ZooKeeper; false is exit
	// status 2 (nil: nothing to check).
	prepare func(c *segmentCall) bool
	// run does the subcommand against ZooKeeper and returns the exit status.
	run func(ctx context.Context, st *segment.ZKStore, c *segmentCall) int
}

// Help texts of --zk-auth.
const (
	readAuthHelp  = "user:password for digest ACLs (reading needs none)"
	writeAuthHelp = "user:password of the cluster's digest ACL (writing needs it when the cluster runs with --zk-auth)"
)

// segmentSubs are the subcommands of "snowflakectl segment".
var segmentSubs = map[string]segmentSub{
	"create": {
		usage:    "segment create <tag> --zk host:2181,… [--start 1] [--reuse-numbers] [--step 1000] [--max-step N] [--description …] [--opaque --digits D] [--require-token] [--max-count N] [--reset daily|monthly|yearly [--tz Zone] [--format '{date}{seq:6}']] [--cluster default] [--zk-auth user:pass]",
		args:     1,
		authHelp: "user:password of the cluster's digest ACL (creating a tag needs it when the cluster runs with --zk-auth)",
		flags:    createTagFlags, prepare: prepareCreate, run: segmentCreate,
	},
	"list": {
		usage:    "segment list --zk host:2181,… [--cluster default] [--json]",
		authHelp: readAuthHelp,
		flags:    jsonFlag("print the tags as a JSON array"), run: segmentList,
	},
	"status": {
		usage:    "segment status <tag> --zk host:2181,… [--cluster default] [--json]",
		args:     1,
		authHelp: readAuthHelp,
		flags:    jsonFlag("print the tag's status as a JSON object"), run: segmentStatusCmd,
	},
	"decode": {
		usage:    "segment decode <tag> <id> --zk host:2181,… [--cluster default] [--zk-auth user:pass]",
		args:     2,
		authHelp: "user:password of the cluster's digest ACL (reading an opaque tag's key needs it when the cluster runs with --zk-auth)",
		run: func(ctx context.Context, st *segment.ZKStore, c *segmentCall) int {
			return segmentDecode(ctx, st, c.pos[0], c.pos[1], c.stdout, c.stderr)
		},
	},
	"set-max": {
		usage:    "segment set-max <tag> <N> [--drop-returned] --zk host:2181,… [--cluster default] [--zk-auth user:pass]",
		args:     2,
		authHelp: writeAuthHelp,
		flags: func(fs *flag.FlagSet, f *segmentFlags) {
			f.dropReturned = fs.Bool("drop-returned", false, "also drop every returned range of the tag, in the same write (the repair after ZooKeeper went back: a forgotten take may have put back a range a node holds); N may then equal max_id")
		},
		prepare: prepareSetMax, run: segmentSetMax,
	},
	"token": {
		usage:    "segment token rotate <tag> [--grace 10m] --zk host:2181,… [--cluster default] [--zk-auth user:pass]",
		args:     2,
		authHelp: "user:password of the cluster's digest ACL (a token tag's token znode is readable and writable only with it when the cluster runs with --zk-auth)",
		flags: func(fs *flag.FlagSet, f *segmentFlags) {
			f.grace = fs.Duration("grace", 10*time.Minute, "how long the tokens valid before stay valid (0: refused at once, within a node's poll)")
		},
		prepare: prepareTokenRotate, run: segmentTokenRotate,
	},
	"delete": {
		usage:    "segment delete <tag> --yes --zk host:2181,… [--cluster default] [--zk-auth user:pass]",
		args:     1,
		authHelp: writeAuthHelp,
		flags: func(fs *flag.FlagSet, f *segmentFlags) {
			f.yes = fs.Bool("yes", false, "really delete the tag, its returned ranges and an opaque tag's key (required)")
		},
		prepare: prepareDelete,
		run: func(ctx context.Context, st *segment.ZKStore, c *segmentCall) int {
			return segmentDelete(ctx, st, c.pos[0], c.stdout, c.stderr)
		},
	},
}

// segmentFlags are the flags of a segment subcommand besides the admin
// flags: --cluster, which every one has, and each one's own (nil in the
// others).
type segmentFlags struct {
	cluster                           *string
	asJSON, yes, dropReturned, opaque *bool
	start, step, maxStep              *int64
	desc                              *string
	digits                            *int
	requireToken                      *bool
	maxCount                          *int64
	grace                             *time.Duration
	reuseNumbers                      *bool
	reset, tz, format                 *string
}

// segmentCall is one run of a segment subcommand.
type segmentCall struct {
	*adminCmd // "snowflakectl segment <sub>"
	f         segmentFlags
	tag       segment.Tag // create: the tag to create
	newMax    int64       // set-max: the new max_id
}

// jsonFlag registers --json with help text help.
func jsonFlag(help string) func(*flag.FlagSet, *segmentFlags) {
	return func(fs *flag.FlagSet, f *segmentFlags) { f.asJSON = fs.Bool("json", false, help) }
}

// Segment is "snowflakectl segment": create, list and inspect the tags of
// segment mode (dense IDs) in ZooKeeper.
func Segment(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "snowflakectl segment: want a subcommand:", segmentUsage)
		return exitUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stdout, "Usage: snowflakectl %s\n\nRun 'snowflakectl segment <create|token|list|status|decode|set-max|delete> --help' for a subcommand's flags.\n", segmentUsage)
		return exitOK
	}
	sub, ok := segmentSubs[name]
	if !ok {
		fmt.Fprintf(stderr, "snowflakectl segment: unknown subcommand %q: %s\n", name, segmentUsage)
		return exitUsage
	}
	c := &segmentCall{adminCmd: newAdminCmd("segment "+name, sub.usage+" [--timeout 10s] "+zkTLSUsage, sub.authHelp, stdout, stderr)} // every subcommand has the admin flags
	c.f.cluster = c.fs.String("cluster", "default", "cluster name (ZooKeeper path /snowflaked/<cluster>)")
	if sub.flags != nil {
		sub.flags(c.fs, &c.f)
	}
	if code, ok := c.parse(args, c.wantArgs(sub.args, segmentUsage)); !ok {
		return code
	}
	if !c.checkTag(sub) || (sub.prepare != nil && !sub.prepare(c)) {
		return exitUsage
	}
	var before func(ctx context.Context, dial zkconn.Dialer) int
	if name == "create" {
		before = c.checkCreateAuth
	}
	return c.withStore(*c.f.cluster, before, func(ctx context.Context, st *segment.ZKStore) int { return sub.run(ctx, st, c) })
}

// checkTag reports a bad tag name (false: exit status 2).
func (c *segmentCall) checkTag(sub segmentSub) bool {
	if sub.args == 1 {
		if err := segment.ValidateTag(c.pos[0]); err != nil {
			fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
			return false
		}
	}
	return true
}

// createTagFlags registers the flags of "segment create".
func createTagFlags(fs *flag.FlagSet, f *segmentFlags) {
	f.opaque = fs.Bool("opaque", false, "hand out D-digit numbers that are a keyed permutation of the counter (unique, not guessable, revealing no volume) instead of the counter")
	f.digits = fs.Int("digits", 0, fmt.Sprintf("with --opaque: the numbers' digits, %d..%d (9x10^(D-1) IDs in all)", segment.MinOpaqueDigits, segment.MaxOpaqueDigits))
	f.start = fs.Int64("start", 1, "the tag's first ID (unset, over a deleted tag of the name: its max_id, so none of its numbers comes back)")
	f.reuseNumbers = fs.Bool("reuse-numbers", false, "accept a --start below the max_id of a deleted tag of the name, whose numbers may then be handed out again (only when none is kept anywhere)")
	f.step = fs.Int64("step", segment.DefaultStep, "base step: IDs per range load (the dynamic step doubles from it)")
	f.maxStep = fs.Int64("max-step", 0, fmt.Sprintf("the dynamic step's ceiling (default step x %d)", segment.DefaultMaxStepFactor))
	f.desc = fs.String("description", "", "what the tag numbers")
	f.requireToken = fs.Bool("require-token", false, "requests for the tag need its token (Authorization: Bearer …): one is made and printed once on stdout, only its hash is kept (rotate with segment token rotate)")
	f.maxCount = fs.Int64("max-count", 0, "the most IDs one request may ask for (count=N above it: 400 invalid_count); 0: the node's --max-batch only")
	f.reset = fs.String("reset", "", "daily, monthly or yearly: the numbers restart at --start each period, printed with its date (see --format)")
	f.tz = fs.String("tz", "", "with --reset: the IANA time zone the periods follow, e.g. Asia/Shanghai (default UTC)")
	f.format = fs.String("format", "", "with --reset: how an ID prints: literal text, {date} or {date:yyyy-MM-dd}, and {seq:W} (the number, W digits at most, zero-padded) or {seq} (default {date}{seq:6})")
}

// prepareCreate builds and checks the tag "segment create" creates.
func prepareCreate(c *segmentCall) bool {
	f := c.f
	if *f.maxStep == 0 && *f.step > 0 {
		*f.maxStep = *f.step * segment.DefaultMaxStepFactor
	}
	c.tag = segment.Tag{Name: c.pos[0], Start: *f.start, MaxID: *f.start, Step: *f.step, MaxStep: *f.maxStep, Description: *f.desc,
		RequireToken: *f.requireToken, MaxCount: *f.maxCount}
	switch {
	case *f.opaque:
		c.tag.Opaque = &segment.Opaque{Digits: *f.digits}
	case *f.digits != 0:
		fmt.Fprintf(c.stderr, "%s: --digits goes with --opaque\n", c.cmd)
		return false
	}
	switch {
	case *f.reset != "":
		format := *f.format
		if format == "" {
			format = "{date}{seq:6}"
		}
		c.tag.Reset = &segment.Reset{Every: *f.reset, Zone: *f.tz, Format: format}
	case *f.tz != "" || *f.format != "":
		fmt.Fprintf(c.stderr, "%s: --tz and --format go with --reset\n", c.cmd)
		return false
	}
	if err := c.tag.Check(); err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		return false
	}
	return true
}

// checkCreateAuth refuses, before anything is created (the segments
// znode included), --zk-auth credentials that are not those the cluster's
// znodes are guarded by: exit status 2 naming the mismatch, 1 when the
// cluster's ACL cannot be read. A tag made with other credentials than the
// nodes' could not be served: its token znode and opaque key readable, and
// its record writable, only with credentials no node uses (every node
// answering 503 "zk: not authenticated" for it).
func (c *segmentCall) checkCreateAuth(ctx context.Context, dial zkconn.Dialer) int {
	a := c.admin
	z, err := zkclient.DialCluster(ctx, zkclient.Config{Servers: splitList(*a.zk), Cluster: *c.f.cluster, Auth: *a.auth, Timeout: *a.timeout, Dial: dial})
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		if errors.Is(err, zkclient.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFailure
	}
	defer z.Conn.Close()
	acl, err := z.GetACL(ctx, zkclient.ClusterPath(*c.f.cluster))
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: read the ACL of cluster %q: %v\n", c.cmd, *c.f.cluster, zkclient.Unavailable(err))
		return exitFailure
	}
	if why := authMismatch(*c.f.cluster, acl, *a.auth); why != "" {
		fmt.Fprintf(c.stderr, "%s: %s; nothing was created\n", c.cmd, why)
		return exitUsage
	}
	return exitOK
}

// authMismatch says how credentials auth ("user:password", "" for none)
// differ from those guarding the cluster whose znode has ACL acl ("" when
// they are the same, or both are none).
func authMismatch(cluster string, acl []zk.ACL, auth string) string {
	var ids, users []string // the digest identities guarding the cluster
	for _, e := range acl {
		if e.Scheme == "digest" {
			u, _, _ := strings.Cut(e.ID, ":")
			ids, users = append(ids, e.ID), append(users, u)
		}
	}
	user, pass, _ := strings.Cut(auth, ":")
	switch {
	case len(ids) == 0 && auth == "":
		return ""
	case len(ids) == 0:
		return fmt.Sprintf("cluster %q was created without --zk-auth (its znodes are open to every client) and this command was given the --zk-auth of user %q: "+
			"the tag would be guarded by credentials the cluster's nodes do not use, and they could not serve it (503 segment_unavailable: zk: not authenticated); run segment create without --zk-auth", cluster, user)
	case auth == "":
		return fmt.Sprintf("cluster %q is guarded by the --zk-auth credentials of user %q: give them with --zk-auth", cluster, strings.Join(users, `" or "`))
	case slices.Contains(ids, zk.DigestACL(zk.PermAll, user, pass)[0].ID):
		return ""
	case slices.Contains(users, user):
		return fmt.Sprintf("the password of --zk-auth user %q is not the cluster's (cluster %q is guarded by another)", user, cluster)
	}
	return fmt.Sprintf("--zk-auth user %q is not the cluster's: cluster %q is guarded by the credentials of user %q", user, cluster, strings.Join(users, `" or "`))
}

// segmentCreate is "segment create".
func segmentCreate(ctx context.Context, st *segment.ZKStore, c *segmentCall) int {
	tag := c.tag
	var token string
	var err error
	opts := segment.CreateOptions{StartGiven: c.given["start"], ReuseNumbers: *c.f.reuseNumbers}
	if tag.Reset != nil {
		// Nodes of releases before reset tags would serve the raw counter.
		z, cluster := st.Cluster()
		err = coordinator.RequireFeature(ctx, z, cluster, coordinator.FeatureResetTags)
	}
	switch {
	case err != nil:
	case tag.RequireToken:
		// Nodes of releases before tokens would serve the tag to anyone.
		z, cluster := st.Cluster()
		if err = coordinator.RequireFeature(ctx, z, cluster, coordinator.FeatureTagTokens); err == nil {
			token, err = st.CreateWithToken(ctx, tag, opts)
		}
	default:
		err = st.Create(ctx, tag, opts)
	}
	if errors.Is(err, segment.ErrNumbersIssued) {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		return exitFailure
	}
	if got, gerr := st.Tag(ctx, tag.Name); gerr == nil && got.Start != tag.Start {
		fmt.Fprintf(c.stdout, "a tag %q was deleted with max_id %d: the new one starts there, so none of its numbers comes back\n", tag.Name, got.Start)
		tag.Start = got.Start
	}
	fmt.Fprintf(c.stdout, "created tag %q: first ID %d, step %d (max %d)\n", tag.Name, tag.Start, tag.Step, tag.MaxStep)
	if tag.MaxCount > 0 {
		fmt.Fprintf(c.stdout, "at most %d IDs per request\n", tag.MaxCount)
	}
	if r := tag.Reset; r != nil {
		rule, _ := r.Compile() // checked by prepareCreate
		key := rule.PeriodOf(time.Now())
		fmt.Fprintf(c.stdout, "resets %s in %s: IDs print as %q, e.g. %s today\n", r.Every, rule.Zone(), r.Format, rule.AppendID(nil, key, tag.Start))
	}
	if tag.RequireToken {
		printToken(c, tag.Name, token)
	}
	if tag.Opaque == nil {
		return exitOK
	}
	fmt.Fprintf(c.stdout, "opaque: %d-digit numbers, %d in all; its key is in ZooKeeper beside the tag\n", tag.Opaque.Digits, tag.Opaque.Size())
	if *c.admin.auth == "" {
		fmt.Fprintf(c.stderr, "%s: WARNING: without --zk-auth the key's znode is open: anyone who reaches ZooKeeper can read it and tell the tag's order and volume from its numbers\n", c.cmd)
	}
	return exitOK
}

// printToken prints a new token of tag once, on a line of its own (for
// scripts: the last line of stdout), and warns when its hashes' znode is
// open to the world.
func printToken(c *segmentCall, tag, token string) {
	fmt.Fprintf(c.stdout, "token of tag %q (shown once, only its hash is kept; send it as Authorization: Bearer <token>):\n%s\n", tag, token)
	if *c.admin.auth == "" {
		fmt.Fprintf(c.stderr, "%s: WARNING: without --zk-auth the token's hash znode is open: anyone who reaches ZooKeeper can read it (not the token) and replace it\n", c.cmd)
	}
}

// prepareTokenRotate checks "segment token rotate <tag>".
func prepareTokenRotate(c *segmentCall) bool {
	if c.pos[0] != "rotate" {
		fmt.Fprintf(c.stderr, "%s: unknown action %q: want rotate <tag>\n", c.cmd, c.pos[0])
		return false
	}
	if err := segment.ValidateTag(c.pos[1]); err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		return false
	}
	if *c.f.grace < 0 {
		fmt.Fprintf(c.stderr, "%s: --grace %v: want 0 or more\n", c.cmd, *c.f.grace)
		return false
	}
	return true
}

// segmentTokenRotate is "segment token rotate": a new token, printed once;
// the tokens valid before stay valid for --grace.
func segmentTokenRotate(ctx context.Context, st *segment.ZKStore, c *segmentCall) int {
	tag := c.pos[1]
	token, err := st.RotateToken(ctx, tag, *c.f.grace)
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		if errors.Is(err, segment.ErrNoToken) {
			return exitUsage
		}
		return exitFailure
	}
	fmt.Fprintf(c.stdout, "rotated the token of tag %q: the tokens valid before stay valid for %v\n", tag, *c.f.grace)
	printToken(c, tag, token)
	return exitOK
}

// segmentList is "segment list".
func segmentList(ctx context.Context, st *segment.ZKStore, c *segmentCall) int {
	tags, err := st.List(ctx)
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		return exitFailure
	}
	return writeTags(c.stdout, c.stderr, tags, *c.f.asJSON)
}

// segmentStatusCmd is "segment status".
func segmentStatusCmd(ctx context.Context, st *segment.ZKStore, c *segmentCall) int {
	rep, err := segmentStatus(ctx, st, c.pos[0])
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		return exitFailure
	}
	if *c.f.asJSON {
		return writeJSON(c.stdout, c.stderr, c.cmd, rep)
	}
	writeSegmentStatus(c.stdout, rep)
	return exitOK
}

// prepareSetMax parses the N of "segment set-max".
func prepareSetMax(c *segmentCall) bool {
	n, err := strconv.ParseInt(c.pos[1], 10, 64)
	if err != nil || n < 1 {
		fmt.Fprintf(c.stderr, "%s: N %q: want a positive whole number (the new max_id)\n", c.cmd, c.pos[1])
		return false
	}
	c.newMax = n
	return true
}

// segmentSetMax is "segment set-max": it moves the tag's max_id, and with
// --drop-returned drops its returned ranges in the same write.
func segmentSetMax(ctx context.Context, st *segment.ZKStore, c *segmentCall) int {
	name, newMax := c.pos[0], c.newMax
	var was int64
	var err error
	if *c.f.dropReturned {
		var dropped []segment.Range
		was, dropped, err = st.Repair(ctx, name, newMax)
		if err == nil {
			var lost int64
			for _, r := range dropped {
				lost += r.Len()
			}
			fmt.Fprintf(c.stdout, "tag %q: dropped %d returned range(s), %d IDs (lost, never issued)\n", name, len(dropped), lost)
		}
	} else {
		was, err = st.SetMax(ctx, name, newMax)
	}
	switch {
	case err != nil:
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		if errors.Is(err, segment.ErrMaxIDBelow) {
			return exitUsage
		}
		return exitFailure
	case was == newMax:
		fmt.Fprintf(c.stdout, "tag %q: max_id is %d already\n", name, was)
	default:
		fmt.Fprintf(c.stdout, "tag %q: max_id %d -> %d: the next range starts at %d\n", name, was, newMax, newMax)
	}
	return exitOK
}

// prepareDelete refuses "segment delete" without --yes.
func prepareDelete(c *segmentCall) bool {
	if !*c.f.yes {
		fmt.Fprintf(c.stderr, "%s: refusing to delete tag %q without --yes: its counter, returned ranges and key go for good\n", c.cmd, c.pos[0])
		return false
	}
	return true
}

// splitList splits a comma-separated flag, trimming each entry (an empty
// entry stays, for the checks to name).
func splitList(s string) []string {
	out := strings.Split(s, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// writeJSON prints v as indented JSON for a --json flag; cmd prefixes the
// error.
func writeJSON(stdout, stderr io.Writer, cmd string, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return exitOK
}

// tagJSON is a tag in --json output.
type tagJSON struct {
	Name string `json:"name"`
	segment.Tag
}

func writeTags(stdout, stderr io.Writer, tags []segment.Tag, asJSON bool) int {
	if asJSON {
		out := make([]tagJSON, len(tags))
		for i, t := range tags {
			out[i] = tagJSON{Name: t.Name, Tag: t}
		}
		return writeJSON(stdout, stderr, "snowflakectl segment list", out)
	}
	fmt.Fprintf(stdout, "%d tag(s)\n", len(tags))
	if len(tags) == 0 {
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TAG\tSTART\tMAX_ID\tSTEP\tMAX STEP\tTOKEN\tDESCRIPTION")
	for _, t := range tags {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", t.Name, t.Start, t.MaxID, t.Step, t.MaxStep, yesNo(t.RequireToken), dash(t.Description))
	}
	tw.Flush()
	return exitOK
}

// SegmentStatus is "segment status": the tag, its returned ranges, which
// node holds which range, and where the IDs below max_id went.
type SegmentStatus struct {
	Tag      tagJSON                    `json:"tag"`
	Returned []segment.Range            `json:"returned"`
	Holders  map[string][]segment.Range `json:"holders"`
	// HandedOut is max_id - start: IDs handed to nodes, ever. It is
	// ReturnedIDs + HeldIDs + IssuedOrLost, each ID counted once.
	HandedOut int64 `json:"handed_out"`
	// ReturnedIDs are the IDs below max_id in returned ranges (never
	// issued). HeldIDs are the other IDs below max_id in the live nodes'
	// ranges as they published them at each load (part of those may be
	// issued since: nodes do not publish every ID); an ID listed by two
	// records (one not yet updated after a return) counts once.
	ReturnedIDs int64 `json:"returned_ids"`
	HeldIDs     int64 `json:"held_ids"`
	// IssuedOrLost is the rest, in neither: issued to callers, or lost
	// (crashes, failed returns), or held by a node that has not published
	// its range (yet, or its session is gone). A lower bound of what is
	// issued or lost while nodes hold ranges, exact once no node holds one.
	IssuedOrLost int64 `json:"issued_or_lost"`
	// IssuedOrLostAtMost is IssuedOrLost + HeldIDs (= HandedOut -
	// ReturnedIDs): the upper bound, should the live nodes have issued
	// every ID of their ranges by now. Equal to IssuedOrLost when no node
	// holds a range.
	IssuedOrLostAtMost int64 `json:"issued_or_lost_at_most"`
	// OutsideIDs are IDs of returned or published ranges at or above
	// max_id (or below start), counted in none of the above: ZooKeeper
	// lost the writes that raised max_id past them (docs/segments.md, R6).
	OutsideIDs int64 `json:"outside_ids,omitempty"`
	// Period is a reset tag's newest period (nil for other tags, and
	// before a node served one).
	Period *PeriodStatus `json:"period,omitempty"`
}

// PeriodStatus is a reset tag's newest period in "segment status".
type PeriodStatus struct {
	// Key is the period (2026-12-07, 2026-12 or 2026), Date as IDs print
	// it.
	Key  string `json:"key"`
	Date string `json:"date"`
	// Base is the counter's value the period started at; HandedOut the
	// counter values handed to nodes since (max_id - base), an upper
	// bound of the period's numbers issued.
	Base      int64 `json:"base"`
	HandedOut int64 `json:"handed_out"`
	// Next is the text of the first number no node holds yet.
	Next string `json:"next"`
}

func segmentStatus(ctx context.Context, st *segment.ZKStore, name string) (SegmentStatus, error) {
	t, err := st.Tag(ctx, name)
	if err != nil {
		return SegmentStatus{}, err
	}
	ret, err := st.Returned(ctx, name)
	if err != nil {
		return SegmentStatus{}, err
	}
	holders, err := st.Holders(ctx, name)
	if err != nil {
		return SegmentStatus{}, err
	}
	rep := tally(name, t, ret, holders)
	rep.Period = periodStatus(t)
	return rep, nil
}

// periodStatus is t's newest period (nil when t does not reset or has
// started none).
func periodStatus(t segment.Tag) *PeriodStatus {
	if t.Reset == nil || len(t.Periods) == 0 {
		return nil
	}
	rule, err := t.Reset.Compile()
	if err != nil {
		return nil
	}
	key := t.LatestPeriod()
	base := t.Periods[key]
	return &PeriodStatus{Key: key, Date: rule.Date(key), Base: base, HandedOut: t.MaxID - base,
		Next: string(rule.AppendID(nil, key, t.MaxID-base+t.Start))}
}

// tally accounts for the IDs of [start, max_id): in returned ranges, in
// the live nodes' published ranges and not returned, and neither. Every ID
// is counted once, so the three add up to HandedOut whatever the records
// say (a holder record still listing a range its node returned, two
// records listing one range, a range outside [start, max_id)).
func tally(name string, t segment.Tag, ret []segment.Range, holders map[string][]segment.Range) SegmentStatus {
	r := SegmentStatus{Tag: tagJSON{Name: name, Tag: t}, Returned: ret, Holders: holders, HandedOut: t.MaxID - t.Start}
	if r.Returned == nil {
		r.Returned = []segment.Range{}
	}
	all := segment.Range{Lo: t.Start, Hi: t.MaxID}
	returned := union(all, ret)
	listed := slices.Clone(ret)
	for _, rs := range holders {
		listed = append(listed, rs...)
	}
	r.ReturnedIDs = size(returned)
	r.HeldIDs = size(union(all, listed)) - r.ReturnedIDs
	r.OutsideIDs = size(union(segment.Range{Lo: math.MinInt64, Hi: math.MaxInt64}, listed)) - r.ReturnedIDs - r.HeldIDs
	r.IssuedOrLost = r.HandedOut - r.ReturnedIDs - r.HeldIDs
	r.IssuedOrLostAtMost = r.IssuedOrLost + r.HeldIDs
	return r
}

// union returns the ranges' union within bound, as sorted disjoint ranges.
func union(bound segment.Range, rs []segment.Range) []segment.Range {
	var in []segment.Range
	for _, x := range rs {
		x.Lo, x.Hi = max(x.Lo, bound.Lo), min(x.Hi, bound.Hi)
		if x.Lo < x.Hi {
			in = append(in, x)
		}
	}
	slices.SortFunc(in, func(a, b segment.Range) int { return cmp.Compare(a.Lo, b.Lo) })
	var out []segment.Range
	for _, x := range in {
		if n := len(out); n > 0 && x.Lo <= out[n-1].Hi {
			out[n-1].Hi = max(out[n-1].Hi, x.Hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

// size is how many IDs disjoint ranges hold.
func size(rs []segment.Range) int64 {
	var n int64
	for _, x := range rs {
		n += x.Len()
	}
	return n
}

func writeSegmentStatus(w io.Writer, r SegmentStatus) {
	t := r.Tag
	fmt.Fprintf(w, "tag %q: start %d, max_id %d, step %d (max %d)", t.Name, t.Start, t.MaxID, t.Step, t.MaxStep)
	if t.Description != "" {
		fmt.Fprintf(w, ", %q", t.Description)
	}
	if t.RequireToken {
		fmt.Fprint(w, ", requires a token")
	}
	if t.MaxCount > 0 {
		fmt.Fprintf(w, ", at most %d IDs per request", t.MaxCount)
	}
	if rs := t.Reset; rs != nil {
		fmt.Fprintf(w, ", resets %s (zone %s), prints %q", rs.Every, dash(rs.Zone), rs.Format)
	}
	if p := r.Period; p != nil {
		fmt.Fprintf(w, "\nperiod %s (%s): started at counter %d, %d numbers handed to nodes since; the next no node holds prints %s", p.Key, p.Date, p.Base, p.HandedOut, p.Next)
	}
	fmt.Fprintf(w, "\nhanded out %d = returned %d + in live nodes' ranges %d + issued or lost %d\n", r.HandedOut, r.ReturnedIDs, r.HeldIDs, r.IssuedOrLost)
	if r.HeldIDs > 0 {
		fmt.Fprintf(w, "issued or lost, with what the live nodes issued from their ranges since loading them: %d to %d (= %d + 0 to %d: nodes publish a range as loaded, not as they issue from it; each node's /metrics has snowflaked_segment_issued_total)\n",
			r.IssuedOrLost, r.IssuedOrLostAtMost, r.IssuedOrLost, r.HeldIDs)
	}
	if r.OutsideIDs > 0 {
		fmt.Fprintf(w, "outside [start, max_id): %d IDs of returned or live nodes' ranges, counted above in none: max_id went back? (docs/segments.md, R6)\n", r.OutsideIDs)
	}
	fmt.Fprintf(w, "returned ranges (%d):", len(r.Returned))
	for i, x := range r.Returned {
		if i == 20 {
			fmt.Fprintf(w, " … %d more", len(r.Returned)-20)
			break
		}
		fmt.Fprintf(w, " %v", x)
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(r.Holders))
	for n := range r.Holders {
		names = append(names, n)
	}
	slices.Sort(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOLDS")
	for _, n := range names {
		var parts []string
		for _, x := range r.Holders[n] {
			parts = append(parts, x.String())
		}
		fmt.Fprintf(tw, "%s\t%s\n", n, strings.Join(parts, " "))
	}
	tw.Flush()
}

// segmentDecode prints the counter position of an opaque tag's number (for
// operators; it reads the tag's key).
func segmentDecode(ctx context.Context, st *segment.ZKStore, name, raw string, stdout, stderr io.Writer) int {
	t, err := st.Tag(ctx, name)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl segment decode: %v\n", err)
		return exitFailure
	}
	if t.Opaque == nil {
		fmt.Fprintf(stderr, "snowflakectl segment decode: tag %q is not opaque: its IDs are its counter\n", name)
		return exitUsage
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl segment decode: %q is not a decimal number\n", raw)
		return exitUsage
	}
	key, err := st.Key(ctx, name, t.Incarnation)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl segment decode: %v\n", err)
		return exitFailure
	}
	p, err := segment.NewPermutation(*t.Opaque, key)
	if err == nil {
		var i int64
		if i, err = p.Index(id); err == nil {
			issued := "handed out to a node (issued, or lost)"
			if t.Start+i >= t.MaxID {
				issued = "not handed out yet"
			}
			fmt.Fprintf(stdout, "tag %q: %d is number %d of the tag (counter %d): %s\n", name, id, i+1, t.Start+i, issued)
			return exitOK
		}
	}
	fmt.Fprintf(stderr, "snowflakectl segment decode: %v\n", err)
	return exitUsage
}

// segmentDelete is "segment delete": it names the live nodes that hold
// ranges of the tag, then removes the tag's subtree (deleteTag).
func segmentDelete(ctx context.Context, st *segment.ZKStore, name string, stdout, stderr io.Writer) int {
	holders, err := st.Holders(ctx, name)
	if err != nil {
		if _, terr := st.Tag(ctx, name); errors.Is(terr, segment.ErrUnknownTag) {
			err = terr
		}
		fmt.Fprintf(stderr, "snowflakectl segment delete: %v\n", err)
		return exitFailure
	}
	if err := deleteTag(ctx, st, name); err != nil {
		fmt.Fprintf(stderr, "snowflakectl segment delete: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "deleted tag %q with its returned ranges and key; its tombstone keeps its max_id, which a tag created again under the name starts at (snowflakectl cluster list shows it)\n", name)
	if len(holders) > 0 {
		names := make([]string, 0, len(holders))
		for n := range holders {
			names = append(names, n)
		}
		slices.Sort(names)
		fmt.Fprintf(stderr, "snowflakectl segment delete: %d live node(s) held ranges of it: %s. Each drops them when ZooKeeper tells it (its log says so) and never returns them; one cut off from ZooKeeper serves from them until it is back, all below the tombstone's max_id, so a tag created again without --reuse-numbers repeats none of them\n",
			len(names), strings.Join(names, ", "))
	}
	return exitOK
}

// deleteTag removes a tag: its record, returned ranges, holder records and
// key. First the cluster is made to require tag incarnations, so that no
// node of a release that keys ranges by tag name alone can join it and
// mix the deleted tag's ranges into a successor. Nodes of this release drop
// the ranges they hold of it when ZooKeeper tells them (its incarnation is
// gone).
func deleteTag(ctx context.Context, st *segment.ZKStore, name string) error {
	z, cluster := st.Cluster()
	if err := coordinator.RequireFeature(ctx, z, cluster, coordinator.FeatureTagIncarnation); err != nil {
		return fmt.Errorf("delete tag %q: %w", name, err)
	}
	return st.Delete(ctx, name)
}
