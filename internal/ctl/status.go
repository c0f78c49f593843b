package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
)

// statusJSON is the --json form of "snowflakectl status".
type statusJSON struct {
	Cluster  string                   `json:"cluster"`
	Settings coordinator.Settings     `json:"settings"`
	Workers  []coordinator.WorkerInfo `json:"workers"`
}

// status is "snowflakectl status": the worker table of a cluster, read from
// ZooKeeper (coordinator.ReadCluster): worker ID, node key, address, lease
// held, in service, last report age and fence, plus any problem with the
// znodes. It exits 1 when ZooKeeper cannot be read and 2 for bad flags.
func status(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", usages["status"], stderr)
	zkFlag := fs.String("zk", "", "ZooKeeper servers host1:2181,host2:2181 (required)")
	cluster := fs.String("cluster", "default", "cluster name (ZooKeeper path /snowflaked/<cluster>)")
	auth := fs.String("zk-auth", "", "user:password for digest ACLs (reading needs none)")
	asJSON := fs.Bool("json", false, `print {"cluster","workers":[…]} as JSON`)
	timeout := fs.Duration("timeout", 10*time.Second, "bound on connecting to and reading ZooKeeper")
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
	}
	settings, rows, err := coordinator.ReadCluster(context.Background(), splitList(*zkFlag), *cluster, *auth, *timeout)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl status: %v\n", err)
		if errors.Is(err, coordinator.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFailure
	}
	if rows == nil {
		rows = []coordinator.WorkerInfo{}
	}
	if *asJSON {
		return writeJSON(stdout, stderr, "snowflakectl status", statusJSON{Cluster: *cluster, Settings: settings, Workers: rows})
	}
	writeStatusTable(stdout, *cluster, rows, time.Now())
	fmt.Fprintf(stdout, "layout %s; worker IDs %s; recycle-after %s\n", settings.Layout.Describe(), settings.WorkerIDs, settings.RecycleAfter)
	return exitOK
}

// writeStatusTable prints the rows as an aligned table.
func writeStatusTable(w io.Writer, cluster string, rows []coordinator.WorkerInfo, now time.Time) {
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
	fmt.Fprintln(tw, "WORKER\tNODE KEY\tADDRESS\tLEASE\tIN SERVICE\tLAST REPORT\tZK FENCE (HEADROOM)\tTOKEN\tPROBLEM")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", worker, dash(r.NodeKey), dash(r.Addr), lease, yesNo(r.InService),
			reportAge(r.LastReportAgeMs), fenceText(r.Fence, now), dash(shortToken(r.Token)), dash(problem))
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

// fenceText shows a fence (unix ms) as UTC time and its distance from now.
func fenceText(ms int64, now time.Time) string {
	if ms <= 0 {
		return "-"
	}
	t := time.UnixMilli(ms).UTC()
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
