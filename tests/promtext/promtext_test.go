package promtext

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	got, err := Parse(`# HELP x help
# TYPE x counter
x 3

y{b="2",a="1"} 1.5
z{a="q"} 1e3
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"x":                             3,
		Series("y", "a", "1", "b", "2"): 1.5,
		Series("z", "a", "q"):           1000,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"no value", "lonely\n", "has no value"},
		{"not a number", "x abc\n", "exposition line"},
		{"series twice", "x{a=\"1\"} 1\nx{a=\"1\"} 2\n", "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.text, err, tc.want)
			}
		})
	}
}
