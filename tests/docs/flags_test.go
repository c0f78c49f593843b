package docs

import (
	"flag"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/envflag"
	"codeberg.org/snowflaked/snowflaked/node"
	"codeberg.org/snowflaked/snowflaked/server"
)

// envPrefix is the prefix of snowflaked's environment variables
// (cmd/snowflaked passes it to envflag.Apply).
const envPrefix = "SNOWFLAKED_"

// registeredFlags returns the flags node.Config.RegisterFlags registers, by
// name.
func registeredFlags(t *testing.T) map[string]*flag.Flag {
	t.Helper()
	fs := flag.NewFlagSet("snowflaked", flag.ContinueOnError)
	var c node.Config
	c.RegisterFlags(fs)
	out := map[string]*flag.Flag{}
	fs.VisitAll(func(f *flag.Flag) { out[f.Name] = f })
	if len(out) < 10 {
		t.Fatalf("RegisterFlags registered only %d flags", len(out))
	}
	return out
}

// flagTable returns the rows of docs/operations.md's flag table by flag name (the
// first cell is the code span `--name`).
func flagTable(t *testing.T) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	for _, cells := range tableRows(section(t, doc(t, docOperations), secFlags)) {
		spans := codeSpans(cells[0])
		if len(spans) != 1 || !strings.HasPrefix(spans[0], "--") {
			continue // the header
		}
		name := strings.TrimPrefix(spans[0], "--")
		if _, dup := rows[name]; dup {
			t.Errorf("flag table lists --%s twice", name)
		}
		rows[name] = cells
	}
	return rows
}

// checkDefault says what is wrong with a flag table's default cell for f ("" when
// it is right). An empty default must read "empty …"; any other must be
// the cell's first code span: the flag's default as -help prints it, or for
// a duration the same length written shorter (`10m` for 10m0s).
func checkDefault(f *flag.Flag, cell string) string {
	if f.DefValue == "" {
		if !strings.HasPrefix(cell, "empty") {
			return "the default is empty: the cell must start with \"empty\", got " + strings.TrimSpace(cell)
		}
		return ""
	}
	spans := codeSpans(cell)
	if len(spans) == 0 {
		return "no `value` in the default cell " + cell + ", want `" + f.DefValue + "`"
	}
	got := spans[0]
	if got == f.DefValue {
		return ""
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if want, isDur := g.Get().(time.Duration); isDur {
			if d, err := time.ParseDuration(got); err == nil && d == want {
				return ""
			}
		}
	}
	return "table default `" + got + "`, the flag's default is " + f.DefValue
}

// TestDocsFlagTable checks that every flag of node.Config.RegisterFlags has
// a row in docs/operations.md with its environment variable and default, and that
// the table lists no other flag.
func TestDocsFlagTable(t *testing.T) {
	flags := registeredFlags(t)
	rows := flagTable(t)
	names := make([]string, 0, len(flags))
	for name := range flags {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := flags[name]
		cells, ok := rows[name]
		if !ok {
			t.Errorf("flag table has no row for --%s (default %q: %s)", name, f.DefValue, f.Usage)
			continue
		}
		if len(cells) != 4 {
			t.Errorf("flag table row of --%s has %d cells, want 4 (flag | environment | default | meaning)", name, len(cells))
			continue
		}
		if want := "`" + envflag.VarName(envPrefix, name) + "`"; cells[1] != want {
			t.Errorf("flag table row of --%s: environment %s, want %s", name, cells[1], want)
		}
		if msg := checkDefault(f, cells[2]); msg != "" {
			t.Errorf("flag table row of --%s: %s", name, msg)
		}
		if cells[3] == "" {
			t.Errorf("flag table row of --%s: no meaning", name)
		}
	}
	for name := range rows {
		if _, ok := flags[name]; !ok {
			t.Errorf("flag table lists --%s, which node.Config.RegisterFlags does not register", name)
		}
	}
}

func TestCheckDefault(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Duration("d", 10*time.Minute, "")
	fs.String("s", "x", "")
	fs.String("e", "", "")
	fs.Int("i", -1, "")
	tests := []struct {
		flag, cell string
		ok         bool
	}{
		{"d", "`10m0s`", true},
		{"d", "`10m`", true},
		{"d", "`600s`", true},
		{"d", "`1m`", false},
		{"d", "10m", false},
		{"s", "`x`", true},
		{"s", "`y` or `x`", false},
		{"e", "empty (standalone mode)", true},
		{"e", "`\"\"`", false},
		{"i", "`-1` (unset)", true},
		{"i", "`1`", false},
	}
	for _, tt := range tests {
		msg := checkDefault(fs.Lookup(tt.flag), tt.cell)
		if (msg == "") != tt.ok {
			t.Errorf("checkDefault(--%s, %q) = %q, want ok=%v", tt.flag, tt.cell, msg, tt.ok)
		}
	}
}

// thousands writes n with a comma between groups of three digits, as the
// docs write numbers (1,000,000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestDocsMaxBatchRange checks that the range the flag table gives
// --max-batch is the one limit the node and its server enforce.
func TestDocsMaxBatchRange(t *testing.T) {
	cells, ok := flagTable(t)["max-batch"]
	if !ok || len(cells) != 4 {
		t.Fatalf("flag table row of --max-batch: %q", cells)
	}
	if want := "(1–" + thousands(server.MaxBatchLimit) + ")"; !strings.Contains(cells[3], want) {
		t.Errorf("flag table row of --max-batch: %q, want the range %s of server.MaxBatchLimit", cells[3], want)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1_000_000: "1,000,000", 1 << 20: "1,048,576"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
