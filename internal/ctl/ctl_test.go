package ctl

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestDecode(t *testing.T) {
	def := snowflake.DefaultLayout()
	at := time.Date(2025, 6, 1, 12, 30, 45, 123e6, time.UTC)
	id := def.Compose(def.TickOf(at.UnixNano()), 3, 17)
	leaf := def
	leaf.Epoch = time.UnixMilli(LeafEpochMilli).UTC()
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
