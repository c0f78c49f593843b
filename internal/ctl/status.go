package ctl

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// statusJSON is the --json form of "snowflakectl status".
type statusJSON struct {
	Cluster  string               `json:"cluster"`
	Settings coordinator.Settings `json:"settings"`
	Workers  []statusRow          `json:"workers"`
}

// statusRow is one row of "snowflakectl status": what ZooKeeper holds for
// a node key, and why the node is out of service.
type statusRow struct {
	coordinator.WorkerInfo
	// Reason says why the node is not in service ("" when it is): stopped,
	// retired, no lease, not reporting, and what its /readyz answered (the
	// reason it gives, unreachable when it did not answer, ready).
	Reason string `json:"reason,omitempty"`
	// Dead: the node has no lease or has not reported for longer than
	// deadReports report intervals, and its /readyz did not answer (or was
	// not asked). A clean stop or a retired node key is not dead.
	Dead bool `json:"dead,omitempty"`
}

// deadReports is how many report intervals without a report make a node
// not reporting.
const deadReports = 3

// maxProbes bounds the /readyz requests status makes at once.
const maxProbes = 32

// Reasons status gives for a node out of service (statusRow.Reason), with
// the reason its /readyz answered.
const (
	reasonStopped      = "stopped"       // its last write was a clean stop's final fence
	reasonRetired      = "retired"       // snowflakectl node retire freed its worker ID
	reasonNoLease      = "no lease"      // leases/<worker-id> is not held by it
	reasonNotReporting = "not reporting" // lease held, last report older than deadReports intervals
	reasonUnreachable  = "unreachable"   // its /readyz did not answer within --probe-timeout
	reasonReady        = "ready"         // its /readyz answered 2xx (its alive znode was missing when read)
)

// status is "snowflakectl status": the worker table of a cluster, read from
// ZooKeeper (coordinator.Admin.ReadCluster): worker ID, node key, address,
// version, lease held, in service, why not (explainRows: from ZooKeeper's
// data and each such node's /readyz), last report age and fence, plus any
// problem with the znodes. It exits 1 when ZooKeeper cannot be read and 2
// for bad flags.
func status(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", usages["status"], stderr)
	zkFlag := fs.String("zk", "", "ZooKeeper servers host1:2181,host2:2181 (required)")
	cluster := fs.String("cluster", "default", "cluster name (ZooKeeper path /snowflaked/<cluster>)")
	auth := fs.String("zk-auth", "", "user:password for digest ACLs (reading needs none)")
	zkTLS := addZKTLSFlags(fs)
	asJSON := fs.Bool("json", false, `print {"cluster","workers":[…]} as JSON`)
	timeout := fs.Duration("timeout", 10*time.Second, "bound on connecting to and reading ZooKeeper")
	probeTimeout := fs.Duration("probe-timeout", time.Second, "bound on asking each node out of service for its /readyz reason; 0 asks none")
	interval := fs.Duration("report-interval", coordinator.DefaultReportInterval, fmt.Sprintf("the nodes' --report-interval: no report for %d times this is not reporting", deadReports))
	var tf tlsFlags
	tf.register(fs)
	pos, code, ok := parse(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case len(pos) > 0:
		fmt.Fprintf(stderr, "snowflakectl status: unexpected arguments %q\n", pos)
		return exitUsage
	case strings.TrimSpace(*zkFlag) == "":
		fmt.Fprintln(stderr, "snowflakectl status: --zk is required (e.g. --zk 127.0.0.1:2181)")
		return exitUsage
	case *timeout <= 0:
		fmt.Fprintf(stderr, "snowflakectl status: --timeout %s must be positive\n", *timeout)
		return exitUsage
	case *probeTimeout < 0:
		fmt.Fprintf(stderr, "snowflakectl status: --probe-timeout %s must not be negative\n", *probeTimeout)
		return exitUsage
	case *interval <= 0:
		fmt.Fprintf(stderr, "snowflakectl status: --report-interval %s must be positive\n", *interval)
		return exitUsage
	}
	opts, err := zkTLS.adminOptions()
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl status: %v\n", err)
		return exitUsage
	}
	tlsCfg, err := tf.config()
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl status: %v\n", err)
		return exitUsage
	}
	adm, err := coordinator.NewAdmin(splitList(*zkFlag), *auth, *timeout, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl status: %v\n", err)
		return exitUsage
	}
	defer adm.Close()
	settings, rows, err := adm.ReadCluster(context.Background(), *cluster)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl status: %v\n", err)
		if errors.Is(err, coordinator.ErrInvalidConfig) {
			return exitUsage
		}
		if !errors.Is(err, coordinator.ErrNoCluster) {
			// ZooKeeper does not answer: the nodes still do.
			fmt.Fprintln(stderr, "snowflakectl status: without ZooKeeper, ask each node: snowflakectl probe http://HOST:PORT/readyz (why it is out of service, or what it waits for), or curl its /readyz and /clock (docs/operations.md, No node in service)")
		}
		return exitFailure
	}
	out := explainRows(rows, *interval, readyzProber(*probeTimeout, tlsCfg))
	if *asJSON {
		return writeJSON(stdout, stderr, "snowflakectl status", statusJSON{Cluster: *cluster, Settings: settings, Workers: out})
	}
	writeStatusTable(stdout, *cluster, out, time.Now())
	fmt.Fprintf(stdout, "layout %s; worker IDs %s; recycle-after %s\n", settings.Layout.Describe(), settings.WorkerIDs, settings.RecycleAfter)
	return exitOK
}

// explainRows gives each row out of service its reason (see statusRow):
// from ZooKeeper's data, then from what ask (nil: ask nothing) learns
// from the node's /readyz, asking at most maxProbes nodes at once. It
// never returns nil.
func explainRows(rows []coordinator.WorkerInfo, interval time.Duration, ask func(addr string) string) []statusRow {
	out := make([]statusRow, len(rows))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxProbes)
	for i, r := range rows {
		out[i].WorkerInfo = r
		var why []string
		switch {
		case r.InService:
			continue
		case r.Stopped:
			out[i].Reason = reasonStopped
			continue
		case r.Retired > 0:
			out[i].Reason = reasonRetired
			continue
		case !r.LeaseHeld || r.LeaseHolder != "":
			why = append(why, reasonNoLease)
		case r.LastReportAgeMs > deadReports*interval.Milliseconds():
			why = append(why, reasonNotReporting)
		}
		out[i].Dead = len(why) > 0
		out[i].Reason = strings.Join(why, "; ")
		// The reason the node wrote with its last report stands in for
		// what it would answer when it is not asked or does not answer.
		reported := ""
		if r.ReportedReason != "" && !out[i].Dead {
			reported = r.ReportedReason + " (reported)"
		}
		if ask == nil || r.Addr == "" {
			if reported != "" {
				out[i].Reason = reported
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			answer := ask(r.Addr)
			if answer != reasonUnreachable {
				out[i].Dead = false // it answers: the process lives
			}
			if answer == reasonUnreachable && reported != "" {
				answer += "; " + reported
			}
			out[i].Reason = strings.Join(append(why, answer), "; ")
		}()
	}
	wg.Wait()
	return out
}

// readyzBody is what status reads of a /readyz answer.
type readyzBody struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// readyzProber returns what explainRows asks a node with: one GET of
// http://addr/readyz (https:// with tlsCfg) within timeout, answering the reason the node gives
// (its state when it gives none), reasonReady for a 2xx, "readyz: <status>"
// for another answer that names no state, reasonUnreachable when none came.
// A zero timeout gives nil: ask nothing.
func readyzProber(timeout time.Duration, tlsCfg *tls.Config) func(addr string) string {
	if timeout <= 0 {
		return nil
	}
	client := probeClient(timeout, tlsCfg)
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	return func(addr string) string {
		resp, err := client.Get((&url.URL{Scheme: scheme, Host: addr, Path: wire.PathReadyz}).String())
		if err != nil {
			return reasonUnreachable
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			return reasonReady
		}
		var b readyzBody
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxProbeBody)).Decode(&b); err == nil {
			switch {
			case b.Reason != "":
				return b.Reason
			case b.State != "":
				return b.State
			}
		}
		return "readyz: " + resp.Status
	}
}

// writeStatusTable prints the rows as an aligned table.
func writeStatusTable(w io.Writer, cluster string, rows []statusRow, now time.Time) {
	inService := 0
	for _, r := range rows {
		if r.InService {
			inService++
		}
	}
	fmt.Fprintf(w, "cluster %q: %d worker(s), %d in service\n", cluster, len(rows), inService)
	if len(rows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tNODE KEY\tADDRESS\tVERSION\tLEASE\tIN SERVICE\tREASON\tLAST REPORT\tZK FENCE (HEADROOM)\tTOKEN\tPROBLEM")
	for _, r := range rows {
		worker := strconv.FormatInt(r.WorkerID, 10)
		if r.WorkerID < 0 {
			worker = "-"
		}
		lease := yesNo(r.LeaseHeld)
		if r.LeaseHolder != "" {
			lease += " (" + r.LeaseHolder + ")"
		}
		problem := r.Problem
		if r.Retired > 0 && problem == "" {
			problem = "retired (snowflakectl node retire): its worker ID may be recycled now"
		}
		reason := r.Reason
		if r.Dead {
			reason = "DEAD: " + reason
		}
		report := reportAge(r.LastReportAgeMs)
		if note := r.ClockNote(); note != "" {
			report += " (" + note + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", worker, dash(r.NodeKey), dash(r.Addr), dash(r.Version), lease,
			yesNo(r.InService), dash(reason), report, fenceText(r.Fence, now), dash(shortToken(r.Token)), dash(problem))
	}
	tw.Flush()
}

// shortToken shows the first 8 hex digits of an instance token, enough to
// tell claims apart.
func shortToken(t string) string { return t[:min(len(t), 8)] }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reportAge shows a last-report age in ms ("-1": never).
func reportAge(ms int64) string {
	if ms < 0 {
		return "never"
	}
	return roundAge(time.Duration(ms)*time.Millisecond) + " ago"
}

// fenceText shows a fence as UTC time and its distance from now.
func fenceText(fence snowflake.UnixMilli, now time.Time) string {
	if fence <= 0 {
		return "-"
	}
	t := fence.Time()
	d := t.Sub(now)
	rel := "in " + roundAge(d)
	if d < 0 {
		rel = roundAge(-d) + " ago"
	}
	return t.Format(timeFormat) + " (" + rel + ")"
}

// roundAge rounds a duration for display: ms below 1s, 0.1s below a minute,
// whole seconds above.
func roundAge(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
