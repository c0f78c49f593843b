package main

import (
	"bytes"
	"strings"
	"testing"
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
		{"help", []string{"-help"}, nil, 0, "", "SNOWFLAKED_<FLAG>"},
		{"unknown flag", []string{"--no-such-flag"}, nil, 2, "", "no-such-flag"},
		{"bad duration", []string{"--fence-ahead", "soon"}, nil, 2, "", "fence-ahead"},
		{"positional argument", []string{"--worker-id", "1", "extra"}, nil, 2, "", `unexpected arguments ["extra"]`},
		{"missing worker id", []string{"--listen", "127.0.0.1:0"}, nil, 2, "", "--worker-id is required"},
		{"bad environment value", []string{"--worker-id", "1"}, []string{"SNOWFLAKED_MAX_BATCH=many"}, 2, "", `SNOWFLAKED_MAX_BATCH="many"`},
		{"invalid environment config", []string{"--worker-id", "1"}, []string{"SNOWFLAKED_MAX_BATCH=0"}, 2, "", "--max-batch 0"},
		{"log format", []string{"--worker-id", "1", "--log-format", "xml"}, nil, 2, "", `--log-format "xml"`},
		{"zookeeper mode", []string{"--zk", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--cache-file", "/nonexistent/x.json"}, nil, 1, "", "ZooKeeper mode is not built yet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, tc.env, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.wantOut)
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantErr)
			}
		})
	}
}
