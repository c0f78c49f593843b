// Package ctl is snowflakectl, the operator's command-line tool: one
// function per subcommand, dispatched by Main.
package ctl

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"codeberg.org/snowflaked/snowflaked/internal/cliflag"
)

// Exit statuses of snowflakectl.
const (
	exitOK      = 0
	exitFailure = 1 // the command could not do its job (e.g. ZooKeeper unreachable)
	exitUsage   = 2 // bad command line or bad input
)

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string // one line for the usage text
	// Run executes the command with the arguments after its name.
	Run func(args []string, stdout, stderr io.Writer) int
}

// usages are the commands' usage lines (what follows "snowflakectl ").
var usages = map[string]string{
	"decode":  "decode <id|uuid>... [--layout 41/10/12 --epoch … --time-unit 1ms --gene-bits 0 | --leaf] [--json]",
	"status":  "status --zk host:2181,… [--cluster default] [--zk-auth user:pass] [--timeout 10s] [--probe-timeout 1s] [--report-interval 3s] [--json] [--tls-ca F [--tls-cert F --tls-key F]] " + zkTLSUsage,
	"probe":   "probe <url> [--timeout 2s] [--wait 0s] [--quiet] [--tls-ca F] [--tls-cert F --tls-key F]",
	"bounds":  "bounds --from T --to T [--node http://127.0.0.1:8080] [--json] [--timeout 2s] [--tls-ca F [--tls-cert F --tls-key F]]",
	"get":     "get [--count N] [--gene G | --uuid] (--servers host:port,… | --bootstrap host:port,… | --zk host:2181,… [--cluster default] [--zk-auth user:pass] " + zkTLSUsage + ") [--timeout 10s] [--token T | --token-file F] [--tls-ca F [--tls-cert F --tls-key F]]",
	"segment": segmentUsage,
	"cluster": clusterUsage,
	"node":    nodeUsage,
	"cert":    certUsage,
	"bench":   "bench (--servers … | --bootstrap … | --zk … [--cluster default] [--zk-auth user:pass] " + zkTLSUsage + ") [--duration 10s] [--concurrency 64] [--count 1] [--timeout 10s] [--token T | --token-file F] [--tls-ca F [--tls-cert F --tls-key F]]",
}

// zkTLSUsage is the part of a usage line for ZooKeeper over TLS, which
// every command that takes --zk has.
const zkTLSUsage = "[--zk-tls-ca F [--zk-tls-cert F --zk-tls-key F]]"

// commands lists the subcommands; add new ones here (and their usage line
// to usages).
var commands = []Command{
	{Name: "decode", Summary: usages["decode"] + ": split IDs into time, worker and sequence", Run: decode},
	{Name: "status", Summary: usages["status"] + ": the cluster's workers from ZooKeeper", Run: status},
	{Name: "probe", Summary: usages["probe"] + ": GET url; exit 0 on 2xx, else 1 with status and body on stderr (health checks)", Run: probe},
	{Name: "bounds", Summary: usages["bounds"] + ": the smallest and largest ID and UUID of a time range [T, T), from a node", Run: bounds},
	{Name: "get", Summary: usages["get"] + ": IDs through the Go client, one a line", Run: get},
	{Name: "segment", Summary: segmentUsage + ": dense-ID tags", Run: Segment},
	{Name: "cluster", Summary: clusterUsage + ": create, change, list and delete clusters", Run: cluster},
	{Name: "node", Summary: nodeUsage + ": let a dead node's worker ID be reused before recycle-after, after its fence", Run: node},
	{Name: "bench", Summary: usages["bench"] + ": load loopback nodes through the client; IDs/s, latency, failovers", Run: bench},
	{Name: "cert", Summary: certUsage + ": make a CA and the certificates of nodes, clients and ZooKeeper (TLS)", Run: cert},
}

// Version is what --version prints; cmd/snowflakectl sets it from its
// build-time version.
var Version = "dev"

// Main runs snowflakectl with args (without the program name) and returns
// the exit status. Flags written before the command (snowflakectl --zk X
// status) are read as the command's.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprintf(stdout, "snowflakectl %s (%s)\n", Version, runtime.Version())
		return exitOK
	}
	args, err := commandFirst(args)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl: %v\nRun 'snowflakectl --help' for the commands.\n", err)
		return exitUsage
	}
	for _, c := range commands {
		if c.Name == args[0] {
			return c.Run(args[1:], stdout, stderr)
		}
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.Name
	}
	if near := cliflag.Nearest(args[0], names); near != "" {
		fmt.Fprintf(stderr, "snowflakectl: unknown command %q; did you mean %q?\n", args[0], near)
	} else {
		fmt.Fprintf(stderr, "snowflakectl: unknown command %q\n", args[0])
	}
	usage(stderr)
	return exitUsage
}

// boolFlags are the flags of any command that take no value: before the
// command, every other flag written without "=" takes the next argument as
// its value.
var boolFlags = map[string]bool{"json": true, "leaf": true, "quiet": true, "uuid": true, "yes": true}

// commandFirst moves flags written before the command name after it (after
// the subcommand of segment): "--zk X status" becomes "status --zk X". A
// flag's value is never taken for the command ("--cluster get status" is
// status for the cluster named get).
func commandFirst(args []string) ([]string, error) {
	if !strings.HasPrefix(args[0], "-") {
		return args, nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && !boolFlags[name] {
				i++ // its value
			}
			continue
		}
		if _, ok := usages[a]; !ok {
			return nil, fmt.Errorf("%q is not a command (flags come with a command: snowflakectl <command> [flags])", a)
		}
		out := []string{a}
		rest := args[i+1:]
		if (a == "segment" || a == "cluster" || a == "node" || a == "cert") && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			out, rest = append(out, rest[0]), rest[1:]
		}
		out = append(out, args[:i]...)
		return append(out, rest...), nil
	}
	return nil, fmt.Errorf("flags %q come with a command: snowflakectl <command> [flags]", args)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: snowflakectl <command> [arguments]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nRun 'snowflakectl <command> --help' for a command's flags; 'snowflakectl --version' for the version.")
}

// newFlagSet returns the flag set of a command (name as in usages, or
// "segment create"), whose --help prints the command's usage line and its
// flags.
func newFlagSet(name, usageLine string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("snowflakectl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: snowflakectl %s\n\nFlags:\n", usageLine)
		cliflag.PrintDefaults(fs.Output(), fs)
		if helpShown != nil {
			helpShown(fs)
		}
	}
	return fs
}

// helpShown, when set (by tests), is called with the flag set whose help
// was just printed.
var helpShown func(fs *flag.FlagSet)

// envDefaults are the flags an operator can set once in the environment,
// under the names the node reads them by: a flag on the command line wins.
var envDefaults = []struct{ flag, env string }{
	{"zk", "SNOWFLAKED_ZK"},
	{"cluster", "SNOWFLAKED_CLUSTER"},
	{"zk-auth", "SNOWFLAKED_ZK_AUTH"},
	{"zk-session-timeout", "SNOWFLAKED_ZK_SESSION_TIMEOUT"},
	{"zk-tls-ca", "SNOWFLAKED_ZK_TLS_CA"},
	{"zk-tls-cert", "SNOWFLAKED_ZK_TLS_CERT"},
	{"zk-tls-key", "SNOWFLAKED_ZK_TLS_KEY"},
	{"tls-ca", "SNOWFLAKED_TLS_CA"},
	{"tls-cert", "SNOWFLAKED_TLS_CERT"},
	{"tls-key", "SNOWFLAKED_TLS_KEY"},
}

// parse parses a command's flags (interspersed with its positional
// arguments when interspersed) and returns them; on a bad command line or
// --help it returns ok false with the exit status.
func parse(fs *flag.FlagSet, args []string, interspersed bool, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	for _, e := range envDefaults {
		f := fs.Lookup(e.flag)
		v, set := os.LookupEnv(e.env)
		if f == nil || !set || v == "" {
			continue
		}
		if err := f.Value.Set(v); err != nil {
			fmt.Fprintf(stderr, "%s: %s=%q (for --%s): %s\n", fs.Name(), e.env, v, e.flag, cliflag.Want(f.Value, err))
			return nil, exitUsage, false
		}
	}
	pos, err := cliflag.Parse(fs, args, interspersed)
	if err != nil {
		return nil, cliflag.Report(stdout, stderr, fs, err), false
	}
	return pos, exitOK, true
}
