package ctl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// TestIntegration_ClusterAndNodeCommands runs cluster create, set, list
// and delete and node retire against a real ZooKeeper, in order: each step
// sees what the ones before it did (a worker without recycle-after joins
// prod after cluster set changed its value).
func TestIntegration_ClusterAndNodeCommands(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	z := zk.ConnectString()
	steps := []struct {
		name    string
		args    []string
		code    int
		wantOut []string
		wantErr []string
	}{
		{"list on an empty ensemble", []string{"cluster", "list", "--zk", z}, 0, []string{"no clusters"}, nil},
		{"create", []string{"cluster", "create", "prod", "--zk", z}, 0,
			[]string{`created cluster "prod": layout 41/10/12 epoch 2024-01-01T00:00:00Z unit 1ms, worker IDs 0-1023, recycle-after 24h0m0s, requires tag_incarnation`}, nil},
		{"create again: same settings", []string{"cluster", "create", "prod", "--zk", z, "--recycle-after", "24h"}, 0,
			[]string{`cluster exists with these settings, nothing to do: "prod"`}, nil},
		{"create again: another range", []string{"cluster", "create", "prod", "--zk", z, "--worker-id-range", "0-255", "--recycle-after", "1h"}, 2,
			nil, []string{`cluster "prod" exists with --worker-id-range 0-1023, asked for 0-255; --recycle-after 24h0m0s, asked for 1h0m0s`}},
		{"create again: another layout", []string{"cluster", "create", "prod", "--zk", z, "--layout", "js53"}, 2,
			nil, []string{"layout 41/10/12 epoch 2024-01-01T00:00:00Z unit 1ms, asked for 41/5/7"}},
		{"create overlapping", []string{"cluster", "create", "staging", "--zk", z, "--worker-id-range", "500-600"}, 0,
			[]string{`created cluster "staging"`, "requires tag_incarnation,worker_id_range"},
			[]string{`warning: cluster "staging" (worker IDs 500-600`, `cluster "prod" (worker IDs 0-1023`, "may collide if they ever meet"}},
		{"create with a bad range", []string{"cluster", "create", "x", "--zk", z, "--worker-id-range", "9-2"}, 2, nil, []string{"--worker-id-range", `"9-2"`}},
		{"create with a range past the layout", []string{"cluster", "create", "x", "--zk", z, "--layout", "js53", "--worker-id-range", "0-40"}, 2, nil, []string{"--worker-id-range 0-40: layout 41/5/7 holds worker IDs 0..31"}},
		{"create with too many gene bits", []string{"cluster", "create", "x", "--zk", z, "--gene-bits", "11"}, 2, nil, []string{"--gene-bits 11"}},
		{"create without a name", []string{"cluster", "create", "--zk", z}, 2, nil, []string{"want 1 argument(s)"}},
		{"create with a bad name", []string{"cluster", "create", "a/b", "--zk", z}, 2, nil, []string{"a/b"}},
		{"set", []string{"cluster", "set", "prod", "--recycle-after", "1h", "--zk", z}, 0,
			[]string{`cluster "prod": recycle-after 24h0m0s → 1h0m0s; nodes use it from their next start`}, nil},
		{"set again: same value", []string{"cluster", "set", "prod", "--recycle-after", "60m", "--zk", z}, 0,
			[]string{`cluster "prod": recycle-after is 1h0m0s already, nothing to do`}, nil},
		{"create again without recycle-after: the value set is kept", []string{"cluster", "create", "prod", "--zk", z}, 0,
			[]string{`cluster exists with these settings, nothing to do: "prod"`, "recycle-after 1h0m0s"}, nil},
		{"create again with the old recycle-after", []string{"cluster", "create", "prod", "--zk", z, "--recycle-after", "24h"}, 2,
			nil, []string{`cluster "prod" exists with --recycle-after 1h0m0s, asked for 24h0m0s`}},
		{"set without a setting", []string{"cluster", "set", "prod", "--zk", z}, 2, nil,
			[]string{"want a setting to change: cluster set <name> --recycle-after 24h"}},
		{"set the layout", []string{"cluster", "set", "prod", "--layout", "js53", "--zk", z}, 2, nil,
			[]string{"--layout cannot change on an existing cluster", "IDs already issued", "create a new cluster", `docs/procedures.md, "Move to a new cluster or layout"`}},
		{"set the epoch", []string{"cluster", "set", "prod", "--epoch", "2025-01-01T00:00:00Z", "--zk", z}, 2, nil, []string{"--epoch cannot change", "create a new cluster"}},
		{"set the time unit", []string{"cluster", "set", "prod", "--time-unit", "10ms", "--zk", z}, 2, nil, []string{"--time-unit cannot change", "create a new cluster"}},
		{"set the gene bits", []string{"cluster", "set", "prod", "--gene-bits", "2", "--zk", z}, 2, nil, []string{"--gene-bits cannot change", "create a new cluster"}},
		{"set the range, with recycle-after", []string{"cluster", "set", "prod", "--worker-id-range", "0-511", "--recycle-after", "2h", "--zk", z}, 2, nil,
			[]string{"--worker-id-range cannot change", "narrowing it strands", "widening it may overlap another region's cluster", "create a new cluster",
				`docs/procedures.md, "Move to a new cluster or layout"`}},
		{"set a bad duration", []string{"cluster", "set", "prod", "--recycle-after", "3", "--zk", z}, 2, nil, []string{`--recycle-after "3": want a duration like 3s`}},
		{"set below 1ms", []string{"cluster", "set", "prod", "--recycle-after", "1us", "--zk", z}, 2, nil, []string{"--recycle-after 1µs: want 1ms or more"}},
		{"set zero", []string{"cluster", "set", "prod", "--recycle-after", "0s", "--zk", z}, 2, nil, []string{"--recycle-after 0s: want 1ms or more"}},
		{"set a missing cluster", []string{"cluster", "set", "prdo", "--recycle-after", "1h", "--zk", z}, 2, nil,
			[]string{`cluster "prdo" does not exist`, "the clusters there are prod, staging", "did you mean prod?"}},
		{"set without a name", []string{"cluster", "set", "--recycle-after", "1h", "--zk", z}, 2, nil, []string{"want 1 argument(s)"}},
		{"list", []string{"cluster", "list", "--zk", z}, 0, []string{"NAME", "RECYCLE AFTER", "prod", "staging", "0-1023", "500-600", "1h0m0s", "24h0m0s", "tag_incarnation,worker_id_range"}, nil},
		{"delete without --yes", []string{"cluster", "delete", "staging", "--zk", z}, 2, nil, []string{"add --yes"}},
		{"delete a missing cluster", []string{"cluster", "delete", "prdo", "--yes", "--zk", z}, 2, nil, []string{`cluster "prdo" does not exist`, "did you mean prod?"}},
		{"delete", []string{"cluster", "delete", "staging", "--yes", "--zk", z}, 0, []string{`deleted cluster "staging"`}, nil},
		{"retire an unknown node key", []string{"node", "retire", "ghost", "--cluster", "prod", "--zk", z}, 2, nil, []string{`no forever znode for node key "ghost"`}},
		{"retire in a missing cluster", []string{"node", "retire", "ghost", "--cluster", "prdo", "--zk", z}, 2, nil, []string{"did you mean prod?"}},
		{"retire without a key", []string{"node", "retire", "--zk", z}, 2, nil, []string{"want one node key"}},
		{"node: unknown subcommand", []string{"node", "rename", "x", "--zk", z}, 2, nil, []string{`unknown subcommand "rename"`}},
		{"cluster: unknown subcommand", []string{"cluster", "drop", "x", "--zk", z}, 2, nil, []string{`unknown subcommand "drop"`}},
		{"flags before the command", []string{"--zk", z, "cluster", "list"}, 0, []string{"prod"}, nil},
	}
	for _, tc := range steps {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, stdout.String(), stderr.String())
			}
			for _, s := range tc.wantOut {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout does not contain %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr does not contain %q:\n%s", s, stderr.String())
				}
			}
		})
	}

	// A worker of prod: list counts it; delete and retire are refused
	// while it holds its lease.
	startWorker(t, zk, "prod", "node-a", "127.0.0.1:18091", false)
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"cluster", "list", "--zk", z, "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("list --json: exit %d, %s", code, stderr.String())
	}
	var rows []coordinator.ClusterInfo
	// staging, deleted above, is a row of its tombstone.
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil || len(rows) != 2 || rows[0].Name != "prod" || rows[0].Workers != 1 ||
		rows[0].WorkerIDs != "0-1023" || rows[0].Layout != "41/10/12" || rows[0].RecycleAfter != "1h0m0s" || rows[0].Deleted ||
		rows[1].Name != "staging" || !rows[1].Deleted || rows[1].Tombstone == nil || rows[1].Tombstone.WorkerIDs != "500-600" {
		t.Fatalf("list --json = %s (%v)", stdout.String(), err)
	}
	for _, args := range [][]string{{"cluster", "delete", "prod", "--yes"}, {"node", "retire", "node-a", "--cluster", "prod"}} {
		stdout.Reset()
		stderr.Reset()
		code := Main(append(args, "--zk", z), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), `node key "node-a"`) {
			t.Errorf("%v with a lease held: exit %d, stderr %q; want 2 naming node-a", args, code, stderr.String())
		}
	}
}
