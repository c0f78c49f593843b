package metrics

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sample is one parsed line of the text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// exposition is a parsed scrape.
type exposition struct {
	samples []sample
	types   map[string]string // family → TYPE
	helps   map[string]string // family → HELP
}

// parseExposition parses the Prometheus text format strictly enough to
// catch what a scraper would reject: malformed lines, a TYPE or HELP given
// twice, a family whose samples are not together, a sample before its
// family's TYPE, or a duplicate series.
func parseExposition(text string) (*exposition, error) {
	ex := &exposition{types: map[string]string{}, helps: map[string]string{}}
	done := map[string]bool{} // families whose samples ended
	seen := map[string]bool{} // series keys
	current := ""
	for i, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			kind, body, _ := strings.Cut(rest, " ")
			name, val, _ := strings.Cut(body, " ")
			switch kind {
			case "TYPE":
				if _, dup := ex.types[name]; dup {
					return nil, fmt.Errorf("line %d: second TYPE for %s", i+1, name)
				}
				if len(ex.samplesOf(name)) > 0 {
					return nil, fmt.Errorf("line %d: TYPE of %s after its samples", i+1, name)
				}
				ex.types[name] = val
			case "HELP":
				if _, dup := ex.helps[name]; dup {
					return nil, fmt.Errorf("line %d: second HELP for %s", i+1, name)
				}
				ex.helps[name] = val
			}
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", i+1, line, err)
		}
		fam := familyOf(s.name, ex.types)
		if fam != current {
			if done[fam] {
				return nil, fmt.Errorf("line %d: samples of %s are not together", i+1, fam)
			}
			if current != "" {
				done[current] = true
			}
			current = fam
		}
		if key := seriesKey(s.name, s.labels); seen[key] {
			return nil, fmt.Errorf("line %d: duplicate series %s", i+1, key)
		} else {
			seen[key] = true
		}
		ex.samples = append(ex.samples, s)
	}
	return ex, nil
}

// familyOf returns the family of a sample name (summaries and histograms
// add suffixes to their family's name).
func familyOf(name string, types map[string]string) string {
	for _, suffix := range []string{"_sum", "_count", "_bucket"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if t := types[base]; t == "summary" || t == "histogram" {
				return base
			}
		}
	}
	return name
}

// parseSample parses `name{k="v",…} value` (blanks may follow "{" and ",",
// as Prometheus's own parser allows).
func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := 0
	for i < len(line) && (isNameChar(line[i], i == 0)) {
		i++
	}
	if i == 0 {
		return s, fmt.Errorf("no metric name")
	}
	s.name = line[:i]
	if i < len(line) && line[i] == '{' {
		n, err := parseLabels(line, i+1, s.labels)
		if err != nil {
			return s, err
		}
		i = n
	}
	if i >= len(line) || line[i] != ' ' {
		return s, fmt.Errorf("no space before the value")
	}
	fields := strings.Fields(line[i+1:])
	if len(fields) < 1 || len(fields) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp, got %q", line[i+1:])
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.value = v
	return s, nil
}

// parseLabels reads the labels of a sample from line[i:] (just after its
// "{") into labels, up to and including the closing "}", and returns the
// index just past it.
func parseLabels(line string, i int, labels map[string]string) (int, error) {
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') { // the format allows blanks between labels
			i++
		}
		if i < len(line) && line[i] == '}' {
			return i + 1, nil
		}
		j := i
		for j < len(line) && isNameChar(line[j], j == i) {
			j++
		}
		if j == i || j+1 >= len(line) || line[j] != '=' || line[j+1] != '"' {
			return i, fmt.Errorf("bad label at %d", i)
		}
		key := line[i:j]
		val, n, err := unescapeLabel(line[j+2:])
		if err != nil {
			return i, err
		}
		if _, dup := labels[key]; dup {
			return i, fmt.Errorf("label %s twice", key)
		}
		labels[key] = val
		i = j + 2 + n
		if i < len(line) && line[i] == ',' {
			i++
		}
	}
}

func isNameChar(c byte, first bool) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

// unescapeLabel reads a label value up to its closing quote and returns it
// and how many bytes it took, the quote included.
func unescapeLabel(s string) (string, int, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("dangling backslash")
			}
			i++
			switch s[i] {
			case '\\':
				b.WriteByte('\\')
			case '"':
				b.WriteByte('"')
			case 'n':
				b.WriteByte('\n')
			default:
				return "", 0, fmt.Errorf("bad escape \\%c", s[i])
			}
		case '\n':
			return "", 0, fmt.Errorf("raw line feed in a label value")
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated label value")
}

// seriesKey is name{k="v",…} with sorted keys.
func seriesKey(name string, labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// samplesOf returns the samples named name.
func (ex *exposition) samplesOf(name string) []sample {
	var out []sample
	for _, s := range ex.samples {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// find returns the value of the series with exactly these labels (name/value
// pairs) and whether it exists.
func (ex *exposition) find(name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, s := range ex.samples {
		if s.name == name && maps.Equal(s.labels, want) {
			return s.value, true
		}
	}
	return 0, false
}

var posInf = math.Inf(1)

func TestParseExposition(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantErr string
		want    []sample
	}{
		{name: "plain and labelled", text: "# HELP a_total x y\n# TYPE a_total counter\na_total 3\nb{x=\"1\",y=\"q\\\"\\\\\\n\"} 2.5\n",
			want: []sample{{"a_total", map[string]string{}, 3}, {"b", map[string]string{"x": "1", "y": "q\"\\\n"}, 2.5}}},
		{name: "blanks between labels", text: "a{ x=\"1\", y=\"2\"} 1\n",
			want: []sample{{"a", map[string]string{"x": "1", "y": "2"}, 1}}},
		{name: "special values", text: "a +Inf\nb NaN\nc -1e-05\n",
			want: []sample{{"a", map[string]string{}, posInf}, {"c", map[string]string{}, -1e-05}}},
		{name: "no value", text: "a\n", wantErr: "no space"},
		{name: "bad value", text: "a x\n", wantErr: "value"},
		{name: "unterminated label", text: "a{x=\"1} 2\n", wantErr: "unterminated"},
		{name: "bad escape", text: "a{x=\"\\t\"} 2\n", wantErr: "bad escape"},
		{name: "label twice", text: "a{x=\"1\",x=\"2\"} 2\n", wantErr: "twice"},
		{name: "split family", text: "a 1\nb 1\na{x=\"1\"} 2\n", wantErr: "not together"},
		{name: "duplicate series", text: "a{x=\"1\"} 1\na{x=\"1\"} 2\n", wantErr: "duplicate"},
		{name: "type twice", text: "# TYPE a gauge\n# TYPE a gauge\n", wantErr: "second TYPE"},
		{name: "type after samples", text: "a 1\n# TYPE a gauge\n", wantErr: "after its samples"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := parseExposition(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				var pairs []string
				for k, v := range w.labels {
					pairs = append(pairs, k, v)
				}
				got, ok := ex.find(w.name, pairs...)
				if !ok || got != w.value {
					t.Errorf("%s%v = %v (found %v), want %v", w.name, w.labels, got, ok, w.value)
				}
			}
		})
	}
}
