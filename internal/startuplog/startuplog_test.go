package startuplog

import (
	"log"
	"strings"
	"testing"
)

func TestTake(t *testing.T) {
	Take() // whatever the test binary's packages printed at init
	log.Print("first")
	log.Print("second line")
	lines, dropped := Take()
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "first") || !strings.HasSuffix(lines[1], "second line") || dropped != 0 {
		t.Fatalf("Take = %q, %d dropped", lines, dropped)
	}
	if lines, _ := Take(); len(lines) != 0 {
		t.Fatalf("a second Take returned %q", lines)
	}
	big := strings.Repeat("x", maxHeld)
	log.Print("kept")
	log.Print(big)
	lines, dropped = Take()
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "kept") || dropped < len(big) {
		t.Fatalf("beyond the bound: %d lines, %d dropped", len(lines), dropped)
	}
}
