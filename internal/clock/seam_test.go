package clock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// timerCalls are the calls that arm a timer past a Schedule.
var timerCalls = map[string]bool{
	"time.NewTimer": true, "time.After": true, "time.AfterFunc": true, "time.Sleep": true,
	"time.NewTicker": true, "time.Tick": true,
	"context.WithTimeout": true, "context.WithDeadline": true,
	"context.WithTimeoutCause": true, "context.WithDeadlineCause": true,
}

// armedElsewhere are the product's timers that stay off the Schedule, and
// why no simulation depends on their order.
var armedElsewhere = map[string]string{
	"internal/clock/schedule.go:time.NewTimer":        "the Schedule's own timers",
	"internal/clock/schedule.go:time.AfterFunc":       "the Schedule's own timers",
	"internal/clock/schedule.go:time.NewTicker":       "the Schedule's own timers",
	"internal/clock/schedule.go:context.WithTimeout":  "the Schedule's own timers",
	"internal/clock/schedule.go:context.WithDeadline": "the Schedule's own timers",
	"server/liblog.go:time.AfterFunc":                 "it writes one log line about the HTTP library's dropped lines",
	"internal/testsupport/testsupport.go:time.Sleep":  "test support: the integration tests' polls in real time",
}

// TestTimersArmedThroughTheSchedule keeps every timer of the server module
// (outside tests) armed through this package, so that a simulation's
// Schedule orders all of them: one armed with the time package directly
// could fire at one virtual instant with another, in a random order.
func TestTimersArmedThroughTheSchedule(t *testing.T) {
	root := testsupport.ModuleRoot(t)
	fset := token.NewFileSet()
	seen := map[string]bool{}
	// The client is its own module; tests/ holds only tests.
	for _, rel := range testsupport.GoFiles(t, "client", "tests") {
		f, err := parser.ParseFile(fset, filepath.Join(root, filepath.FromSlash(rel)), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			name := pkg.Name + "." + sel.Sel.Name
			if !timerCalls[name] {
				return true
			}
			key := rel + ":" + name
			seen[key] = true
			if _, ok := armedElsewhere[key]; !ok {
				t.Errorf("%s: %s arms a timer past the Schedule: use the clock package's", fset.Position(call.Pos()), name)
			}
			return true
		})
	}
	for key := range armedElsewhere {
		if !seen[key] {
			t.Errorf("%s is listed as armed elsewhere but no longer is: take it off the list", key)
		}
	}
	if len(seen) < 3 {
		t.Fatalf("found %d timer calls in the module: the walk missed it", len(seen))
	}
}
