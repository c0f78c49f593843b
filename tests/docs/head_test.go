package docs

import (
	"strings"
	"testing"
)

// leadingCommands returns the commands of the README's first code block,
// which must come right after the title: the block's lines without their
// comments, blank ones dropped. ok is false when the README does not start
// that way.
func leadingCommands(doc string) (cmds []string, ok bool) {
	lines := strings.Split(doc, "\n")
	i := 0
	if i < len(lines) && strings.HasPrefix(lines[i], "# ") {
		i++
	}
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i >= len(lines) || !strings.HasPrefix(lines[i], "```") {
		return nil, false
	}
	for i++; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "```") {
			return cmds, true
		}
		if cmd, _, _ := strings.Cut(l, "#"); strings.TrimSpace(cmd) != "" {
			cmds = append(cmds, strings.Join(strings.Fields(cmd), " "))
		}
	}
	return nil, false // the block never closes
}

// TestREADMEStartsWithRunAndTest checks that the README starts (after its
// title) with a code block whose first two commands are make run and make
// test, and that CI runs make test as the README says.
func TestREADMEStartsWithRunAndTest(t *testing.T) {
	cmds, ok := leadingCommands(readme(t))
	if !ok {
		t.Fatal("README does not start with a code block (after the \"# title\" line)")
	}
	if len(cmds) < 2 || cmds[0] != "make run" || cmds[1] != "make test" {
		t.Errorf("README's first commands are %q, want make run then make test", cmds)
	}
	ci := readRepoFile(t, ".ci/run")
	found := false
	for _, l := range strings.Split(ci, "\n") {
		if strings.TrimSpace(l) == "make test" {
			found = true
		}
	}
	if !found {
		t.Error(".ci/run has no line running `make test`")
	}
}

func TestLeadingCommands(t *testing.T) {
	tests := []struct {
		doc  string
		want string
		ok   bool
	}{
		{"# x\n\n```sh\nmake run    # a\nmake test   # b\n```\n", "make run|make test", true},
		{"```sh\nmake  run\n\nmake test\n```", "make run|make test", true},
		{"# x\n\ntext\n```sh\nmake run\n```\n", "", false},
		{"# x\n```sh\nmake run\n", "", false},
	}
	for _, tt := range tests {
		cmds, ok := leadingCommands(tt.doc)
		if ok != tt.ok || strings.Join(cmds, "|") != tt.want {
			t.Errorf("leadingCommands(%q) = %q, %v; want %q, %v", tt.doc, cmds, ok, tt.want, tt.ok)
		}
	}
}
