package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestRunRefusesBadInput(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     []string
		code    int
		wantOut string // substring of stdout
		wantErr string // substring of stderr
	}{
		{"version", []string{"--version"}, nil, 0, "(go1.", ""},
		{"help", []string{"-help"}, nil, 0, "SNOWFLAKED_<FLAG>", ""},
		{"help with two dashes", []string{"--help"}, nil, 0, "--worker-id", ""},
		{"unknown flag", []string{"--no-such-flag"}, nil, 2, "", "unknown flag --no-such-flag\nRun 'snowflaked --help'"},
		{"typo'd flag", []string{"--workerid", "5"}, nil, 2, "", "snowflaked: unknown flag --workerid; did you mean --worker-id?"},
		{"near miss", []string{"--fence-ahaed", "3s"}, nil, 2, "", "did you mean --fence-ahead?"},
		{"flag without its value", []string{"--worker-id"}, nil, 2, "", "flag --worker-id needs a value"},
		{"bad duration", []string{"--fence-ahead", "soon"}, nil, 2, "", "fence-ahead"},
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
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantErr)
			}
			// A bad command line gets the error and a pointer to --help,
			// not every flag's description.
			if n := strings.Count(stderr.String(), "\n"); tc.code == 2 && n > 3 {
				t.Errorf("stderr has %d lines for a bad command line, want the error in at most 3:\n%s", n, stderr.String())
			}
		})
	}
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
