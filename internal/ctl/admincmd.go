package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// adminFlags are the flags every cluster, node and segment subcommand has.
type adminFlags struct {
	zk, auth *string
	timeout  *time.Duration
	tls      zkTLSFlags
}

func addAdminFlags(fs *flag.FlagSet, authHelp string) adminFlags {
	return adminFlags{
		zk:      fs.String("zk", "", "ZooKeeper servers host1:2181,host2:2181 (required)"),
		auth:    fs.String("zk-auth", "", authHelp),
		timeout: fs.Duration("timeout", 10*time.Second, "bound on connecting to and using ZooKeeper"),
		tls:     addZKTLSFlags(fs),
	}
}

// check reports a missing --zk, a bad --timeout or --zk-tls-* files that
// do not load (exit 2), prefixing cmd.
func (a adminFlags) check(cmd string, stderr io.Writer) bool {
	if _, err := a.tls.config(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return false
	}
	switch {
	case strings.TrimSpace(*a.zk) == "":
		fmt.Fprintf(stderr, "%s: --zk is required (e.g. --zk 127.0.0.1:2181)\n", cmd)
		return false
	case *a.timeout <= 0:
		fmt.Fprintf(stderr, "%s: --timeout %s must be positive\n", cmd, *a.timeout)
		return false
	}
	return true
}

// adminExit is the exit status of a coordinator error: 2 for what the
// operator asked that cannot be (bad values, settings that differ, a
// cluster or node key that does not exist, a lease held), 1 otherwise.
func adminExit(err error) int {
	for _, e := range []error{coordinator.ErrInvalidConfig, coordinator.ErrClusterMismatch, coordinator.ErrNoCluster,
		coordinator.ErrLeaseHeld, coordinator.ErrUnknownNodeKey, coordinator.ErrOpenACL} {
		if errors.Is(err, e) {
			return exitUsage
		}
	}
	return exitFailure
}

// adminCmd is one run of a cluster, node or segment subcommand, and what
// they share: the flag set with the admin flags (--zk, --zk-auth,
// --timeout, --zk-tls-*), the parse and the checks of the command line
// (exit 2), one context bounded by --timeout for the whole command, and
// what it opens on ZooKeeper (a coordinator.Admin or a segment store),
// with the exit status of a failure.
type adminCmd struct {
	cmd            string // "snowflakectl cluster create": the prefix of its errors
	fs             *flag.FlagSet
	admin          adminFlags
	pos            []string        // the positional arguments, once parsed
	given          map[string]bool // the flags given on the command line, once parsed
	stdout, stderr io.Writer
}

// newAdminCmd returns the run of subcommand name ("cluster create"), its
// flag set's --help printing usageLine, with the admin flags (authHelp
// the help of --zk-auth); the subcommand registers its own into fs.
func newAdminCmd(name, usageLine, authHelp string, stdout, stderr io.Writer) *adminCmd {
	fs := newFlagSet(name, usageLine, stderr)
	return &adminCmd{cmd: "snowflakectl " + name, fs: fs, admin: addAdminFlags(fs, authHelp), stdout: stdout, stderr: stderr}
}

// parse parses args (flags and positional arguments in any order), has
// wantPos (nil: any) check the positional arguments, saying why not, then
// checks the admin flags. ok false: the command ends with code.
func (c *adminCmd) parse(args []string, wantPos func(pos []string) bool) (code int, ok bool) {
	pos, code, ok := parse(c.fs, args, true, c.stdout, c.stderr)
	if !ok {
		return code, false
	}
	c.pos = pos
	c.given = map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { c.given[f.Name] = true })
	if wantPos != nil && !wantPos(pos) || !c.admin.check(c.cmd, c.stderr) {
		return exitUsage, false
	}
	return exitOK, true
}

// wantArgs is a check for parse: n positional arguments, or an error
// naming usage.
func (c *adminCmd) wantArgs(n int, usage string) func(pos []string) bool {
	return func(pos []string) bool {
		if len(pos) == n {
			return true
		}
		fmt.Fprintf(c.stderr, "%s: want %d argument(s), got %q: %s\n", c.cmd, n, pos, usage)
		return false
	}
}

// failed reports err after the command's name and returns its exit status
// (adminExit).
func (c *adminCmd) failed(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
	return adminExit(err)
}

// withAdmin runs do with the command's context and a coordinator.Admin of
// the admin flags, which holds one ZooKeeper session for the command and
// is closed after do.
func (c *adminCmd) withAdmin(do func(ctx context.Context, adm *coordinator.Admin) int) int {
	opts, _ := c.admin.tls.adminOptions() // parse's check loaded them
	adm, err := coordinator.NewAdmin(splitList(*c.admin.zk), *c.admin.auth, *c.admin.timeout, opts...)
	if err != nil {
		return c.failed(err)
	}
	defer adm.Close()
	ctx, cancel := clock.WithTimeout(context.Background(), *c.admin.timeout)
	defer cancel()
	return do(ctx, adm)
}

// withStore runs do with the command's context and the segment store of
// cluster, closed after do; before (nil: nothing) runs first, with the
// admin flags' dialer, and a status other than exitOK ends the command
// with it. A store that does not open is exit status 2 for bad settings,
// 1 otherwise.
func (c *adminCmd) withStore(cluster string, before func(ctx context.Context, dial zkconn.Dialer) int, do func(ctx context.Context, st *segment.ZKStore) int) int {
	ctx, cancel := clock.WithTimeout(context.Background(), *c.admin.timeout)
	defer cancel()
	dial, _ := c.admin.tls.dialer() // parse's check loaded the files
	if before != nil {
		if code := before(ctx, dial); code != exitOK {
			return code
		}
	}
	st, err := segment.OpenZK(ctx, segment.ZKConfig{Servers: splitList(*c.admin.zk), Cluster: cluster, Auth: *c.admin.auth, Timeout: *c.admin.timeout, Dial: dial})
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
		if errors.Is(err, coordinator.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFailure
	}
	defer st.Close()
	return do(ctx, st)
}
