package ctl

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxProbeBody bounds how much of a failing answer probe prints.
const maxProbeBody = 4096

// probe is "snowflakectl probe <url>": a health check for images without a
// shell or curl (docker/Dockerfile's HEALTHCHECK probes /readyz). It GETs the
// URL within --timeout (default 2s) and exits 0 on a 2xx answer, 1 on any
// other answer or error (with the status and body, or the error, on
// stderr), 2 for bad arguments. It follows no redirect.
func probe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("probe", usages["probe"], stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "bound on the whole request")
	quiet := fs.Bool("quiet", false, "print nothing on success")
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
	u, err := url.Parse(pos[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "snowflakectl probe: %q is not an http(s) URL with a host\n", pos[0])
		return exitUsage
	}
	resp, err := probeClient(*timeout).Get(u.String())
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl probe: %v\n", err)
		return exitFailure
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl probe: %s: read body: %v\n", resp.Status, err)
		return exitFailure
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "snowflakectl probe: %s: %s\n", resp.Status, strings.TrimSpace(string(body)))
		return exitFailure
	}
	if !*quiet {
		fmt.Fprintf(stdout, "%s: %s\n", resp.Status, strings.TrimSpace(string(body)))
	}
	return exitOK
}

// probeClient is the HTTP client of probe and of status's /readyz
// requests: the whole request within timeout, no proxy, no redirect
// followed, no connection kept.
func probeClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
}
