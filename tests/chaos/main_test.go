//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"codeberg.org/snowflaked/snowflaked/tests/proc"
)

// LongEnv names the environment variable that selects the long run (make
// chaos): minutes in all instead of seconds per scenario.
const LongEnv = "CHAOS_LONG"

// binChaos is the snowflaked binary built with -tags chaos (and -race when
// the tests run with it).
var binChaos string

func TestMain(m *testing.M) { os.Exit(buildAndRun(m)) }

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "snowflaked-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binChaos, err = proc.Build(dir, "snowflaked-chaos", "codeberg.org/snowflaked/snowflaked/cmd/snowflaked", "-tags", "chaos"); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: build:", err)
		return 1
	}
	return m.Run()
}

// longRun reports whether CHAOS_LONG asks for the long run.
func longRun(t *testing.T) bool {
	t.Helper()
	raw := os.Getenv(LongEnv)
	if raw == "" {
		return false
	}
	v, err := strconv.ParseBool(raw)
	if err != nil {
		t.Fatalf("%s=%q: want a boolean (1, true, 0, false)", LongEnv, raw)
	}
	return v
}
