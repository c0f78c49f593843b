// Package cliflag parses the command lines of snowflaked and snowflakectl
// so that a mistake is met with help: the error comes first, in one line,
// with a suggestion for a mistyped flag ("did you mean --worker-id?") and a
// pointer to --help instead of every flag's description; --help prints the
// full usage on stdout and exits 0.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Exit statuses Report returns.
const (
	exitOK    = 0 // --help
	exitUsage = 2 // a bad command line
)

// Parse parses args into fs without printing anything (Report does). With
// interspersed, flags may come before, between or after the positional
// arguments (decode 123 --json); a negative number is positional and "--"
// ends the flags. It returns the positional arguments.
//
// A value a flag rejects does not stop the parse: every such problem is
// reported, joined, each saying what the flag wants (--fence-ahead "3": want
// a duration like 3s).
func Parse(fs *flag.FlagSet, args []string, interspersed bool) ([]string, error) {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	var bad []error
	var wrapped []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		f.Value = &collecting{Value: f.Value, f: f, bad: &bad}
		wrapped = append(wrapped, f)
	})
	defer func() {
		for _, f := range wrapped {
			f.Value = f.Value.(*collecting).Value
		}
	}()
	if !interspersed {
		err := fs.Parse(args)
		return fs.Args(), errors.Join(append(bad, err)...)
	}
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
			if f := fs.Lookup(name); f != nil && !isBool(f) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	if err := fs.Parse(flags); err != nil || len(bad) > 0 {
		return nil, errors.Join(append(bad, err)...)
	}
	return pos, nil
}

// collecting wraps a flag's value while Parse runs: a value the flag
// rejects is recorded, with what the flag wants, and the parse goes on.
type collecting struct {
	flag.Value
	f   *flag.Flag
	bad *[]error
}

func (c *collecting) Set(s string) error {
	if err := c.Value.Set(s); err != nil {
		*c.bad = append(*c.bad, fmt.Errorf("--%s %q: %s", c.f.Name, s, Want(c.Value, err)))
	}
	return nil
}

// IsBoolFlag keeps a boolean flag one that takes no value.
func (c *collecting) IsBoolFlag() bool { return isBool(&flag.Flag{Value: c.Value}) }

// Want says what a flag's value v accepts, given the error its Set returned for a
// value: "want a duration like 3s", "want an integer", ... where the flag
// package would only say "parse error"; a flag's own error (a custom
// value's) is returned as it is.
func Want(v flag.Value, err error) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return err.Error()
	}
	what := ""
	switch g.Get().(type) {
	case time.Duration:
		what = "a duration like 3s"
	case int, int64:
		what = "an integer"
	case uint, uint64:
		what = "an integer, 0 or more"
	case float64:
		what = "a number"
	case bool:
		what = "true or false"
	default:
		return err.Error()
	}
	if strings.Contains(err.Error(), "out of range") {
		return "out of range: want " + what + " that fits"
	}
	return "want " + what
}

// Report answers an error of Parse. For -h or --help it prints fs.Usage on
// stdout and returns exitOK. Otherwise it prints to stderr, prefixed with
// fs.Name(), the error (an unknown flag with the nearest defined one) and
// how to see every flag, and returns exitUsage.
func Report(stdout, stderr io.Writer, fs *flag.FlagSet, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		out := fs.Output()
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return exitOK
	}
	for _, p := range Explain(fs, err) {
		fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), p)
	}
	fmt.Fprintf(stderr, "Run '%s --help' for every flag.\n", fs.Name())
	return exitUsage
}

// Explain returns the problems of an error of Parse, one a line, reworded:
// flags are written with two dashes, and an unknown one is followed by the
// nearest defined flag.
func Explain(fs *flag.FlagSet, err error) []string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		out = append(out, explain(fs, line))
	}
	return out
}

// explain rewords one problem of Parse.
func explain(fs *flag.FlagSet, msg string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		msg = "unknown flag --" + name
		if s := suggest(fs, name); s != "" {
			msg += "; did you mean --" + s + "?"
		}
		return msg
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag --" + name + " needs a value"
	}
	return strings.Replace(msg, "for flag -", "for flag --", 1)
}

// suggest returns the defined flag nearest to name, or "" when none is
// near: the same name but for case, dashes and underscores (workerid,
// worker_id), or one at most a third of its length of edits away.
func suggest(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return Nearest(name, names)
}

// Nearest returns the one of names nearest to name, by the rule flags are
// suggested by (the same but for case, dashes and underscores, or at most a
// third of its length of edits away), or "" when none is near: for a
// "did you mean" after a mistyped command.
func Nearest(name string, names []string) string {
	want := normalize(name)
	best, bestDist := "", -1
	for _, n := range names {
		if normalize(n) == want {
			return n
		}
		d := distance(strings.ToLower(name), n)
		if d <= max(1, len(n)/3) && (bestDist < 0 || d < bestDist) {
			best, bestDist = n, d
		}
	}
	return best
}

func normalize(s string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s))
}

// distance is the Levenshtein distance between a and b (bytes).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func isNegativeNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && strings.HasPrefix(s, "-")
}

// isBool reports whether f is a boolean flag (one that takes no value).
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// PrintDefaults writes fs's flags to w as flag.FlagSet.PrintDefaults does,
// but with two dashes (--name), as the docs and the error messages write
// them: one flag a line with its value's kind, then its help indented,
// with the default when it is not the zero value.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(&b, "  --%s", f.Name)
		kind, usage := flag.UnquoteUsage(f)
		if kind != "" {
			b.WriteString(" " + kind)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !zeroDefault(f) {
			if _, ok := flagGetter(f).(string); ok {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %s)", f.DefValue)
			}
		}
		b.WriteString("\n")
	})
	_, _ = io.WriteString(w, b.String())
}

// flagGetter returns a flag's current value when it has one to give
// (flag.Getter), else nil.
func flagGetter(f *flag.Flag) any {
	if g, ok := f.Value.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}

// zeroDefault reports whether a flag's default is its type's zero value,
// which PrintDefaults leaves unsaid.
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}
