// Command clientsbench measures each client of the repository (Go, Java,
// Python, TypeScript) against one local node, side by side with the same
// number of callers doing plain GET /id on the language's own HTTP client:
// IDs/s with 64 callers, and one caller's median latency. It drives each
// client through its conformance driver (tests/conformance/README.md, op
// bench). make bench runs it (scripts/bench.sh); ratios from one run are
// what it reports, the machine being shared.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	bin := flag.String("snowflaked", "bin/snowflaked", "the node's binary")
	goDriver := flag.String("godriver", "", "the Go client's driver binary (go build ./tests/conformance/godriver)")
	clients := flag.String("clients", "go,java,python,typescript", "which clients, comma separated")
	callers := flag.Int("callers", 64, "callers of the throughput rounds")
	dur := flag.Duration("duration", 3*time.Second, "length of one throughput round")
	rounds := flag.Int("rounds", 3, "throughput rounds, client and plain in turn")
	flag.Parse()
	if err := run(*bin, *goDriver, strings.Split(*clients, ","), *callers, *dur, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "clientsbench:", err)
		os.Exit(1)
	}
}

// result is one client's figures.
type result struct {
	name                   string
	clientRate, plainRate  float64 // calls/s with many callers
	clientP50, plainP50    float64 // µs, one caller
	clientFail, plainFails int64
}

func run(bin, goDriver string, names []string, callers int, dur time.Duration, rounds int) error {
	dir, err := os.MkdirTemp("", "clientsbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	addr, stop, err := startNode(bin, dir)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("one node at %s (standalone); per client, after 2 s of warm-up each way: %d rounds of %s with %d callers, then one caller for 0.5 s %d times, client and plain GET /id in turn; medians\n\n",
		addr, rounds, dur, callers, oneCallerTurns)
	var results []result
	for _, name := range names {
		name = strings.TrimSpace(name)
		r, err := benchClient(name, goDriver, addr, callers, dur, rounds)
		if err != nil {
			fmt.Fprintf(os.Stderr, "clientsbench: %s: %v\n", name, err)
			continue
		}
		results = append(results, r)
	}
	fmt.Printf("| client | %d callers: client IDs/s | plain GET /id IDs/s | ratio | one caller: client p50 | plain p50 | added |\n", callers)
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range results {
		fmt.Printf("| %s | %.0f | %.0f | %.1fx | %.0f µs | %.0f µs | %+.0f µs |\n", r.name, r.clientRate, r.plainRate,
			r.clientRate/r.plainRate, r.clientP50, r.plainP50, r.clientP50-r.plainP50)
	}
	for _, r := range results {
		if r.clientFail+r.plainFails > 0 {
			fmt.Printf("%s: %d failed client calls, %d failed plain calls\n", r.name, r.clientFail, r.plainFails)
		}
	}
	if len(results) < len(names) {
		return errors.New("some clients could not be measured (above)")
	}
	return nil
}

func startNode(bin, dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--worker-id", "1", "--listen", addr, "--cache-file", filepath.Join(dir, "cache.json"), "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for i := 0; i < 300; i++ {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr, stop, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, errors.New("the node was not ready within 15s")
}

// driver is a conformance driver process.
type driver struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	seq int
}

func startDriver(name, goDriver string) (*driver, error) {
	var cmd *exec.Cmd
	if name == "go" {
		if goDriver == "" {
			return nil, errors.New("no --godriver")
		}
		cmd = exec.Command(goDriver)
	} else {
		dir := filepath.Join("clients", name)
		if out, err := exec.Command("make", "-s", "-C", dir, "build").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("make -C %s build: %v\n%s", dir, err, out)
		}
		cmd = exec.Command(filepath.Join(dir, "conformance", "driver"))
		cmd.Dir = dir
		cmd.Path = "conformance/driver"
		cmd.Args[0] = "conformance/driver"
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &driver{cmd: cmd, in: in, out: sc}, nil
}

func (d *driver) do(req map[string]any) (map[string]any, error) {
	d.seq++
	req["seq"] = d.seq
	b, _ := json.Marshal(req)
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for d.out.Scan() {
		var a map[string]any
		if err := json.Unmarshal(d.out.Bytes(), &a); err != nil {
			return nil, fmt.Errorf("answer %q: %v", d.out.Text(), err)
		}
		if _, ok := a["event"]; ok {
			continue
		}
		if e, ok := a["error"]; ok {
			return nil, fmt.Errorf("%v: %v", req["op"], e)
		}
		return a, nil
	}
	return nil, fmt.Errorf("driver exited: %v", d.out.Err())
}

func (d *driver) close() {
	d.in.Close()
	_ = d.cmd.Wait()
}

func num(a map[string]any, k string) float64 { f, _ := a[k].(float64); return f }

func benchClient(name, goDriver, addr string, callers int, dur time.Duration, rounds int) (result, error) {
	r := result{name: name}
	d, err := startDriver(name, goDriver)
	if err != nil {
		return r, err
	}
	defer d.close()
	if _, err := d.do(map[string]any{"op": "open", "config": map[string]any{"nodes": []string{addr}}}); err != nil {
		return r, err
	}
	bench := func(mode string, threads int, ms int64) (map[string]any, error) {
		return d.do(map[string]any{"op": "bench", "mode": mode, "node": addr, "threads": threads, "duration_ms": ms, "warmup_ms": 200})
	}
	// Warm both paths first (JIT compilers, connection pools), then
	// throughput rounds, then one caller in many short alternations, so that
	// both sides of each figure see the same machine.
	for _, mode := range []string{"client", "plain"} {
		if _, err := bench(mode, callers, 2000); err != nil {
			return r, err
		}
	}
	var cp, pp, cr, pr []float64
	for range rounds {
		for _, mode := range []string{"client", "plain"} {
			many, err := bench(mode, callers, dur.Milliseconds())
			if err != nil {
				return r, err
			}
			rate := num(many, "calls") / num(many, "seconds")
			if mode == "client" {
				cr = append(cr, rate)
				r.clientFail += int64(num(many, "failed"))
			} else {
				pr = append(pr, rate)
				r.plainFails += int64(num(many, "failed"))
			}
		}
	}
	for range oneCallerTurns {
		for _, mode := range []string{"client", "plain"} {
			one, err := bench(mode, 1, 500)
			if err != nil {
				return r, err
			}
			if mode == "client" {
				cp = append(cp, num(one, "p50_us"))
				r.clientFail += int64(num(one, "failed"))
			} else {
				pp = append(pp, num(one, "p50_us"))
				r.plainFails += int64(num(one, "failed"))
			}
		}
	}
	r.clientP50, r.plainP50, r.clientRate, r.plainRate = median(cp), median(pp), median(cr), median(pr)
	return r, nil
}

// oneCallerTurns is how many times one caller's latency is measured each
// way, in turn (odd: the median is one of them).
const oneCallerTurns = 7

// median is the middle value (the lower middle of an even count).
func median(v []float64) float64 {
	slices.Sort(v)
	return v[(len(v)-1)/2]
}
