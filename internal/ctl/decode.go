package ctl

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/uuidv7"
)

// leafEpochMilli is the epoch of Meituan Leaf's snowflake IDs (Twitter's
// epoch, 2010-11-04T01:42:54.657Z), for decode --leaf.
const leafEpochMilli = 1288834974657

// timeFormat prints decoded times: RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// decoded is the --json form of one ID, the same fields as GET /decode/{id}.
type decoded struct {
	ID          string `json:"id"`
	TimestampMs int64  `json:"timestamp_ms"`
	Time        string `json:"time"`
	WorkerID    int64  `json:"worker_id"`
	Sequence    int64  `json:"sequence"`
	Gene        *int64 `json:"gene,omitempty"`
}

// decode is "snowflakectl decode": it prints each ID's time (RFC 3339 UTC
// and milliseconds since the Unix epoch), worker ID and sequence under a layout (default, flags, or
// Leaf's with --leaf).
func decode(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("decode", usages["decode"], stderr)
	layoutFlag := fs.String("layout", snowflake.PresetDefault, "bit split time/worker/sequence, or js53")
	epochFlag := fs.String("epoch", snowflake.DefaultEpoch.Format(time.RFC3339), "epoch of the IDs, RFC 3339")
	unitFlag := fs.String("time-unit", "1ms", "length of one timestamp tick")
	geneBits := fs.Uint("gene-bits", 0, "the cluster's --gene-bits: the low bits of the sequence that hold a gene")
	leaf := fs.Bool("leaf", false, "Meituan Leaf's layout: 41/10/12, epoch 1288834974657 ms (Twitter's)")
	asJSON := fs.Bool("json", false, "print one JSON object per ID")
	ids, code, ok := parse(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(ids) == 0 {
		fmt.Fprintln(stderr, "snowflakectl decode: no ID given: snowflakectl "+usages["decode"])
		return exitUsage
	}
	if *leaf {
		var clash []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "layout" || f.Name == "epoch" || f.Name == "time-unit" {
				clash = append(clash, "--"+f.Name)
			}
		})
		if len(clash) > 0 {
			fmt.Fprintf(stderr, "snowflakectl decode: --leaf fixes the layout; drop %s\n", strings.Join(clash, ", "))
			return exitUsage
		}
		*layoutFlag, *unitFlag = snowflake.PresetDefault, "1ms"
		*epochFlag = time.UnixMilli(leafEpochMilli).UTC().Format(time.RFC3339Nano)
	}
	layout, err := snowflake.ParseLayout(*layoutFlag, *epochFlag, *unitFlag, time.Now())
	if err == nil && *geneBits > 0 {
		layout.GeneBits = *geneBits
		err = layout.Validate(time.Now())
	}
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl decode: %v\n", err)
		return exitUsage
	}
	var out []decoded
	for _, raw := range ids {
		p, err := decodeOne(layout, raw)
		if err != nil {
			fmt.Fprintf(stderr, "snowflakectl decode: %v\n", err)
			return exitUsage
		}
		out = append(out, decoded{
			ID: strconv.FormatInt(p.ID, 10), TimestampMs: p.UnixMilli(), Time: p.Time.UTC().Format(timeFormat),
			WorkerID: p.WorkerID, Sequence: p.Sequence, Gene: p.Gene,
		})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, d := range out {
			if err := enc.Encode(d); err != nil {
				fmt.Fprintf(stderr, "snowflakectl decode: %v\n", err)
				return exitFailure
			}
		}
		return exitOK
	}
	for i, d := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "id        %s\ntime      %s\nunix_ms   %d\nworker    %d\nsequence  %d\n", d.ID, d.Time, d.TimestampMs, d.WorkerID, d.Sequence)
		if d.Gene != nil {
			fmt.Fprintf(stdout, "gene      %d\n", *d.Gene)
		}
		fmt.Fprintf(stdout, "layout    %s\n", layout.Describe())
	}
	return exitOK
}

// decodeOne parses a decimal ID and decodes it, with a clear error for
// anything that is not an ID of the layout.
func decodeOne(l snowflake.Layout, raw string) (snowflake.Parts, error) {
	s := strings.TrimSpace(raw)
	if strings.Count(s, "-") == 4 { // a UUID from /uuid: the ID it was made from
		codec, err := uuidv7.NewCodec(l)
		if err != nil {
			return snowflake.Parts{}, err
		}
		u, err := uuidv7.Parse(s)
		if err != nil {
			return snowflake.Parts{}, err
		}
		id, err := codec.Decode(u)
		if err != nil {
			return snowflake.Parts{}, err
		}
		return l.Decode(id)
	}
	id, err := strconv.ParseInt(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && strings.HasPrefix(s, "-"):
		return snowflake.Parts{}, fmt.Errorf("id %q is negative", raw)
	case errors.Is(err, strconv.ErrRange):
		return snowflake.Parts{}, fmt.Errorf("id %q is too big: IDs are at most %d", raw, int64(math.MaxInt64))
	case err != nil:
		return snowflake.Parts{}, fmt.Errorf("id %q is not a decimal number", raw)
	}
	return l.Decode(id) // negative and too-large IDs get the layout's own message
}
