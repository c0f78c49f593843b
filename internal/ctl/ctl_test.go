package ctl

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestDecode(t *testing.T) {
	def := snowflake.DefaultLayout()
	at := time.Date(2025, 6, 1, 12, 30, 45, 123e6, time.UTC)
	id := def.Compose(def.TickOf(at.UnixNano()), 3, 17)
	leaf := def
	leaf.Epoch = time.UnixMilli(leafEpochMilli).UTC()
	leafID := leaf.Compose(leaf.TickOf(at.UnixNano()), 1023, 4095)
	js := snowflake.JS53Layout()
	jsID := js.Compose(js.TickOf(at.UnixNano()), 31, 127)
	idStr, leafStr, jsStr := strconv.FormatInt(id, 10), strconv.FormatInt(leafID, 10), strconv.FormatInt(jsID, 10)

	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut []string
		wantErr string
	}{
		{"text", []string{"decode", idStr}, 0, []string{"time      2025-06-01T12:30:45.123Z", "unix_ms   1748781045123", "worker    3", "sequence  17"}, ""},
		{"json after id", []string{"decode", idStr, "--json"}, 0, []string{`"id":"` + idStr + `"`, `"timestamp_ms":1748781045123`, `"time":"2025-06-01T12:30:45.123Z"`, `"worker_id":3`, `"sequence":17`}, ""},
		{"leaf", []string{"decode", "--leaf", leafStr}, 0, []string{"2025-06-01T12:30:45.123Z", "worker    1023", "sequence  4095", "epoch 2010-11-04T01:42:54.657Z"}, ""},
		{"js53", []string{"decode", "--layout", "js53", jsStr}, 0, []string{"2025-06-01T12:30:45.123Z", "worker    31", "sequence  127"}, ""},
		{"several ids", []string{"decode", "--json", "1", "2"}, 0, []string{`"id":"1"`, `"id":"2"`}, ""},
		{"custom epoch and unit", []string{"decode", "--epoch", "2025-01-01T00:00:00Z", "--time-unit", "10ms", strconv.FormatInt(int64(100)<<22, 10)}, 0, []string{"2025-01-01T00:00:01.000Z"}, ""},
		{"not a number", []string{"decode", "12a"}, 2, nil, `id "12a" is not a decimal number`},
		{"negative", []string{"decode", "-5"}, 2, nil, "-5 is negative"},
		{"too big for int64", []string{"decode", "9223372036854775808"}, 2, nil, "is too big"},
		{"too big for js53", []string{"decode", "--layout", "js53", idStr}, 2, nil, "largest ID of layout 41/5/7"},
		{"no id", []string{"decode", "--json"}, 2, nil, "no ID given"},
		{"leaf with layout", []string{"decode", "--leaf", "--epoch", "2024-01-01T00:00:00Z", "1"}, 2, nil, "drop --epoch"},
		{"bad layout", []string{"decode", "--layout", "1/1/1", "1"}, 2, nil, "invalid layout"},
		{"unknown flag", []string{"decode", "--nope", "1"}, 2, nil, "nope"},
		{"no command", nil, 2, nil, "Usage: snowflakectl"},
		{"unknown command", []string{"frobnicate"}, 2, nil, `unknown command "frobnicate"`},
		{"help", []string{"help"}, 0, []string{"decode"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr.String())
			}
			for _, s := range tc.wantOut {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout %q does not contain %q", stdout.String(), s)
				}
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantErr)
			}
			if tc.code == 0 && strings.Contains(strings.Join(tc.args, " "), "--json") {
				for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
					var d decoded
					if err := json.Unmarshal([]byte(line), &d); err != nil {
						t.Errorf("line %q is not JSON: %v", line, err)
					}
				}
			}
		})
	}
}

// What an operator's first mistakes meet: --help everywhere exits 0 with the
// usage on stdout, flags before the command are understood, conflicts and
// typos are named, --version answers.
func TestCommandLineHelps(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{"version", []string{"--version"}, 0, "snowflakectl dev (go1.", ""},
		{"top-level help", []string{"--help"}, 0, "snowflakectl <command> --help", ""},
		{"status help", []string{"status", "--help"}, 0, "Usage: snowflakectl status --zk", ""},
		{"decode help", []string{"decode", "-h"}, 0, "-leaf", ""},
		{"get help", []string{"get", "--help"}, 0, "-servers", ""},
		{"bench help says what --timeout bounds", []string{"bench", "--help"}, 0, "beyond --duration", ""},
		{"probe help", []string{"probe", "--help"}, 0, "-quiet", ""},
		{"segment help", []string{"segment", "--help"}, 0, "segment create <tag>", ""},
		{"segment create help", []string{"segment", "create", "--help"}, 0, "creating a tag needs it", ""},
		{"segment create's usage line names --opaque", []string{"segment", "create", "--help"}, 0, "[--opaque --digits D]", ""},
		{"segment list help", []string{"segment", "list", "--help"}, 0, "reading needs none", ""},
		{"segment status help", []string{"segment", "status", "--help"}, 0, "the tag's status as a JSON object", ""},
		{"typo", []string{"status", "--zk-autth", "x"}, 2, "", "unknown flag --zk-autth; did you mean --zk-auth?\nRun 'snowflakectl status --help'"},
		{"mistyped command", []string{"stauts"}, 2, "", `unknown command "stauts"; did you mean "status"?`},
		{"unknown command", []string{"frobnicate"}, 2, "", "unknown command \"frobnicate\"\n"},
		{"flags before the command", []string{"--zk", "127.0.0.1:1", "status", "--timeout", "bogus"}, 2, "", `--timeout "bogus": want a duration like 3s`},
		{"flags before segment", []string{"--zk", "127.0.0.1:1", "segment", "status", "BAD TAG"}, 2, "", "snowflakectl segment status: "},
		{"flags and no command", []string{"--zk", "x"}, 2, "", `flags ["--zk" "x"] come with a command`},
		{"get with both", []string{"get", "--zk", "127.0.0.1:1", "--servers", "127.0.0.1:2"}, 2, "", "give --servers, --bootstrap or --zk, only one"},
		{"get with neither", []string{"get"}, 2, "", "give --servers host:port,…, --bootstrap host:port,… or --zk host:2181,…"},
		{"digits without opaque", []string{"segment", "create", "t", "--digits", "8", "--zk", "x"}, 2, "", "--digits goes with --opaque"},
		{"opaque with too few digits", []string{"segment", "create", "t", "--opaque", "--digits", "5", "--zk", "x"}, 2, "", "opaque digits 5: want 6..18"},
		{"segment decode help", []string{"segment", "decode", "--help"}, 0, "segment decode <tag> <id>", ""},
		{"segment decode wants two", []string{"segment", "decode", "t", "--zk", "x"}, 2, "", "want 2 argument(s)"},
		{"create takes no --json", []string{"segment", "create", "t", "--json", "--zk", "x"}, 2, "", "unknown flag --json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.wantOut)
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantErr)
			}
			if tc.code == 0 && stderr.Len() > 0 {
				t.Errorf("exit 0 with stderr %q", stderr.String())
			}
		})
	}
}

// commandFirst moves leading flags after the command (and segment's
// subcommand).
func TestCommandFirst(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"status --zk x", "status --zk x"},
		{"--zk x status --json", "status --zk x --json"},
		{"--zk x --cluster c segment status orders", "segment status --zk x --cluster c orders"},
		{"--json decode 5", "decode --json 5"},
		{"--cluster get status --zk h", "status --cluster get --zk h"},
		{"--description bench --zk=h segment create t", "segment create --description bench --zk=h t"},
	} {
		got, err := commandFirst(strings.Fields(tc.in))
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("commandFirst(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// --zk, --cluster and --zk-auth can come from the environment, under the
// names the node reads them by; the command line wins.
func TestFlagsFromTheEnvironment(t *testing.T) {
	dead := testsupport.ClosedAddr(t)
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		code    int
		wantErr string
	}{
		{"no --zk anywhere", nil, []string{"status", "--timeout", "300ms"}, 2, "--zk is required"},
		{"--zk from SNOWFLAKED_ZK", map[string]string{"SNOWFLAKED_ZK": dead}, []string{"status", "--timeout", "300ms", "--probe-timeout", "0"}, 1, dead},
		{"the command line wins", map[string]string{"SNOWFLAKED_ZK": "127.0.0.1:1"}, []string{"status", "--zk", dead, "--timeout", "300ms", "--probe-timeout", "0"}, 1, dead},
		{"--cluster from SNOWFLAKED_CLUSTER", map[string]string{"SNOWFLAKED_ZK": dead, "SNOWFLAKED_CLUSTER": "Bad Name"}, []string{"status", "--timeout", "300ms"}, 2, "Bad Name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"SNOWFLAKED_ZK", "SNOWFLAKED_CLUSTER", "SNOWFLAKED_ZK_AUTH"} {
				t.Setenv(k, tc.env[k])
			}
			var stdout, stderr bytes.Buffer
			code := Main(tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.wantErr)
			}
		})
	}
}
