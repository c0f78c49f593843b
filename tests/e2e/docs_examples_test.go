package e2e

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// The addresses the docs' examples use: those `make run` starts (its
// ZooKeeper on 21810, nodes on 8081-8083) and a single node on 8080.
var docsAddrs = []string{"127.0.0.1:21810", "localhost:8080", "127.0.0.1:8080", "localhost:8081", "127.0.0.1:8081", "localhost:8082", "127.0.0.1:8082"}

// example is one command of a docs code block, with the output the docs
// show after it (console blocks only).
type example struct {
	file, line string
	want       []string
	chaos      bool // of a block that uses the chaos build's endpoints
}

// docExamples returns the runnable commands of a document: snowflakectl
// lines of sh blocks, and the snowflakectl and curl commands of console
// blocks with their shown output. Lines with placeholders (<id>, [opt]) or
// other hosts (zk1:2181) are not runnable as written and are skipped.
func docExamples(t *testing.T, rel string) []example {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	blocks := regexp.MustCompile("(?s)```(sh|console)\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	for _, blk := range blocks {
		chaos := strings.Contains(blk[2], "/debug/chaos/")
		for _, l := range strings.Split(blk[2], "\n") {
			if blk[1] == "console" {
				if cmd, ok := strings.CutPrefix(l, "$ "); ok {
					out = append(out, example{file: rel, line: cmd, chaos: chaos})
				} else if len(out) > 0 && strings.TrimSpace(l) != "" {
					out[len(out)-1].want = append(out[len(out)-1].want, stripComment(l))
				}
				continue
			}
			if strings.HasPrefix(l, "bin/snowflakectl ") {
				out = append(out, example{file: rel, line: l, chaos: chaos})
			}
		}
	}
	runnable := out[:0]
	for _, e := range out {
		if strings.ContainsAny(stripComment(e.line), "<[") || strings.Contains(e.line, "zk1:") {
			continue
		}
		runnable = append(runnable, e)
	}
	return runnable
}

// ipv4RE matches dotted IPv4 addresses.
var ipv4RE = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)

// nonLoopback returns the first IPv4 address of line outside 127.0.0.0/8
// ("" when there is none).
func nonLoopback(line string) string {
	for _, ip := range ipv4RE.FindAllString(line, -1) {
		if !strings.HasPrefix(ip, "127.") {
			return ip
		}
	}
	return ""
}

// stripComment drops a trailing "  # comment" outside quotes.
func stripComment(l string) string {
	quote := byte(0)
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && i > 0 && l[i-1] == ' ':
			return strings.TrimRight(l[:i], " ")
		}
	}
	return strings.TrimRight(l, " ")
}

// words splits a command line as a shell would for these examples: spaces,
// single and double quotes.
func words(l string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

var digitsRE = regexp.MustCompile(`[0-9]+`)

// sameShape compares a shown output line with a real one: equal, or equal
// once every number is replaced (IDs and times differ from run to run).
func sameShape(want, got string, exact bool) bool {
	if want == got {
		return true
	}
	return !exact && digitsRE.ReplaceAllString(want, "N") == digitsRE.ReplaceAllString(got, "N")
}

// Every command the docs show runs as written against a cluster like the
// one `make run` starts (the documented addresses rewritten to the
// harness's), and where the docs show its output the real output matches:
// exactly for what does not change between runs (decoding an ID, creating
// a tag), with numbers free otherwise. The documents share one cluster
// ("default", as the examples assume), as they do when a reader runs them
// one after the other against `make run`: a tag one creates, another must
// not create again. A document that gives the command starting the single
// node on 8080 (`bin/snowflaked ...` in a sh block) gets that node, started
// as written (on a free port), for 8080, and its chaos build, with the same
// flags, for the examples of the chaos endpoints.
func TestIntegration_DocsExamplesRunAsWritten(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	var nodes []*proc
	for i := range 2 {
		p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "default", fmt.Sprintf("docs-%d", i)))
		p.waitReadyz(http.StatusOK, readyTimeout)
		nodes = append(nodes, p)
	}
	// segment-mode.md before operations.md: the order a reader meets them
	// in (README's table), and the one in which both once created "orders".
	for _, rel := range []string{"docs/api.md", "docs/client.md", "docs/leaf.md", "docs/segment-mode.md", "docs/operations.md", "docs/security.md"} {
		t.Run(strings.TrimSuffix(filepath.Base(rel), ".md"), func(t *testing.T) {
			examples := docExamples(t, rel)
			if len(examples) == 0 {
				t.Fatalf("%s: no runnable example found", rel)
			}
			real := map[string]string{
				"127.0.0.1:21810": zk.ConnectString(),
				"localhost:8080":  nodes[0].addr, "127.0.0.1:8080": nodes[0].addr,
				"localhost:8081": nodes[0].addr, "127.0.0.1:8081": nodes[0].addr,
				"localhost:8082": nodes[1].addr, "127.0.0.1:8082": nodes[1].addr,
			}
			standalone := standaloneCommand(t, rel)
			if rel == "docs/api.md" && standalone == nil {
				t.Fatalf("%s: no sh block gives the command that starts the single node on 8080 its examples talk to", rel)
			}
			var single, chaos *proc
			if standalone != nil {
				single = startDocumented(t, standalone, false)
				real["localhost:8080"], real["127.0.0.1:8080"] = single.addr, single.addr
			}
			for _, e := range examples {
				line := stripComment(e.line)
				target := real
				if e.chaos {
					if standalone == nil {
						t.Fatalf("%s: `%s`: the chaos build's example needs the documented standalone command", rel, e.line)
					}
					if chaos == nil {
						// As a reader does: stop the node on 8080, start the
						// chaos build there instead.
						single.signal(syscall.SIGTERM)
						if code := single.exitCode(); code != 0 {
							t.Fatalf("%s: the documented node exited %d on SIGTERM:\n%s", rel, code, single.Output())
						}
						chaos = startDocumented(t, standalone, true)
					}
					target = map[string]string{"localhost:8080": chaos.addr, "127.0.0.1:8080": chaos.addr}
				}
				for _, a := range docsAddrs {
					if r, ok := target[a]; ok {
						line = strings.ReplaceAll(line, a, r)
					}
				}
				// Loads run for a second, not the documented duration.
				line = regexp.MustCompile(`--duration [0-9]+s`).ReplaceAllString(line, "--duration 1s")
				if ip := nonLoopback(line); ip != "" {
					t.Errorf("%s: `%s` would reach %s: a runnable example stays on 127.0.0.0/8 (make it a text block, or use make run's addresses)", rel, e.line, ip)
					continue
				}
				args := words(line)
				var got string
				switch args[0] {
				case "bin/snowflakectl":
					code, out, errOut := ctl(t, args[1:]...)
					if code != 0 {
						t.Errorf("%s: `%s` exited %d: %s%s", rel, e.line, code, out, errOut)
						continue
					}
					got = out
				case "curl":
					got = curl(t, args[1:])
				default:
					t.Fatalf("%s: `%s`: no way to run %s", rel, e.line, args[0])
				}
				exact := args[0] != "curl" && (args[1] == "decode" || args[1] == "segment" && args[2] == "create") ||
					strings.Contains(line, "/decode/")
				checkShown(t, e, got, exact)
				if e.chaos && strings.Contains(line, "/debug/chaos/clock?offset=-") {
					// The docs say the watcher sees the step within 10 ms.
					chaos.waitReadyz(http.StatusServiceUnavailable, time.Second)
				}
			}
		})
	}
}

// standaloneCommand returns the words of the `bin/snowflaked ...` line of
// a document's sh blocks (nil without one).
func standaloneCommand(t *testing.T, rel string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	for _, blk := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		for _, l := range strings.Split(blk[1], "\n") {
			if strings.HasPrefix(l, "bin/snowflaked ") {
				return words(stripComment(l))
			}
		}
	}
	return nil
}

// startDocumented starts the documented standalone command (its chaos
// build when chaos) as written, on a free loopback port instead of 8080,
// in a directory of its own (the default cache file lands there), and
// waits until it is ready.
func startDocumented(t *testing.T, cmd []string, chaos bool) *proc {
	t.Helper()
	bin := binSnowflaked
	if chaos {
		bin = binChaos
	}
	p := startNode(t, bin, append(slices.Clone(cmd[1:]), "--listen", "127.0.0.1:0"))
	p.waitReadyz(http.StatusOK, readyTimeout)
	return p
}

// checkShown checks that the lines the docs show after a command come, in
// order, in its real output.
func checkShown(t *testing.T, e example, got string, exact bool) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	i := 0
	for _, w := range e.want {
		for i < len(lines) && !sameShape(w, strings.TrimRight(lines[i], " "), exact) {
			i++
		}
		if i == len(lines) {
			t.Errorf("%s: `%s` shows %q, the real output has no such line after the ones before:\n%s", e.file, e.line, w, got)
			return
		}
		i++
	}
}

// curl does what `curl -s [-i] [-X METHOD] URL` does for the docs'
// examples: the body, after the status line and the headers (sorted) with -i.
func curl(t *testing.T, args []string) string {
	t.Helper()
	url, method, head := args[len(args)-1], http.MethodGet, false
	for i := 0; i < len(args)-1; i++ {
		switch args[i] {
		case "-s":
		case "-i", "-si", "-is":
			head = true
		case "-X":
			if i+1 == len(args)-1 {
				t.Fatalf("curl -X without a method")
			}
			i++
			method = args[i]
		default:
			t.Fatalf("curl option %s: the test runs only curl -s, -i and -X", args[i])
		}
	}
	req, err := http.NewRequest(method, "http://"+url, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if !head {
		return string(body)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", resp.Proto, resp.Status)
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		for _, v := range resp.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	return b.String() + "\n" + string(body)
}
