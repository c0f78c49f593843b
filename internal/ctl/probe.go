package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// maxProbeBody bounds how much of a failing answer probe prints.
const maxProbeBody = 4096

// shapeRE matches the numbers, durations and hex session IDs of an answer
// (9, 2.3s, 900ms, 0x1a2b): probe --wait reports an answer again only when
// more than these changed (a countdown in a detail is the same answer).
var shapeRE = regexp.MustCompile(`[0-9][0-9a-zµ.]*`)

// probeInterval is how often probe --wait asks again; probeReportEvery
// bounds how often it reports a changed answer while it waits.
var (
	probeInterval    = 200 * time.Millisecond
	probeReportEvery = 5 * time.Second
)

// probe is "snowflakectl probe <url>": a health check for images without a
// shell or curl (docker/Dockerfile's HEALTHCHECK probes /readyz). It GETs the
// URL within --timeout (default 2s) and exits 0 on a 2xx answer, 1 on any
// other answer or error (with the status and body, or the error, on
// stderr), 2 for bad arguments. It follows no redirect. With --wait D it
// asks again every 200 ms until a 2xx answer or D has passed, so a script
// can wait for a node to come into service: one line on stderr when it
// starts waiting (with what the node waits for), one when it is done, and
// between them a changed answer at most every 5 s (probeWait).
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
	return probeWait(c, u.String(), *wait, *quiet, stdout, stderr)
}

// probeWait asks url until a 2xx answer or wait has passed (once when
// wait is 0). While it waits it says so on stderr once, with the answer
// (what the node waits for), then only an answer that changed in more than
// its numbers (a countdown does not count), at most every
// probeReportEvery, and one line when it is done.
func probeWait(c *http.Client, url string, wait time.Duration, quiet bool, stdout, stderr io.Writer) int {
	start := time.Now()
	var lastShape string
	var lastReport time.Time
	for {
		answer, ok := probeOnce(c, url)
		waited := time.Since(start)
		if ok {
			if !lastReport.IsZero() {
				fmt.Fprintf(stderr, "snowflakectl probe: 2xx after %.1fs\n", waited.Seconds())
			}
			if !quiet {
				fmt.Fprintln(stdout, answer)
			}
			return exitOK
		}
		if waited+probeInterval > wait {
			if wait > 0 {
				fmt.Fprintf(stderr, "snowflakectl probe: no 2xx answer within --wait %s; the last: %s\n", wait, answer)
			} else {
				fmt.Fprintf(stderr, "snowflakectl probe: %s\n", answer)
			}
			return exitFailure
		}
		shape := shapeRE.ReplaceAllString(answer, "N")
		switch {
		case lastReport.IsZero():
			fmt.Fprintf(stderr, "snowflakectl probe: waiting up to %s for a 2xx answer from %s; now: %s\n", wait, url, answer)
			lastShape, lastReport = shape, time.Now()
		case shape != lastShape && time.Since(lastReport) >= probeReportEvery:
			fmt.Fprintf(stderr, "snowflakectl probe: after %.1fs: %s\n", waited.Seconds(), answer)
			lastShape, lastReport = shape, time.Now()
		}
		clock.Sleep(context.Background(), probeInterval)
	}
}

// probeOnce GETs url and says what came back: "STATUS: body" (the body
// trimmed and bounded) or the error, and whether it was a 2xx answer.
func probeOnce(c *http.Client, url string) (string, bool) {
	resp, err := c.Get(url)
	if err != nil {
		if strings.HasPrefix(url, "http://") && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			// A node serving HTTPS closes a plain-HTTP request without a
			// word; say what a bare EOF does not.
			return err.Error() + " (the node closed the connection without an answer: if it serves HTTPS, --tls-cert, use https:// and --tls-ca)", false
		}
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
