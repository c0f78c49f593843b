package ctl

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// maxProbeBody bounds how much of a failing answer probe prints.
const maxProbeBody = 4096

// digits matches the numbers of an answer: probe --wait prints an answer
// again only when more than its numbers changed (a countdown in a detail).
var digits = regexp.MustCompile(`[0-9]+`)

// probeInterval is how often probe --wait asks again.
const probeInterval = 200 * time.Millisecond

// probe is "snowflakectl probe <url>": a health check for images without a
// shell or curl (docker/Dockerfile's HEALTHCHECK probes /readyz). It GETs the
// URL within --timeout (default 2s) and exits 0 on a 2xx answer, 1 on any
// other answer or error (with the status and body, or the error, on
// stderr), 2 for bad arguments. It follows no redirect. With --wait D it
// asks again every 200 ms until a 2xx answer or D has passed, printing
// each new answer on stderr as it comes (one that differs from the one
// before in more than its numbers) (what a starting node waits for),
// so a script can wait for a node to come into service.
func probe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("probe", usages["probe"], stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "bound on each request")
	wait := fs.Duration("wait", 0, "ask again every 200ms until a 2xx answer, for at most this long (0: ask once)")
	quiet := fs.Bool("quiet", false, "print nothing on success")
	var tf tlsFlags
	tf.register(fs)
	pos, code, ok := parse(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "snowflakectl probe: want exactly one URL, e.g. probe http://127.0.0.1:8080/readyz")
		return exitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "snowflakectl probe: --timeout %s must be positive\n", *timeout)
		return exitUsage
	}
	if *wait < 0 {
		fmt.Fprintf(stderr, "snowflakectl probe: --wait %s must not be negative\n", *wait)
		return exitUsage
	}
	u, err := url.Parse(pos[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "snowflakectl probe: %q is not an http(s) URL with a host\n", pos[0])
		return exitUsage
	}
	tlsCfg, err := tf.config()
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl probe: %v\n", err)
		return exitUsage
	}
	c := probeClient(*timeout, tlsCfg)
	start := time.Now()
	last := ""
	for {
		answer, ok := probeOnce(c, u.String())
		if ok {
			if !*quiet {
				fmt.Fprintln(stdout, answer)
			}
			return exitOK
		}
		waited := time.Since(start)
		if waited+probeInterval > *wait {
			if *wait > 0 {
				fmt.Fprintf(stderr, "snowflakectl probe: no 2xx answer within --wait %s; the last: %s\n", *wait, answer)
			} else {
				fmt.Fprintf(stderr, "snowflakectl probe: %s\n", answer)
			}
			return exitFailure
		}
		if shape := digits.ReplaceAllString(answer, "0"); shape != last {
			fmt.Fprintf(stderr, "snowflakectl probe: after %.1fs: %s\n", waited.Seconds(), answer)
			last = shape
		}
		clock.Sleep(context.Background(), probeInterval)
	}
}

// probeOnce GETs url and says what came back: "STATUS: body" (the body
// trimmed and bounded) or the error, and whether it was a 2xx answer.
func probeOnce(c *http.Client, url string) (string, bool) {
	resp, err := c.Get(url)
	if err != nil {
		return err.Error(), false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		return fmt.Sprintf("%s: read body: %v", resp.Status, err), false
	}
	answer := fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	return answer, resp.StatusCode >= 200 && resp.StatusCode <= 299
}

// probeClient is the HTTP client of probe and of status's /readyz
// requests: the whole request within timeout, no proxy, no redirect
// followed, no connection kept; https:// URLs with tlsCfg (nil: the
// defaults).
func probeClient(timeout time.Duration, tlsCfg *tls.Config) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true, TLSClientConfig: tlsCfg},
	}
}
