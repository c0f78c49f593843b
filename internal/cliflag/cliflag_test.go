package cliflag

import (
	"bytes"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func newSet() *flag.FlagSet {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("worker-id", -1, "worker ID")
	fs.Duration("fence-ahead", 0, "fence")
	fs.String("zk", "", "servers")
	fs.String("zk-auth", "", "auth")
	fs.Bool("json", false, "json")
	return fs
}

func TestSuggest(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"workerid", "worker-id"},
		{"worker_id", "worker-id"},
		{"Worker-ID", "worker-id"},
		{"fence-ahaed", "fence-ahead"},
		{"zk-autth", "zk-auth"},
		{"jsn", "json"},
		{"zq", "zk"},
		{"listen", ""},
		{"x", ""},
	} {
		if got := suggest(newSet(), tc.in); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		out     string // substring of stdout
		errLine string // stderr's first line (its lines but the last, joined)
	}{
		{"help", []string{"--help"}, exitOK, "-worker-id", ""},
		{"short help", []string{"-h"}, exitOK, "-fence-ahead", ""},
		{"typo", []string{"--workerid", "5"}, exitUsage, "", "prog: unknown flag --workerid; did you mean --worker-id?"},
		{"nothing near", []string{"--listen", ":1"}, exitUsage, "", "prog: unknown flag --listen"},
		{"no value", []string{"--zk"}, exitUsage, "", "prog: flag --zk needs a value"},
		{"bad integer", []string{"--worker-id", "five"}, exitUsage, "", `prog: --worker-id "five": want an integer`},
		{"integer out of range", []string{"--worker-id", "99999999999999999999"}, exitUsage, "", `prog: --worker-id "99999999999999999999": out of range: want an integer that fits`},
		{"duration without a unit", []string{"--fence-ahead", "3"}, exitUsage, "", `prog: --fence-ahead "3": want a duration like 3s`},
		{"bool", []string{"--json=maybe"}, exitUsage, "", `prog: --json "maybe": want true or false`},
		{"every bad value at once", []string{"--fence-ahead", "3", "--zk", "x", "--worker-id=abc"}, exitUsage, "",
			"prog: --fence-ahead \"3\": want a duration like 3s\nprog: --worker-id \"abc\": want an integer"},
		{"a bad value and an unknown flag", []string{"--fence-ahead", "3", "--frob"}, exitUsage, "",
			"prog: --fence-ahead \"3\": want a duration like 3s\nprog: unknown flag --frob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newSet()
			_, err := Parse(fs, tc.args, false)
			if err == nil {
				t.Fatal("Parse accepted", tc.args)
			}
			var stdout, stderr bytes.Buffer
			if code := Report(&stdout, &stderr, fs, err); code != tc.code {
				t.Fatalf("exit %d, want %d", code, tc.code)
			}
			if !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.out)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if tc.code == exitOK {
				if stderr.Len() > 0 {
					t.Errorf("help wrote to stderr: %q", stderr.String())
				}
				return
			}
			if n := len(lines); n < 2 || strings.Join(lines[:n-1], "\n") != tc.errLine || lines[n-1] != "Run 'prog --help' for every flag." {
				t.Errorf("stderr:\n%s\nwant %q then the pointer to --help", stderr.String(), tc.errLine)
			}
		})
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args, pos []string
	}{
		{[]string{"1", "--json", "2"}, []string{"1", "2"}},
		{[]string{"--zk", "a:1", "x"}, []string{"x"}},
		{[]string{"-5", "--json"}, []string{"-5"}},
		{[]string{"--json", "--", "--zk"}, []string{"--zk"}},
		{[]string{"--zk=a:1", "y"}, []string{"y"}},
	} {
		pos, err := Parse(newSet(), tc.args, true)
		if err != nil || !slices.Equal(pos, tc.pos) {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.args, pos, err, tc.pos)
		}
	}
	// Parsing prints nothing: Report does.
	var out bytes.Buffer
	fs := newSet()
	fs.SetOutput(&out)
	if _, err := Parse(fs, []string{"--nope"}, true); err == nil || out.Len() > 0 {
		t.Errorf("Parse of an unknown flag: err %v, printed %q", err, out.String())
	}
}

// PrintDefaults writes every flag with two dashes, its kind, its help and
// a default that is not the zero value.
func TestPrintDefaults(t *testing.T) {
	fs := newSet()
	fs.String("cluster", "default", "cluster `name`")
	var b bytes.Buffer
	PrintDefaults(&b, fs)
	want := "  --cluster name\n    \tcluster name (default \"default\")\n" +
		"  --fence-ahead duration\n    \tfence\n" +
		"  --json\n    \tjson\n" +
		"  --worker-id int\n    \tworker ID (default -1)\n" +
		"  --zk string\n    \tservers\n" +
		"  --zk-auth string\n    \tauth\n"
	if b.String() != want {
		t.Errorf("PrintDefaults:\n%s\nwant:\n%s", b.String(), want)
	}
}
