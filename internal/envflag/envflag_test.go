package envflag

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

type vals struct {
	maxBatch int
	ntp      string
	required bool
	wait     time.Duration
}

func newFlagSet(v *vals) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&v.maxBatch, "max-batch", 10000, "")
	fs.StringVar(&v.ntp, "ntp", "", "")
	fs.BoolVar(&v.required, "ntp-required", false, "")
	fs.DurationVar(&v.wait, "max-start-wait", 10*time.Second, "")
	return fs
}

func TestApply(t *testing.T) {
	tests := []struct {
		name        string
		prefix      string
		args        []string
		env         []string
		want        vals
		wantUnknown []string
		wantErr     []string // substrings of the error; nil means no error
	}{
		{
			name: "defaults without environment",
			want: vals{maxBatch: 10000, wait: 10 * time.Second},
		},
		{
			name: "environment sets every kind of flag",
			env: []string{"SNOWFLAKED_MAX_BATCH=5", "SNOWFLAKED_NTP=a.example,b.example",
				"SNOWFLAKED_NTP_REQUIRED=true", "SNOWFLAKED_MAX_START_WAIT=2s"},
			want: vals{maxBatch: 5, ntp: "a.example,b.example", required: true, wait: 2 * time.Second},
		},
		{
			name:   "prefix without trailing underscore",
			prefix: "SNOWFLAKED",
			env:    []string{"SNOWFLAKED_MAX_BATCH=7"},
			want:   vals{maxBatch: 7, wait: 10 * time.Second},
		},
		{
			name: "command line wins over environment",
			args: []string{"--max-batch", "3"},
			env:  []string{"SNOWFLAKED_MAX_BATCH=5", "SNOWFLAKED_NTP=x"},
			want: vals{maxBatch: 3, ntp: "x", wait: 10 * time.Second},
		},
		{
			name: "empty value sets an empty string",
			env:  []string{"SNOWFLAKED_NTP="},
			want: vals{maxBatch: 10000, wait: 10 * time.Second},
		},
		{
			name: "first of repeated keys wins",
			env:  []string{"SNOWFLAKED_MAX_BATCH=1", "SNOWFLAKED_MAX_BATCH=2"},
			want: vals{maxBatch: 1, wait: 10 * time.Second},
		},
		{
			name:        "unknown variables are returned sorted",
			env:         []string{"SNOWFLAKED_FOO=1", "SNOWFLAKED_BAR=2", "OTHER_MAX_BATCH=9", "SNOWFLAKEDX=1", "PATH=/bin"},
			want:        vals{maxBatch: 10000, wait: 10 * time.Second},
			wantUnknown: []string{"SNOWFLAKED_BAR", "SNOWFLAKED_FOO"},
		},
		{
			name:        "lower-case or dashed spelling is not a match",
			env:         []string{"SNOWFLAKED_max_batch=5", "SNOWFLAKED_MAX-BATCH=5"},
			want:        vals{maxBatch: 10000, wait: 10 * time.Second},
			wantUnknown: []string{"SNOWFLAKED_MAX-BATCH", "SNOWFLAKED_max_batch"},
		},
		{
			name:    "bad int names variable and value",
			env:     []string{"SNOWFLAKED_MAX_BATCH=lots"},
			wantErr: []string{`SNOWFLAKED_MAX_BATCH="lots" (for --max-batch): want an integer`},
		},
		{
			name:    "every bad value is reported",
			env:     []string{"SNOWFLAKED_MAX_START_WAIT=10", "SNOWFLAKED_NTP_REQUIRED=maybe", "SNOWFLAKED_MAX_BATCH=2"},
			wantErr: []string{`SNOWFLAKED_MAX_START_WAIT="10" (for --max-start-wait): want a duration like 3s`, `SNOWFLAKED_NTP_REQUIRED="maybe" (for --ntp-required): want true or false`},
		},
		{
			name:    "bad value of a flag given on the command line is ignored",
			args:    []string{"--max-batch=4"},
			env:     []string{"SNOWFLAKED_MAX_BATCH=lots"},
			want:    vals{maxBatch: 4, wait: 10 * time.Second},
			wantErr: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got vals
			fs := newFlagSet(&got)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			prefix := tc.prefix
			if prefix == "" {
				prefix = "SNOWFLAKED_"
			}
			unknown, err := Apply(fs, prefix, tc.env)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("Apply error: %v", err)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, errBadValue) {
					t.Fatalf("error %v does not wrap ErrBadValue", err)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
			}
			if tc.wantErr == nil && got != tc.want { // after an error the values are unspecified
				t.Errorf("values = %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(unknown, tc.wantUnknown) {
				t.Errorf("unknown = %q, want %q", unknown, tc.wantUnknown)
			}
		})
	}
}

func TestApplyEmptyPrefix(t *testing.T) {
	var v vals
	if _, err := Apply(newFlagSet(&v), "", []string{"MAX_BATCH=1"}); err == nil {
		t.Fatal("empty prefix accepted")
	}
}

func TestVarName(t *testing.T) {
	tests := []struct{ prefix, name, want string }{
		{"SNOWFLAKED_", "max-batch", "SNOWFLAKED_MAX_BATCH"},
		{"SNOWFLAKED", "zk", "SNOWFLAKED_ZK"},
		{"SNOWFLAKED_", "zk-session-timeout", "SNOWFLAKED_ZK_SESSION_TIMEOUT"},
	}
	for _, tc := range tests {
		if got := VarName(tc.prefix, tc.name); got != tc.want {
			t.Errorf("VarName(%q, %q) = %q, want %q", tc.prefix, tc.name, got, tc.want)
		}
	}
}
