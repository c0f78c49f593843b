package segment

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a node resolves a tag's zone without the host's zoneinfo

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
)

// Reset tags: numbers that restart every period (day, month or year, in a
// time zone), printed with the period's date, e.g. 20261207000123.
//
// A reset tag keeps one counter, as any tag does: its ranges, returns,
// state file and tokens are those of a plain tag. A period p starts at a
// base, B(p): the tag's max_id when the first node to serve p wrote p into
// the record (a version-checked write, so every range allocated before it
// lies below B(p) and every range allocated after it at or above). A node
// serves counter value c in period p as the number c - B(p) + Start, and
// only when c >= B(p). Within one period the numbers are unique because the
// counter values are (R1-R7): the mapping is one-to-one. Clocks decide only
// which period a node serves, never whether a number repeats. The record
// accepts a new period only above every period it has (periods start in
// order), so a node whose clock lags cannot start a period again once it was
// pruned, and a deleted tag's periods go into its tombstone, so a tag
// created again under its name continues them.

// Periods of Reset.Every.
const (
	EveryDay   = "daily"
	EveryMonth = "monthly"
	EveryYear  = "yearly"
)

// maxPeriods is how many periods' bases a tag record keeps (the newest).
const maxPeriods = 32

// maxSeqWidth bounds {seq:W}: 10^18-1 still fits an int64.
const maxSeqWidth = 18

// ErrPeriodPassed: a node asked to start a period older than one the tag
// started already (its clock lags the cluster's); it serves nothing of
// it.
var ErrPeriodPassed = errors.New("a later period has started")

// ErrPeriodExhausted: the period's next number would need more digits
// than the format's {seq:W} gives.
var ErrPeriodExhausted = errors.New("period exhausted")

// PeriodExhaustedError: a reset tag's period handed out every number its
// format's width prints. It matches ErrPeriodExhausted.
type PeriodExhaustedError struct {
	Tag, Period string
	Width       int
	Limit       int64
}

// Error names the tag, the period and the width.
func (e *PeriodExhaustedError) Error() string {
	if e.Width == 0 {
		return fmt.Sprintf("tag %q: period %s has handed out every number up to %d", e.Tag, e.Period, e.Limit)
	}
	return fmt.Sprintf("tag %q: period %s has handed out every number of %d digits (up to %d)", e.Tag, e.Period, e.Width, e.Limit)
}

// Unwrap makes the error match ErrPeriodExhausted.
func (e *PeriodExhaustedError) Unwrap() error { return ErrPeriodExhausted }

// Reset makes a tag's numbers restart each period (nil in other tags).
type Reset struct {
	// Every is daily, monthly or yearly.
	Every string `json:"every"`
	// Zone is the IANA time zone the periods follow ("" is UTC).
	Zone string `json:"zone,omitempty"`
	// Format lays out the text of an ID: literal text, {date} (or
	// {date:PATTERN} of yyyy, MM, dd and - / . _) and {seq} (or {seq:W}: the
	// number zero-padded to W digits, and no number of more digits).
	Format string `json:"format"`
}

// Equal reports whether r and o make the same IDs (nil equals nil).
func (r *Reset) Equal(o *Reset) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.Every == o.Every && r.zone() == o.zone() && r.Format == o.Format
}

func (r *Reset) zone() string {
	if r.Zone == "" {
		return "UTC"
	}
	return r.Zone
}

// part is one piece of a compiled format.
type part struct {
	lit   string // literal text (kind 0)
	kind  byte   // 0 literal, 'd' date, 's' number
	date  string // the date's Go layout (kind 'd')
	width int    // the number's width, 0: as many digits as it has (kind 's')
}

// ResetRule is a compiled Reset: what a node uses to pick a period and
// write an ID.
type ResetRule struct {
	spec  Reset
	loc   *time.Location
	parts []part
	width int
	limit int64 // the largest number the format can print
	key   string
}

// Compile checks r and returns its rule.
func (r Reset) Compile() (*ResetRule, error) {
	rule := &ResetRule{spec: r}
	switch r.Every {
	case EveryDay:
		rule.key = "2006-01-02"
	case EveryMonth:
		rule.key = "2006-01"
	case EveryYear:
		rule.key = "2006"
	default:
		return nil, fmt.Errorf("reset %q: want %s, %s or %s", r.Every, EveryDay, EveryMonth, EveryYear)
	}
	loc, err := time.LoadLocation(r.zone())
	if err != nil || r.Zone == "Local" {
		return nil, fmt.Errorf("time zone %q: want an IANA name such as Asia/Shanghai or UTC", r.Zone)
	}
	rule.loc = loc
	if err := rule.compileFormat(r.Format); err != nil {
		return nil, fmt.Errorf("format %q: %w", r.Format, err)
	}
	return rule, nil
}

// compileFormat parses f into rule's parts.
func (rule *ResetRule) compileFormat(f string) error {
	if f == "" {
		return errors.New("empty: want e.g. {date}{seq:6}")
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			rule.parts = append(rule.parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	seqs, dates := 0, 0
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '{' && i+1 < len(f) && f[i+1] == '{', c == '}' && i+1 < len(f) && f[i+1] == '}':
			lit.WriteByte(c)
			i++
		case c == '}':
			return fmt.Errorf("a lone } at byte %d: write }} for the character", i)
		case c == '{':
			end := strings.IndexByte(f[i:], '}')
			if end < 0 {
				return fmt.Errorf("the { at byte %d is not closed", i)
			}
			field := f[i+1 : i+end]
			flush()
			p, err := rule.field(field)
			if err != nil {
				return err
			}
			if p.kind == 's' {
				seqs++
			} else {
				dates++
			}
			rule.parts = append(rule.parts, p)
			i += end
		case c < 0x21 || c > 0x7e || c == '"' || c == '\\':
			return fmt.Errorf("byte %d (%q): literal text is printable ASCII without spaces, quotes or backslashes", i, c)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	switch {
	case seqs != 1:
		return fmt.Errorf("%d {seq} fields: want exactly one", seqs)
	case dates == 0:
		return errors.New("no {date}: without the date, every period would print the same IDs")
	}
	return nil
}

// field compiles one {…} field.
func (rule *ResetRule) field(field string) (part, error) {
	name, arg, hasArg := strings.Cut(field, ":")
	switch name {
	case "seq":
		if !hasArg {
			rule.limit = math.MaxInt64
			return part{kind: 's'}, nil
		}
		w, err := strconv.Atoi(arg)
		if err != nil || w < 1 || w > maxSeqWidth || strconv.Itoa(w) != arg {
			return part{}, fmt.Errorf("{seq:%s}: want a width from 1 to %d", arg, maxSeqWidth)
		}
		rule.width, rule.limit = w, pow10(w)-1
		return part{kind: 's', width: w}, nil
	case "date":
		pattern := map[string]string{EveryDay: "yyyyMMdd", EveryMonth: "yyyyMM", EveryYear: "yyyy"}[rule.spec.Every]
		if hasArg {
			pattern = arg
		}
		layout, err := dateLayout(pattern, rule.spec.Every)
		if err != nil {
			return part{}, fmt.Errorf("{date:%s}: %w", pattern, err)
		}
		return part{kind: 'd', date: layout}, nil
	}
	return part{}, fmt.Errorf("{%s}: want {date}, {date:PATTERN}, {seq} or {seq:WIDTH}", field)
}

// dateLayout turns a pattern of yyyy, MM, dd and separators into a Go time
// layout; the pattern must name every field that tells periods of every
// apart.
func dateLayout(pattern, every string) (string, error) {
	var b strings.Builder
	have := map[string]bool{}
	for i := 0; i < len(pattern); {
		switch {
		case strings.HasPrefix(pattern[i:], "yyyy"):
			b.WriteString("2006")
			have["yyyy"], i = true, i+4
		case strings.HasPrefix(pattern[i:], "MM"):
			b.WriteString("01")
			have["MM"], i = true, i+2
		case strings.HasPrefix(pattern[i:], "dd"):
			b.WriteString("02")
			have["dd"], i = true, i+2
		case strings.IndexByte("-/._", pattern[i]) >= 0:
			b.WriteByte(pattern[i])
			i++
		default:
			return "", fmt.Errorf("%q at byte %d: a pattern is yyyy, MM, dd and the separators - / . _", pattern[i:], i)
		}
	}
	need := map[string][]string{EveryDay: {"yyyy", "MM", "dd"}, EveryMonth: {"yyyy", "MM"}, EveryYear: {"yyyy"}}[every]
	for _, f := range need {
		if !have[f] {
			return "", fmt.Errorf("a %s period needs %s in its date, or two periods print the same IDs", every, strings.Join(need, ", "))
		}
	}
	return b.String(), nil
}

// Spec is the rule's Reset.
func (rule *ResetRule) Spec() Reset { return rule.spec }

// Zone is the name of the zone the periods follow.
func (rule *ResetRule) Zone() string { return rule.spec.zone() }

// Width is the number's width in the format (0: not padded, no limit but
// int64's).
func (rule *ResetRule) Width() int { return rule.width }

// Limit is the largest number the format prints.
func (rule *ResetRule) Limit() int64 { return rule.limit }

// PeriodOf is the key of the period t falls in, in the tag's zone:
// 2026-12-07, 2026-12 or 2026. Keys sort as their periods do.
func (rule *ResetRule) PeriodOf(t time.Time) string { return t.In(rule.loc).Format(rule.key) }

// periodTime is the period of key as a date to print: its fields in UTC,
// never its start in the tag's zone (where a DST change at midnight has
// no 00:00, and the start would read as the day before).
func (rule *ResetRule) periodTime(key string) (time.Time, error) {
	return time.ParseInLocation(rule.key, key, time.UTC)
}

// Date is the period's date as the format's first {date} prints it.
func (rule *ResetRule) Date(key string) string {
	t, err := rule.periodTime(key)
	if err != nil {
		return key
	}
	for _, p := range rule.parts {
		if p.kind == 'd' {
			return t.Format(p.date)
		}
	}
	return key
}

// AppendID appends the text of number n of period key.
func (rule *ResetRule) AppendID(dst []byte, key string, n int64) []byte {
	t, _ := rule.periodTime(key) // keys come from PeriodOf
	for _, p := range rule.parts {
		switch p.kind {
		case 0:
			dst = append(dst, p.lit...)
		case 'd':
			dst = t.AppendFormat(dst, p.date)
		case 's':
			var digits [20]byte
			d := strconv.AppendInt(digits[:0], n, 10)
			for range p.width - len(d) {
				dst = append(dst, '0')
			}
			dst = append(dst, d...)
		}
	}
	return dst
}

// startPeriod adds period key to t's periods at base t.MaxID, keeping the
// newest maxPeriods; ErrPeriodPassed when t has a later period already.
// It reports false when t has key already (nothing changed).
func startPeriod(t *Tag, key string) (bool, error) {
	if _, ok := t.Periods[key]; ok && !mutation.Broken(mutation.PeriodStartedTwice) {
		return false, nil
	}
	if latest := t.LatestPeriod(); latest > key && !mutation.Broken(mutation.PeriodStartedTwice) {
		return false, fmt.Errorf("%w: tag %q serves period %s, after %s", ErrPeriodPassed, t.Name, latest, key)
	}
	ps := make(map[string]int64, len(t.Periods)+1)
	for k, v := range t.Periods {
		ps[k] = v
	}
	ps[key] = t.MaxID
	if key <= t.RestartThrough {
		ps[key] = min(t.MaxID, t.RestartBase)
	}
	if len(ps) > maxPeriods {
		keys := slices.Sorted(maps.Keys(ps))
		for _, k := range keys[:len(keys)-maxPeriods] {
			delete(ps, k)
		}
	}
	t.Periods = ps
	return true, nil
}

// restartWindow is how far past the repair's own time a repaired record
// treats periods as possibly started and forgotten: beyond any clock in
// service's lead on the operator's.
const restartWindow = time.Hour

// markRestart prepares the record t of a reset tag for the repair of a
// record that went back: ZooKeeper may have forgotten the start of any
// period after the newest it has, up to now. Each such period p was
// started after the newest period left in t, at a base no lower than that
// period's (max_id never falls), so a p started again at that base numbers
// every counter value from the repair's max_id on (RestartFloor: below it,
// values may have been numbered under the forgotten base) higher than p's
// forgotten numbers (R9). A node that numbered p from another base serves
// p no more (tagBuf.stale).
func markRestart(t *Tag, maxID int64, now time.Time) error {
	if t.Reset == nil {
		return nil
	}
	rule, err := t.Reset.Compile()
	if err != nil {
		return fmt.Errorf("tag %q resets by a rule this release cannot use: %w", t.Name, err)
	}
	base := t.Start
	if latest := t.LatestPeriod(); latest != "" {
		base = t.Periods[latest]
	}
	if t.RestartThrough != "" {
		base = min(base, t.RestartBase)
	}
	t.RestartBase, t.RestartFloor = base, max(t.RestartFloor, maxID)
	t.RestartThrough = max(t.RestartThrough, rule.PeriodOf(now.Add(restartWindow)))
	return nil
}

// LatestPeriod is the newest period the tag has started ("" when none).
func (t Tag) LatestPeriod() string {
	latest := ""
	for k := range t.Periods {
		latest = max(latest, k)
	}
	return latest
}

// mergePeriods returns the periods of a tag created over a tombstone that
// kept old: a period in both gets the lower base, so its numbers continue
// above every number either handed out (the counter starts at the
// tombstone's max_id or above).
func mergePeriods(old, cur map[string]int64) map[string]int64 {
	if len(old) == 0 {
		return cur
	}
	out := make(map[string]int64, len(old)+len(cur))
	for k, v := range old {
		out[k] = v
	}
	for k, v := range cur {
		if o, ok := out[k]; !ok || v < o {
			out[k] = v
		}
	}
	return out
}
