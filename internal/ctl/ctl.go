// Package ctl is snowflakectl, the operator's command-line tool: one
// function per subcommand, dispatched by Main.
package ctl

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Exit statuses of snowflakectl.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command could not do its job (e.g. ZooKeeper unreachable)
	ExitUsage   = 2 // bad command line or bad input
)

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string // one line for the usage text
	// Run executes the command with the arguments after its name.
	Run func(args []string, stdout, stderr io.Writer) int
}

// Commands lists the subcommands; add new ones here.
var Commands = []Command{
	{Name: "decode", Summary: "decode <id>... [--layout 41/10/12 --epoch … --time-unit 1ms | --leaf] [--json]: split IDs into time, worker and sequence", Run: Decode},
	{Name: "status", Summary: "status --zk host:2181,… [--cluster default] [--zk-auth user:pass] [--json]: the cluster's workers from ZooKeeper", Run: Status},
	{Name: "probe", Summary: "probe <url> [--timeout 2s]: GET url; exit 0 on 2xx, else 1 with status and body on stderr (health checks)", Run: Probe},
	{Name: "get", Summary: "get [--count N] (--servers host:port,… | --zk host:2181,… [--cluster default]): IDs through the Go client, one a line", Run: Get},
	{Name: "segment", Summary: segmentUsage + ": dense-ID tags", Run: Segment},
	{Name: "bench", Summary: "bench (--servers … | --zk …) [--duration 10s] [--concurrency 64] [--count 1]: load loopback nodes through the client; IDs/s, latency, failovers", Run: Bench},
}

// Main runs snowflakectl with args (without the program name) and returns
// the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return ExitOK
	}
	for _, c := range Commands {
		if c.Name == args[0] {
			return c.Run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "snowflakectl: unknown command %q\n", args[0])
	usage(stderr)
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: snowflakectl <command> [arguments]\n\nCommands:")
	for _, c := range Commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.Name, c.Summary)
	}
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments (decode 123 --json), and returns the positional ones.
// A negative number is positional (so decode -5 reports a negative ID), and
// "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case a == "-" || !strings.HasPrefix(a, "-") || isNegativeNumber(a):
			pos = append(pos, a)
		default:
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

func isNegativeNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && strings.HasPrefix(s, "-")
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
