package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// No start of either binary, not even --help, prints a stray
// line (VictoriaMetrics/metrics used to print "INFO: metrics: disable
// exposing PSI metrics ..." from its initializer). The startuplog package
// holds the standard logger's output back from init until main routes it
// into the JSON log; that needs it initialised before the library, which
// GODEBUG=inittrace=1 shows.
func TestIntegration_NoStrayLinesAtStart(t *testing.T) {
	run := func(bin string, env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.CombinedOutput() // --help exits 0, a bad flag 2: the output is what counts
		return string(out)
	}
	for _, tc := range []struct {
		bin  string
		args []string
	}{
		{binSnowflaked, []string{"--help"}},
		{binSnowflaked, []string{"--version"}},
		{binCtl, []string{"--help"}},
		{binCtl, []string{"decode", "1"}},
	} {
		if out := run(tc.bin, nil, tc.args...); strings.Contains(out, "metrics:") || strings.Contains(out, "INFO:") {
			t.Errorf("%s %v printed a stray line:\n%s", tc.bin, tc.args, out)
		}
	}

	trace := run(binSnowflaked, []string{"GODEBUG=inittrace=1"}, "--version")
	held := strings.Index(trace, "init codeberg.org/snowflaked/snowflaked/internal/startuplog ")
	lib := strings.Index(trace, "init github.com/VictoriaMetrics/metrics ")
	if held < 0 || lib < 0 || held > lib {
		t.Fatalf("init order: startuplog at %d, VictoriaMetrics/metrics at %d (want startuplog first):\n%s", held, lib, trace)
	}

	// A normal start: every line on stderr is JSON.
	p := startNode(t, binSnowflaked, nodeArgs(t.TempDir(), 4))
	p.waitReadyz(http.StatusOK, readyTimeout)
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, line := range strings.Split(strings.TrimSpace(p.Output()), "\n") {
		if !strings.HasPrefix(line, "{") {
			t.Errorf("a line that is not JSON: %q", line)
		}
	}
}
