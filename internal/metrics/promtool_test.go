package metrics

import (
	"bytes"
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"math"
	"os"
	"path/filepath"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// fullExposition is a scrape with every source set, segment tags, the
// process families and some requests counted.
func fullExposition(t *testing.T) string {
	t.Helper()
	f := newFixture(t, func(c *Config) { c.ProcessMetrics = true })
	f.snap.Segments = []segment.TagStatus{{Tag: "orders", Issued: 42, Loads: 3, Available: 958, Step: 2000}}
	f.snap.PossiblyLost = 1
	f.m.Request(endpoint.ID, 200)
	f.m.Request(endpoint.IDs, 400)
	f.m.IssuedIDs(3)
	var b bytes.Buffer
	f.m.WritePrometheus(&b)
	return b.String()
}

// Every family, the node's own and the Go runtime's, has HELP and TYPE, and
// Prometheus's own linter finds nothing.
func TestExposition_PassesPromtool(t *testing.T) {
	text := fullExposition(t)
	ex, err := parseExposition(text)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, s := range ex.samples {
		fam := familyOf(s.name, ex.types)
		if ex.types[fam] == "" || strings.TrimSpace(ex.helps[fam]) == "" {
			t.Errorf("family %s (sample %s): TYPE %q, HELP %q", fam, s.name, ex.types[fam], ex.helps[fam])
		}
	}
	want := []string{"snowflaked_ids_issued_total", "snowflaked_requests_total", "go_info", "go_gc_duration_seconds", "go_gc_pauses_seconds", "go_sched_latencies_seconds", "go_threads"}
	for _, rf := range runtimeFamilies { // every runtime metric they read exists in this Go
		want = append(want, rf.f.name)
	}
	if runtime.GOOS == "linux" {
		want = append(want, "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_max_fds", "process_start_time_seconds")
	}
	for _, name := range want {
		if ex.types[name] == "" {
			t.Errorf("family %s missing", name)
		}
	}
	if got := mustFind(t, ex, "snowflaked_ids_issued_total"); got != 3 {
		t.Errorf("snowflaked_ids_issued_total = %v, want 3", got)
	}
	testsupport.CheckMetrics(t, text)
}

// TestWriteProc: the process families from a /proc copy, each file's
// fields where they belong; a file that is missing or garbled leaves its
// families out.
func TestWriteProc(t *testing.T) {
	stat := "4242 (snow flaked) S 1 4242 4242 0 -1 4194560 1500 0 7 0 250 125 0 0 20 0 9 0 1000 123456789 2048 18446744073709551615\n"
	full := map[string]string{
		"stat":        "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n",
		"self/stat":   stat,
		"self/status": "Name:\tsnowflaked\nVmPeak:\t  2000 kB\nVmHWM:\t   300 kB\nRssAnon:\t   100 kB\nRssFile:\t   50 kB\nRssShmem:\t   2 kB\n",
		"self/io":     "rchar: 10\nwchar: 20\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n",
		"self/limits": "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n",
		"self/fd/0":   "",
		"self/fd/1":   "",
		"self/fd/2":   "",
	}
	page := float64(os.Getpagesize())
	wantFull := map[string]float64{
		"process_cpu_seconds_total": 3.75, "process_cpu_seconds_user_total": 2.5, "process_cpu_seconds_system_total": 1.25,
		"process_minor_pagefaults_total": 1500, "process_major_pagefaults_total": 7, "process_num_threads": 9,
		"process_start_time_seconds": 1700000010, "process_virtual_memory_bytes": 123456789, "process_resident_memory_bytes": 2048 * page,
		"process_open_fds": 3, "process_max_fds": 1024,
		"process_virtual_memory_peak_bytes": 2000 << 10, "process_resident_memory_peak_bytes": 300 << 10,
		"process_resident_memory_anon_bytes": 100 << 10, "process_resident_memory_file_bytes": 50 << 10, "process_resident_memory_shared_bytes": 2 << 10,
		"process_io_read_bytes_total": 10, "process_io_written_bytes_total": 20, "process_io_read_syscalls_total": 3,
		"process_io_write_syscalls_total": 4, "process_io_storage_read_bytes_total": 4096, "process_io_storage_written_bytes_total": 8192,
	}
	tests := []struct {
		name   string
		change map[string]string // file → new content; "" removes it
		absent []string          // families left out
	}{
		{"all files", nil, nil},
		{"no io", map[string]string{"self/io": ""}, []string{"process_io_read_bytes_total", "process_io_storage_written_bytes_total"}},
		{"stat garbled", map[string]string{"self/stat": "4242 (x) S 1 2\n"}, []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds"}},
		{"no btime", map[string]string{"stat": "cpu 1 2 3\n"}, []string{"process_start_time_seconds"}},
		{"unlimited files", map[string]string{"self/limits": "Max open files            unlimited            unlimited            files\n"}, []string{"process_max_fds"}},
		{"no proc", map[string]string{"stat": "", "self/stat": "", "self/status": "", "self/io": "", "self/limits": "", "self/fd/0": "", "self/fd/1": "", "self/fd/2": ""},
			[]string{"process_cpu_seconds_total", "process_open_fds", "process_max_fds", "process_resident_memory_peak_bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range full {
				if c, ok := tc.change[name]; ok && c == "" {
					continue
				} else if ok {
					content = c
				}
				path := filepath.Join(root, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			e := &expo{}
			writeProc(e, root)
			ex, err := parseExposition(string(e.b))
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, e.b)
			}
			absent := map[string]bool{}
			for _, name := range tc.absent {
				absent[name] = true
				if _, ok := ex.find(name); ok {
					t.Errorf("%s present, want it left out", name)
				}
			}
			for name, want := range wantFull {
				if absent[name] || len(tc.absent) > 0 {
					continue
				}
				if got := mustFind(t, ex, name); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			testsupport.CheckMetrics(t, string(e.b))
		})
	}
}

// TestWriteHistogram: the runtime's buckets are summed into the exported
// bounds (a bucket that ends at a bound counts in it), the infinite ends
// are handled, and the sum is estimated from the middles.
func TestWriteHistogram(t *testing.T) {
	h := &rtmetrics.Float64Histogram{
		Counts:  []uint64{1, 2, 3, 4, 5},
		Buckets: []float64{math.Inf(-1), 0, 1e-6, 2e-3, 0.1, math.Inf(1)},
	}
	e := &expo{}
	writeHistogram(e, family{"x_seconds", "histogram", "A histogram."}, h)
	want := `# HELP x_seconds A histogram.
# TYPE x_seconds histogram
x_seconds_bucket{le="1e-06"} 3
x_seconds_bucket{le="1e-05"} 3
x_seconds_bucket{le="0.0001"} 3
x_seconds_bucket{le="0.001"} 3
x_seconds_bucket{le="0.01"} 6
x_seconds_bucket{le="0.1"} 10
x_seconds_bucket{le="1"} 10
x_seconds_bucket{le="10"} 10
x_seconds_bucket{le="+Inf"} 15
x_seconds_sum ` + strconv.FormatFloat(0+2*0.5e-6+3*(1e-6+2e-3)/2+4*(2e-3+0.1)/2+5*0.1, 'g', -1, 64) + `
x_seconds_count 15
`
	if got := string(e.b); got != want {
		t.Errorf("writeHistogram:\n%s\nwant:\n%s", got, want)
	}
	testsupport.CheckMetrics(t, string(e.b))
}
