package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// maxBoundsAnswer bounds the answer bounds reads.
const maxBoundsAnswer = 64 << 10

// bounds is "snowflakectl bounds --from T --to T [--node URL]": the
// smallest and largest ID (and UUID) of the node's layout whose time lies
// in [from, to), from the node's GET /bounds. from and to go to the node
// as written (RFC 3339 or Unix milliseconds): it reads them and says what
// is wrong with them. It prints the effective range and the bounds, or
// with --json the node's answer. Exit 0, 1 when the node cannot be asked,
// 2 for bad arguments (the node's 400 included).
func bounds(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bounds", usages["bounds"], stderr)
	from := fs.String("from", "", "start of the range: RFC 3339 (2026-01-02T15:04:05Z, an offset or a fraction allowed) or Unix milliseconds (required)")
	to := fs.String("to", "", "end of the range, excluded: as --from (required)")
	node := fs.String("node", "http://127.0.0.1:8080", "the node to ask: an http(s) URL")
	asJSON := fs.Bool("json", false, "print the node's JSON answer")
	timeout := fs.Duration("timeout", 2*time.Second, "bound on the request")
	var tf tlsFlags
	tf.register(fs)
	pos, code, ok := parse(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "snowflakectl bounds: "+format+"\n", a...)
		return code
	}
	switch {
	case len(pos) > 0:
		return fail(exitUsage, "unexpected argument %q: give the range with --from and --to", pos[0])
	case *from == "" || *to == "":
		return fail(exitUsage, "--from and --to are required, e.g. bounds --from 2026-01-02T00:00:00Z --to 2026-01-03T00:00:00Z")
	case *timeout <= 0:
		return fail(exitUsage, "--timeout %s must be positive", *timeout)
	}
	u, err := url.Parse(*node)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail(exitUsage, "--node %q is not an http(s) URL with a host, e.g. http://127.0.0.1:8080", *node)
	}
	tlsCfg, err := tf.config()
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + wire.PathBounds
	u.RawQuery = url.Values{wire.ParamFrom: {*from}, wire.ParamTo: {*to}}.Encode()
	resp, err := probeClient(*timeout, tlsCfg).Get(u.String())
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBoundsAnswer))
	if err != nil {
		return fail(exitFailure, "%s: read the answer: %v", u.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e wire.ErrorBody
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
			msg = e.Error.Code + ": " + e.Error.Message
		}
		if resp.StatusCode == http.StatusBadRequest {
			return fail(exitUsage, "%s", msg)
		}
		return fail(exitFailure, "%s: %s: %s", u.Host, resp.Status, msg)
	}
	var b wire.BoundsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return fail(exitFailure, "%s: not a /bounds answer: %v", u.Host, err)
	}
	if *asJSON {
		fmt.Fprintln(stdout, strings.TrimSpace(string(body)))
		return exitOK
	}
	fmt.Fprintf(stdout, "from      %s  (%s)\n", b.From, strconv.FormatInt(b.FromMS, 10))
	fmt.Fprintf(stdout, "to        %s  (%s, excluded)\n", b.To, strconv.FormatInt(b.ToMS, 10))
	fmt.Fprintf(stdout, "min_id    %s\n", b.MinID)
	fmt.Fprintf(stdout, "max_id    %s\n", b.MaxID)
	if b.MinUUID != "" {
		fmt.Fprintf(stdout, "min_uuid  %s\n", b.MinUUID)
		fmt.Fprintf(stdout, "max_uuid  %s\n", b.MaxUUID)
	}
	return exitOK
}
