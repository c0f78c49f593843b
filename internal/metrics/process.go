package metrics

import (
	"bytes"
	"strings"

	vm "github.com/VictoriaMetrics/metrics"
)

// The Go runtime and process families written by vm.WriteProcessMetrics,
// which writes samples only. Each gets a HELP and TYPE line here. A family
// whose name ends in _count (go_cgo_calls_count, go_cpu_count) is exported
// as untyped: promtool wants counters to end in _total, and nothing but
// histograms and summaries to end in _count.
var processFamilies = map[string]family{}

func init() {
	for _, f := range []family{
		{"go_cgo_calls_count", "untyped", "Calls from Go to C the process made (a counter)."},
		{"go_cpu_count", "untyped", "Logical CPUs the process can use (a gauge)."},
		{"go_gc_cpu_seconds_total", "counter", "CPU time the garbage collector used."},
		{"go_gc_duration_seconds", "summary", "Stop-the-world pause durations of the garbage collector."},
		{"go_gc_forced_count", "untyped", "Garbage collections the program forced (a counter)."},
		{"go_gc_mark_assist_cpu_seconds_total", "counter", "CPU time goroutines spent assisting the garbage collector."},
		{"go_gc_pauses_seconds", "histogram", "Stop-the-world pause durations of the garbage collector (runtime/metrics)."},
		{"go_gomaxprocs", "gauge", "GOMAXPROCS: how many threads run Go code at once."},
		{"go_goroutines", "gauge", "Goroutines that exist now."},
		{"go_info", "gauge", "Go version the binary was built with (label version); always 1."},
		{"go_info_ext", "gauge", "Compiler, GOOS and GOARCH the binary was built with; always 1."},
		{"go_memlimit_bytes", "gauge", "The Go runtime's soft memory limit (GOMEMLIMIT)."},
		{"go_memstats_alloc_bytes", "gauge", "Bytes of heap objects allocated and not yet freed."},
		{"go_memstats_alloc_bytes_total", "counter", "Bytes allocated for heap objects since the start."},
		{"go_memstats_buck_hash_sys_bytes", "gauge", "Bytes used by the profiling bucket hash table."},
		{"go_memstats_frees_total", "counter", "Heap objects freed since the start."},
		{"go_memstats_gc_cpu_fraction", "gauge", "Fraction of the CPU time the garbage collector used since the start."},
		{"go_memstats_gc_sys_bytes", "gauge", "Bytes of garbage-collection metadata."},
		{"go_memstats_heap_alloc_bytes", "gauge", "Bytes of heap objects allocated and not yet freed."},
		{"go_memstats_heap_idle_bytes", "gauge", "Bytes in idle heap spans."},
		{"go_memstats_heap_inuse_bytes", "gauge", "Bytes in in-use heap spans."},
		{"go_memstats_heap_objects", "gauge", "Heap objects allocated and not yet freed."},
		{"go_memstats_heap_released_bytes", "gauge", "Bytes of heap memory returned to the operating system."},
		{"go_memstats_heap_sys_bytes", "gauge", "Bytes of heap memory obtained from the operating system."},
		{"go_memstats_last_gc_time_seconds", "gauge", "Unix time the last garbage collection finished."},
		{"go_memstats_lookups_total", "counter", "Pointer lookups the runtime performed."},
		{"go_memstats_mallocs_total", "counter", "Heap objects allocated since the start."},
		{"go_memstats_mcache_inuse_bytes", "gauge", "Bytes of allocated mcache structures."},
		{"go_memstats_mcache_sys_bytes", "gauge", "Bytes of memory obtained for mcache structures."},
		{"go_memstats_mspan_inuse_bytes", "gauge", "Bytes of allocated mspan structures."},
		{"go_memstats_mspan_sys_bytes", "gauge", "Bytes of memory obtained for mspan structures."},
		{"go_memstats_next_gc_bytes", "gauge", "Heap size at which the next garbage collection starts."},
		{"go_memstats_other_sys_bytes", "gauge", "Bytes of other runtime allocations."},
		{"go_memstats_stack_inuse_bytes", "gauge", "Bytes in stack spans."},
		{"go_memstats_stack_sys_bytes", "gauge", "Bytes of stack memory obtained from the operating system."},
		{"go_memstats_sys_bytes", "gauge", "Bytes of memory obtained from the operating system in all."},
		{"go_mutex_wait_seconds_total", "counter", "Time goroutines spent blocked on a sync.Mutex or sync.RWMutex."},
		{"go_scavenge_cpu_seconds_total", "counter", "CPU time spent returning memory to the operating system."},
		{"go_sched_latencies_seconds", "histogram", "Time goroutines spent runnable before they ran."},
		{"go_threads", "gauge", "Operating-system threads the runtime created."},
		{"process_cpu_seconds_system_total", "counter", "CPU time the process spent in the kernel."},
		{"process_cpu_seconds_total", "counter", "CPU time the process used, user and kernel."},
		{"process_cpu_seconds_user_total", "counter", "CPU time the process spent in user mode."},
		{"process_io_read_bytes_total", "counter", "Bytes the process read, from any source."},
		{"process_io_read_syscalls_total", "counter", "Read system calls the process made."},
		{"process_io_storage_read_bytes_total", "counter", "Bytes the process read from storage."},
		{"process_io_storage_written_bytes_total", "counter", "Bytes the process wrote to storage."},
		{"process_io_write_syscalls_total", "counter", "Write system calls the process made."},
		{"process_io_written_bytes_total", "counter", "Bytes the process wrote, to any destination."},
		{"process_major_pagefaults_total", "counter", "Page faults that needed a disk read."},
		{"process_minor_pagefaults_total", "counter", "Page faults served from memory."},
		{"process_num_threads", "gauge", "Operating-system threads of the process."},
		{"process_max_fds", "gauge", "Largest number of open file descriptors allowed."},
		{"process_open_fds", "gauge", "Open file descriptors."},
		{"process_pressure_cpu_waiting_seconds_total", "counter", "Time some of the process's tasks waited for CPU (cgroup v2 pressure)."},
		{"process_pressure_cpu_stalled_seconds_total", "counter", "Time all of the process's tasks waited for CPU (cgroup v2 pressure)."},
		{"process_pressure_io_waiting_seconds_total", "counter", "Time some of the process's tasks waited for I/O (cgroup v2 pressure)."},
		{"process_pressure_io_stalled_seconds_total", "counter", "Time all of the process's tasks waited for I/O (cgroup v2 pressure)."},
		{"process_pressure_memory_waiting_seconds_total", "counter", "Time some of the process's tasks waited for memory (cgroup v2 pressure)."},
		{"process_pressure_memory_stalled_seconds_total", "counter", "Time all of the process's tasks waited for memory (cgroup v2 pressure)."},
		{"process_resident_memory_anon_bytes", "gauge", "Resident anonymous memory."},
		{"process_resident_memory_bytes", "gauge", "Resident memory."},
		{"process_resident_memory_file_bytes", "gauge", "Resident file-backed memory."},
		{"process_resident_memory_peak_bytes", "gauge", "Largest resident memory so far."},
		{"process_resident_memory_shared_bytes", "gauge", "Resident shared memory."},
		{"process_start_time_seconds", "gauge", "Unix time the process started."},
		{"process_virtual_memory_bytes", "gauge", "Virtual memory size."},
		{"process_virtual_memory_peak_bytes", "gauge", "Largest virtual memory size so far."},
	} {
		processFamilies[f.name] = f
	}
}

// writeProcess appends the Go runtime and process families, annotated.
func writeProcess(e *expo) {
	var raw bytes.Buffer
	vm.WriteProcessMetrics(&raw)
	annotate(e, raw.String(), processFamilies)
}

// annotate appends the samples of text (exposition without comments) to e,
// grouped by family in order of first appearance, each family after its
// HELP and TYPE lines. A family missing from known (one a newer library
// version adds) is exported as untyped with a help text that says so.
func annotate(e *expo, text string, known map[string]family) {
	var order []family
	samples := map[string][]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		f := processFamilyOf(sampleName(line), known)
		if _, seen := samples[f.name]; !seen {
			order = append(order, f)
		}
		samples[f.name] = append(samples[f.name], line)
	}
	for _, f := range order {
		e.header(f)
		for _, s := range samples[f.name] {
			e.b = append(e.b, s...)
			e.b = append(e.b, '\n')
		}
	}
}

// sampleName is the metric name of a sample line: up to '{' or ' '.
func sampleName(line string) string {
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		return line[:i]
	}
	return line
}

// processFamilyOf finds the family of a sample name: the name itself, or for a
// histogram's or summary's _bucket, _sum and _count series the name without
// that suffix.
func processFamilyOf(name string, known map[string]family) family {
	if f, ok := known[name]; ok {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f, ok := known[base]; ok && (f.typ == "histogram" || (f.typ == "summary" && suffix != "_bucket")) {
			return f
		}
	}
	return family{name, "untyped", "Reported by the Go metrics library; snowflaked has no description of it."}
}
