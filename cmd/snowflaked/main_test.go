package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/node"
)

func TestRunRefusesBadInput(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     []string
		code    int
		wantOut string // substring of stdout
		wantErr string // substring of what stderr's JSON lines say (jsonSaid)
	}{
		{"version", []string{"--version"}, nil, 0, "(go1.", ""},
		{"help", []string{"-help"}, nil, 0, "SNOWFLAKED_<FLAG>", ""},
		{"help with two dashes", []string{"--help"}, nil, 0, "--worker-id", ""},
		{"unknown flag", []string{"--no-such-flag"}, nil, 2, "", "unknown flag --no-such-flag"},
		{"typo'd flag", []string{"--workerid", "5"}, nil, 2, "", "unknown flag --workerid; did you mean --worker-id?"},
		{"near miss", []string{"--fence-ahaed", "3s"}, nil, 2, "", "did you mean --fence-ahead?"},
		{"flag without its value", []string{"--worker-id"}, nil, 2, "", "flag --worker-id needs a value"},
		{"bad duration", []string{"--fence-ahead", "soon"}, nil, 2, "", `--fence-ahead "soon": want a duration like 3s`},
		{"duration without a unit", []string{"--fence-ahead", "3"}, nil, 2, "", `--fence-ahead "3": want a duration like 3s`},
		{"worker id not an integer", []string{"--worker-id", "abc"}, nil, 2, "", `--worker-id "abc": want an integer`},
		{"worker id not an integer in the environment", nil, []string{"SNOWFLAKED_WORKER_ID=abc"}, 2, "", `SNOWFLAKED_WORKER_ID="abc" (for --worker-id): want an integer`},
		{"every bad value at once", []string{"--fence-ahead", "3", "--worker-id", "abc"}, []string{"SNOWFLAKED_MAX_BATCH=many"}, 2, "",
			"--fence-ahead \"3\": want a duration like 3s\n--worker-id \"abc\": want an integer\nbad value in environment: SNOWFLAKED_MAX_BATCH=\"many\""},
		{"layout, epoch and time unit bad at once", []string{"--worker-id", "1", "--layout", "50/x/12", "--epoch", "yesterday", "--time-unit", "fast"}, nil, 2, "",
			`epoch "yesterday" is not an RFC 3339 time`},
		{"layout, epoch and time unit bad at once: the unit too", []string{"--worker-id", "1", "--layout", "50/x/12", "--epoch", "yesterday", "--time-unit", "fast"}, nil, 2, "",
			`time unit "fast" is not a duration`},
		{"positional argument", []string{"--worker-id", "1", "extra"}, nil, 2, "", `unexpected arguments ["extra"]`},
		{"missing worker id", []string{"--listen", "127.0.0.1:0"}, nil, 2, "", "--worker-id is required"},
		{"bad environment value", []string{"--worker-id", "1"}, []string{"SNOWFLAKED_MAX_BATCH=many"}, 2, "", `SNOWFLAKED_MAX_BATCH="many"`},
		{"invalid environment config", []string{"--worker-id", "1"}, []string{"SNOWFLAKED_MAX_BATCH=0"}, 2, "", "--max-batch 0"},
		{"log format", []string{"--worker-id", "1", "--log-format", "xml"}, nil, 2, "", `--log-format "xml"`},
		{"zookeeper down at first start", []string{"--zk", "127.0.0.1:1", "--zk-session-timeout", "100ms", "--listen", "127.0.0.1:0", "--cache-file", "CACHE"}, nil, 1, "", "a first start needs ZooKeeper"},
		{"worker id with zookeeper", []string{"--zk", "127.0.0.1:1", "--worker-id", "3", "--listen", "127.0.0.1:0"}, nil, 2, "", "--worker-id 3: only for standalone mode"},
		{"zookeeper without an advertisable address", []string{"--zk", "127.0.0.1:1"}, nil, 2, "", "--advertise is required in ZooKeeper mode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := slices.Clone(tc.args)
			for i, a := range args {
				if a == "CACHE" {
					args[i] = filepath.Join(t.TempDir(), "cache.json")
				}
			}
			code := run(args, tc.env, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.wantOut)
			}
			// Every line on stderr is JSON, a bad configuration's included.
			if said := jsonSaid(t, stderr.String()); !strings.Contains(said, tc.wantErr) {
				t.Errorf("stderr's errors and messages %q do not contain %q", said, tc.wantErr)
			}
			if tc.code == 2 && !strings.Contains(stderr.String(), `"help":"snowflaked --help lists every flag"`) {
				t.Errorf("stderr %q does not point to --help", stderr.String())
			}
			// A bad command line gets the error and a pointer to --help,
			// not every flag's description.
			if n := strings.Count(stderr.String(), "\n"); tc.code == 2 && n > 3 {
				t.Errorf("stderr has %d lines for a bad command line, want the error in at most 3:\n%s", n, stderr.String())
			}
		})
	}
}

// jsonSaid returns what out's lines say, one a line: a line's "error", or
// its "message" when it has none; a line that is not JSON fails the test.
func jsonSaid(t *testing.T, out string) string {
	t.Helper()
	var said []string
	for line := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("a line on stderr that is not JSON: %q", line)
			continue
		}
		if v, ok := m["error"].(string); ok {
			said = append(said, v)
		} else if v, ok := m["message"].(string); ok {
			said = append(said, v)
		}
	}
	return strings.Join(said, "\n")
}

// Lines of the standard logger become JSON warnings of the process log.
func TestStdlogWriter(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ERROR: metrics: cannot open /proc/self/io\n", `"message":"ERROR: metrics: cannot open /proc/self/io"`},
		{"no newline", `"message":"no newline"`},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		w := stdlogWriter{zerolog.New(&buf).With().Str("component", "stdlib").Logger()}
		if n, err := w.Write([]byte(tc.in)); n != len(tc.in) || err != nil {
			t.Errorf("Write(%q) = %d, %v", tc.in, n, err)
		}
		got := buf.String()
		for _, want := range []string{tc.want, `"level":"warn"`, `"component":"stdlib"`} {
			if !strings.Contains(got, want) {
				t.Errorf("Write(%q) logged %s, want %s", tc.in, got, want)
			}
		}
	}
}

// --help names every flag as the docs write it, with two dashes, never
// one.
func TestHelpWritesTwoDashes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("--help: exit %d: %s", code, stderr.String())
	}
	fs := flag.NewFlagSet("snowflaked", flag.ContinueOnError)
	var cfg node.Config
	cfg.RegisterFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(stdout.String(), "  --"+f.Name) {
			t.Errorf("--help does not list --%s", f.Name)
		}
		if strings.Contains(stdout.String(), "  -"+f.Name+" ") || strings.Contains(stdout.String(), "  -"+f.Name+"\n") {
			t.Errorf("--help lists -%s with one dash", f.Name)
		}
	})
}
