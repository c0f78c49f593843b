// Package promtext reads Prometheus text exposition for tests: every sample
// as series → value, each series written as name{a="x",b="y"} with its labels
// sorted by name, so tests can look values up with Series.
package promtext

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Parse reads an exposition into series → value. Comments and blank lines
// are skipped; a line without a numeric value, or a series that appears
// twice, is an error.
func Parse(text string) (map[string]float64, error) {
	out := map[string]float64{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("exposition line %q has no value", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("exposition line %q: %w", line, err)
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			labels := strings.Split(strings.TrimSuffix(name[j+1:], "}"), ",")
			slices.Sort(labels)
			name = name[:j] + "{" + strings.Join(labels, ",") + "}"
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("exposition has series %s twice", name)
		}
		out[name] = v
	}
	return out, nil
}

// Series names a series as Parse keys it; labels are name, value pairs.
func Series(name string, labels ...string) string {
	if len(labels) == 0 {
		return name
	}
	var parts []string
	for i := 0; i+1 < len(labels); i += 2 {
		parts = append(parts, labels[i]+"="+strconv.Quote(labels[i+1]))
	}
	slices.Sort(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}
