package ctl

import (
	"bytes"
	"flag"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// singleDash matches a flag written with one dash at the start of a help
// line ("  -zk string"), as flag.FlagSet.PrintDefaults writes it.
var singleDash = regexp.MustCompile(`(?m)^\s+-[a-z]`)

// Every registered flag of every command and subcommand is in its --help,
// written with two dashes as the docs write it (--zk-tls-ca, --timeout
// included), and no flag is written with one.
func TestHelpListsEveryFlagWithTwoDashes(t *testing.T) {
	var calls [][]string
	for _, c := range commands {
		switch c.Name {
		case "segment":
			for _, sub := range slices.Sorted(maps.Keys(segmentSubs)) {
				calls = append(calls, []string{c.Name, sub})
			}
		case "cluster":
			for _, sub := range slices.Sorted(maps.Keys(clusterUsages)) {
				calls = append(calls, []string{c.Name, sub})
			}
		case "node":
			calls = append(calls, []string{c.Name, "retire"})
		default:
			calls = append(calls, []string{c.Name})
		}
	}
	var shown *flag.FlagSet
	helpShown = func(fs *flag.FlagSet) { shown = fs }
	t.Cleanup(func() { helpShown = nil })
	for _, call := range calls {
		name := strings.Join(call, " ")
		t.Run(name, func(t *testing.T) {
			shown = nil
			var stdout, stderr bytes.Buffer
			if code := Main(append(slices.Clone(call), "--help"), &stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			help := stdout.String()
			if m := singleDash.FindString(help); m != "" {
				t.Errorf("a flag with one dash (%q) in:\n%s", m, help)
			}
			if shown == nil {
				return // a command of its own making (no flag set of newFlagSet)
			}
			n := 0
			shown.VisitAll(func(f *flag.Flag) {
				n++
				if !regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(f.Name) + `( |$)`).MatchString(help) {
					t.Errorf("--%s is not in the help:\n%s", f.Name, help)
				}
			})
			if n == 0 {
				t.Errorf("no flags registered")
			}
			for _, want := range []string{"--zk-tls-ca", "--timeout"} {
				if shown.Lookup(strings.TrimPrefix(want, "--")) != nil && !strings.Contains(firstLine(help), want) {
					t.Errorf("the usage line lacks %s: %s", want, firstLine(help))
				}
			}
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
