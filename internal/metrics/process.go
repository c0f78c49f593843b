package metrics

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// The Go runtime families (Config.ProcessMetrics), with the names and
// meanings Prometheus's Go collectors give them. A family whose name ends
// in _count (go_cgo_calls_count, go_cpu_count, go_gc_forced_count) is
// untyped: promtool wants counters to end in _total, and nothing but
// histograms and summaries to end in _count.
var (
	fGoInfo    = family{"go_info", "gauge", "Go version the binary was built with (label version); always 1."}
	fGoInfoExt = family{"go_info_ext", "gauge", "Compiler, GOOS and GOARCH the binary was built with; always 1."}
	fGoCgo     = family{"go_cgo_calls_count", "untyped", "Calls from Go to C the process made (a counter)."}
	fGoCPUs    = family{"go_cpu_count", "untyped", "Logical CPUs the process can use (a gauge)."}
	fGoThreads = family{"go_threads", "gauge", "Operating-system threads the runtime created."}
	// fGoGoroutines counts the program's goroutines as runtime.NumGoroutine
	// and Prometheus's Go collector do; runtime/metrics' count also holds
	// the runtime's own.
	fGoGoroutines = family{"go_goroutines", "gauge", "Goroutines that exist now."}
	fGoGCDur      = family{"go_gc_duration_seconds", "summary", "Stop-the-world pause durations of the garbage collector."}
	fGoLastGC     = family{"go_memstats_last_gc_time_seconds", "gauge", "Unix time the last garbage collection finished."}
	fGoGCPauses   = family{"go_gc_pauses_seconds", "histogram", "Stop-the-world pause durations of the garbage collector (runtime/metrics; the sum is estimated from the runtime's buckets)."}
	fGoSchedLat   = family{"go_sched_latencies_seconds", "histogram", "Time goroutines spent runnable before they ran (the sum is estimated from the runtime's buckets)."}
)

// runtimeFamilies are the Go runtime families read from runtime/metrics:
// each is the sum of its runtime metrics (e.g. the heap's in-use bytes are
// its objects and its unused space), as runtime.MemStats sums them, but
// without stopping the world.
var runtimeFamilies = []struct {
	f    family
	keys []string
}{
	{family{"go_gomaxprocs", "gauge", "GOMAXPROCS: how many threads run Go code at once."}, []string{"/sched/gomaxprocs:threads"}},
	{family{"go_memlimit_bytes", "gauge", "The Go runtime's soft memory limit (GOMEMLIMIT)."}, []string{"/gc/gomemlimit:bytes"}},
	{family{"go_gc_forced_count", "untyped", "Garbage collections the program forced (a counter)."}, []string{"/gc/cycles/forced:gc-cycles"}},
	{family{"go_gc_cpu_seconds_total", "counter", "CPU time the garbage collector used (the runtime's estimate)."}, []string{"/cpu/classes/gc/total:cpu-seconds"}},
	{family{"go_gc_mark_assist_cpu_seconds_total", "counter", "CPU time goroutines spent assisting the garbage collector."}, []string{"/cpu/classes/gc/mark/assist:cpu-seconds"}},
	{family{"go_scavenge_cpu_seconds_total", "counter", "CPU time spent returning memory to the operating system."}, []string{"/cpu/classes/scavenge/total:cpu-seconds"}},
	{family{"go_mutex_wait_seconds_total", "counter", "Time goroutines spent blocked on a sync.Mutex or sync.RWMutex."}, []string{"/sync/mutex/wait/total:seconds"}},
	{family{"go_memstats_alloc_bytes", "gauge", "Bytes of heap objects allocated and not yet freed."}, []string{"/memory/classes/heap/objects:bytes"}},
	{family{"go_memstats_alloc_bytes_total", "counter", "Bytes allocated for heap objects since the start."}, []string{"/gc/heap/allocs:bytes"}},
	{family{"go_memstats_buck_hash_sys_bytes", "gauge", "Bytes used by the profiling bucket hash table."}, []string{"/memory/classes/profiling/buckets:bytes"}},
	{family{"go_memstats_frees_total", "counter", "Heap objects freed since the start."}, []string{"/gc/heap/frees:objects", "/gc/heap/tiny/allocs:objects"}},
	{family{"go_memstats_gc_sys_bytes", "gauge", "Bytes of garbage-collection metadata."}, []string{"/memory/classes/metadata/other:bytes"}},
	{family{"go_memstats_heap_alloc_bytes", "gauge", "Bytes of heap objects allocated and not yet freed."}, []string{"/memory/classes/heap/objects:bytes"}},
	{family{"go_memstats_heap_idle_bytes", "gauge", "Bytes in idle heap spans."}, []string{"/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{family{"go_memstats_heap_inuse_bytes", "gauge", "Bytes in in-use heap spans."}, []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}},
	{family{"go_memstats_heap_objects", "gauge", "Heap objects allocated and not yet freed."}, []string{"/gc/heap/objects:objects"}},
	{family{"go_memstats_heap_released_bytes", "gauge", "Bytes of heap memory returned to the operating system."}, []string{"/memory/classes/heap/released:bytes"}},
	{family{"go_memstats_heap_sys_bytes", "gauge", "Bytes of heap memory obtained from the operating system."}, []string{
		"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes"}},
	{family{"go_memstats_mallocs_total", "counter", "Heap objects allocated since the start."}, []string{"/gc/heap/allocs:objects", "/gc/heap/tiny/allocs:objects"}},
	{family{"go_memstats_mcache_inuse_bytes", "gauge", "Bytes of allocated mcache structures."}, []string{"/memory/classes/metadata/mcache/inuse:bytes"}},
	{family{"go_memstats_mcache_sys_bytes", "gauge", "Bytes of memory obtained for mcache structures."}, []string{
		"/memory/classes/metadata/mcache/inuse:bytes", "/memory/classes/metadata/mcache/free:bytes"}},
	{family{"go_memstats_mspan_inuse_bytes", "gauge", "Bytes of allocated mspan structures."}, []string{"/memory/classes/metadata/mspan/inuse:bytes"}},
	{family{"go_memstats_mspan_sys_bytes", "gauge", "Bytes of memory obtained for mspan structures."}, []string{
		"/memory/classes/metadata/mspan/inuse:bytes", "/memory/classes/metadata/mspan/free:bytes"}},
	{family{"go_memstats_next_gc_bytes", "gauge", "Heap size at which the next garbage collection starts."}, []string{"/gc/heap/goal:bytes"}},
	{family{"go_memstats_other_sys_bytes", "gauge", "Bytes of other runtime allocations."}, []string{"/memory/classes/other:bytes"}},
	{family{"go_memstats_stack_inuse_bytes", "gauge", "Bytes in stack spans."}, []string{"/memory/classes/heap/stacks:bytes"}},
	{family{"go_memstats_stack_sys_bytes", "gauge", "Bytes of stack memory obtained from the operating system."}, []string{
		"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes"}},
	{family{"go_memstats_sys_bytes", "gauge", "Bytes of memory obtained from the operating system in all."}, []string{"/memory/classes/total:bytes"}},
}

// The runtime/metrics histograms.
const (
	keyGCPauses = "/sched/pauses/total/gc:seconds"
	keySchedLat = "/sched/latencies:seconds"
)

// histogramBounds are the upper bounds (le) the runtime's fine-grained
// histograms are exported with.
var histogramBounds = []float64{1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10}

// writeProcess appends the Go runtime families and, where /proc is
// readable (Linux), the process families.
func writeProcess(e *expo) {
	writeRuntime(e)
	writeProc(e, "/proc")
}

// writeRuntime appends the Go runtime families. A runtime metric this Go
// version does not have leaves its family out.
func writeRuntime(e *expo) {
	e.add(fGoInfo, 1, "version", runtime.Version())
	e.add(fGoInfoExt, 1, "compiler", runtime.Compiler, "GOARCH", runtime.GOARCH, "GOOS", runtime.GOOS)
	e.add(fGoCgo, float64(runtime.NumCgoCall()))
	e.add(fGoCPUs, float64(runtime.NumCPU()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	e.add(fGoThreads, float64(threads))
	e.add(fGoGoroutines, float64(runtime.NumGoroutine()))

	writeGCStats(e)

	var samples []rtmetrics.Sample
	index := map[string]int{}
	for _, rf := range runtimeFamilies {
		for _, k := range rf.keys {
			if _, ok := index[k]; !ok {
				index[k] = len(samples)
				samples = append(samples, rtmetrics.Sample{Name: k})
			}
		}
	}
	for _, k := range []string{keyGCPauses, keySchedLat} {
		index[k] = len(samples)
		samples = append(samples, rtmetrics.Sample{Name: k})
	}
	rtmetrics.Read(samples)
	for _, rf := range runtimeFamilies {
		if v, ok := sumSamples(samples, index, rf.keys); ok {
			e.add(rf.f, v)
		}
	}
	for _, h := range []struct {
		f   family
		key string
	}{{fGoGCPauses, keyGCPauses}, {fGoSchedLat, keySchedLat}} {
		if v := samples[index[h.key]].Value; v.Kind() == rtmetrics.KindFloat64Histogram {
			writeHistogram(e, h.f, v.Float64Histogram())
		}
	}
}

// writeGCStats appends the garbage collector's pause summary (the
// quantiles of the pauses the runtime remembers, up to its last 256) and
// the time of the last collection.
func writeGCStats(e *expo) {
	gc := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)} // min, 25%, 50%, 75%, max
	debug.ReadGCStats(&gc)
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		e.add(fGoGCDur, gc.PauseQuantiles[i].Seconds(), "quantile", q)
	}
	e.addPart(fGoGCDur, "_sum", gc.PauseTotal.Seconds())
	e.addPart(fGoGCDur, "_count", float64(gc.NumGC))
	last := 0.0
	if !gc.LastGC.IsZero() {
		last = float64(gc.LastGC.UnixNano()) / 1e9
	}
	e.add(fGoLastGC, last)
}

// sumSamples sums the values of keys (each a uint64 or float64 metric);
// false when one is missing.
func sumSamples(samples []rtmetrics.Sample, index map[string]int, keys []string) (float64, bool) {
	sum := 0.0
	for _, k := range keys {
		switch v := samples[index[k]].Value; v.Kind() {
		case rtmetrics.KindUint64:
			sum += float64(v.Uint64())
		case rtmetrics.KindFloat64:
			sum += v.Float64()
		default:
			return 0, false
		}
	}
	return sum, true
}

// writeHistogram appends a runtime/metrics histogram as a Prometheus one
// with the buckets histogramBounds: a bucket counts the runtime's buckets
// that end at or below its bound. The runtime keeps no sum; it is
// estimated from each bucket's middle (its finite end when the other is
// infinite).
func writeHistogram(e *expo, f family, h *rtmetrics.Float64Histogram) {
	var total uint64
	sum := 0.0
	for i, n := range h.Counts {
		total += n
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		switch {
		case math.IsInf(lo, -1):
			sum += float64(n) * hi
		case math.IsInf(hi, 1):
			sum += float64(n) * lo
		default:
			sum += float64(n) * (lo + hi) / 2
		}
	}
	i := 0
	var cum uint64
	for _, le := range histogramBounds {
		for i < len(h.Counts) && h.Buckets[i+1] <= le {
			cum += h.Counts[i]
			i++
		}
		e.addPartUint(f, "_bucket", cum, "le", strconv.FormatFloat(le, 'g', -1, 64))
	}
	e.addPartUint(f, "_bucket", total, "le", "+Inf")
	e.addPart(f, "_sum", sum)
	e.addPartUint(f, "_count", total)
}

// The process families, read from /proc (Linux); a file that cannot be
// read or parsed leaves its families out.
var (
	fProcCPU       = family{"process_cpu_seconds_total", "counter", "CPU time the process used, user and kernel."}
	fProcCPUUser   = family{"process_cpu_seconds_user_total", "counter", "CPU time the process spent in user mode."}
	fProcCPUSys    = family{"process_cpu_seconds_system_total", "counter", "CPU time the process spent in the kernel."}
	fProcMinFlt    = family{"process_minor_pagefaults_total", "counter", "Page faults served from memory."}
	fProcMajFlt    = family{"process_major_pagefaults_total", "counter", "Page faults that needed a disk read."}
	fProcThreads   = family{"process_num_threads", "gauge", "Operating-system threads of the process."}
	fProcStart     = family{"process_start_time_seconds", "gauge", "Unix time the process started."}
	fProcVirt      = family{"process_virtual_memory_bytes", "gauge", "Virtual memory size."}
	fProcRSS       = family{"process_resident_memory_bytes", "gauge", "Resident memory."}
	fProcOpenFDs   = family{"process_open_fds", "gauge", "Open file descriptors."}
	fProcMaxFDs    = family{"process_max_fds", "gauge", "Largest number of open file descriptors allowed."}
	fProcVirtPeak  = family{"process_virtual_memory_peak_bytes", "gauge", "Largest virtual memory size so far."}
	fProcRSSPeak   = family{"process_resident_memory_peak_bytes", "gauge", "Largest resident memory so far."}
	fProcRSSAnon   = family{"process_resident_memory_anon_bytes", "gauge", "Resident anonymous memory."}
	fProcRSSFile   = family{"process_resident_memory_file_bytes", "gauge", "Resident file-backed memory."}
	fProcRSSShared = family{"process_resident_memory_shared_bytes", "gauge", "Resident shared memory."}
)

// procIO maps the fields of /proc/self/io to their families.
var procIO = []struct {
	field string
	f     family
}{
	{"rchar", family{"process_io_read_bytes_total", "counter", "Bytes the process read, from any source."}},
	{"wchar", family{"process_io_written_bytes_total", "counter", "Bytes the process wrote, to any destination."}},
	{"syscr", family{"process_io_read_syscalls_total", "counter", "Read system calls the process made."}},
	{"syscw", family{"process_io_write_syscalls_total", "counter", "Write system calls the process made."}},
	{"read_bytes", family{"process_io_storage_read_bytes_total", "counter", "Bytes the process read from storage."}},
	{"write_bytes", family{"process_io_storage_written_bytes_total", "counter", "Bytes the process wrote to storage."}},
}

// clockTicks is the unit of the times in /proc/self/stat (USER_HZ, 100 on
// every architecture Linux runs Go on).
const clockTicks = 100

// writeProc appends the process families read from the proc file system
// at root (/proc; tests give a copy).
func writeProc(e *expo, root string) {
	self := filepath.Join(root, "self")
	if st, ok := readProcStat(filepath.Join(self, "stat")); ok {
		e.add(fProcCPU, (st.utime+st.stime)/clockTicks)
		e.add(fProcCPUUser, st.utime/clockTicks)
		e.add(fProcCPUSys, st.stime/clockTicks)
		e.add(fProcMinFlt, st.minflt)
		e.add(fProcMajFlt, st.majflt)
		e.add(fProcThreads, st.threads)
		if boot, ok := procKeyValues(filepath.Join(root, "stat"), " ")["btime"]; ok {
			e.add(fProcStart, boot+st.start/clockTicks)
		}
		e.add(fProcVirt, st.vsize)
		e.add(fProcRSS, st.rss*float64(os.Getpagesize()))
	}
	if fds, err := os.ReadDir(filepath.Join(self, "fd")); err == nil {
		e.add(fProcOpenFDs, float64(len(fds)))
	}
	if n, ok := maxOpenFiles(filepath.Join(self, "limits")); ok {
		e.add(fProcMaxFDs, n)
	}
	status := procKeyValues(filepath.Join(self, "status"), ":")
	for _, kv := range []struct {
		key string
		f   family
	}{
		{"VmPeak", fProcVirtPeak}, {"VmHWM", fProcRSSPeak}, {"RssAnon", fProcRSSAnon}, {"RssFile", fProcRSSFile}, {"RssShmem", fProcRSSShared},
	} {
		if kb, ok := status[kv.key]; ok {
			e.add(kv.f, kb*1024)
		}
	}
	io := procKeyValues(filepath.Join(self, "io"), ":")
	for _, c := range procIO {
		if v, ok := io[c.field]; ok {
			e.add(c.f, v)
		}
	}
}

// procStat holds the fields of /proc/self/stat the families need.
type procStat struct {
	minflt, majflt, utime, stime, threads, start, vsize, rss float64
}

// readProcStat parses /proc/self/stat (proc(5)): the fields after the
// command name, which is in parentheses and may hold spaces.
func readProcStat(path string) (procStat, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 of proc(5) (state): field n is fields[n-3].
	const minflt, majflt, utime, stime, threads, start, vsize, rss = 10 - 3, 12 - 3, 14 - 3, 15 - 3, 20 - 3, 22 - 3, 23 - 3, 24 - 3
	if len(fields) <= rss {
		return procStat{}, false
	}
	var st procStat
	for _, f := range []struct {
		dst *float64
		i   int
	}{
		{&st.minflt, minflt}, {&st.majflt, majflt}, {&st.utime, utime}, {&st.stime, stime},
		{&st.threads, threads}, {&st.start, start}, {&st.vsize, vsize}, {&st.rss, rss},
	} {
		v, err := strconv.ParseUint(fields[f.i], 10, 64)
		if err != nil {
			return procStat{}, false
		}
		*f.dst = float64(v)
	}
	return st, true
}

// procKeyValues reads a file of "key<sep> number [unit]" lines
// (/proc/self/status, /proc/self/io, /proc/stat) into numbers by key;
// lines whose first value is not a whole number are skipped. A file that
// cannot be read gives none.
func procKeyValues(path, sep string) map[string]float64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), sep)
		fields := strings.Fields(rest)
		if !ok || len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
			out[strings.TrimSpace(key)] = float64(v)
		}
	}
	return out
}

// maxOpenFiles reads the soft limit of open files from /proc/self/limits
// ("Max open files  1024  4096  files"); false when it is unlimited or
// cannot be read.
func maxOpenFiles(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false
		}
		v, err := strconv.ParseUint(fields[0], 10, 64)
		return float64(v), err == nil
	}
	return 0, false
}
