package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goExamplesHeader starts the file the Go examples of docs/client.md are
// built in: the packages they may use, each used once so that none is an
// unused import.
const goExamplesHeader = `package examples

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/client/zkdiscovery"
)

var (
	_ = context.Background
	_ = errors.Is
	_ = fmt.Println
	_ = slog.Default
	_ = client.New
	_ = wire.PathIDs
	_ = zkdiscovery.New
)

`

// The Go examples of docs/client.md (its go blocks, each one or more
// top-level declarations) compile against the client as it is.
func TestClientDocGoExamplesCompile(t *testing.T) {
	text := doc(t, "docs/client.md")
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(text, -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/client.md has %d go blocks, want at least 2", len(blocks))
	}
	var src strings.Builder
	src.WriteString(goExamplesHeader)
	for _, b := range blocks {
		src.WriteString(b[1] + "\n")
	}
	file := filepath.Join(t.TempDir(), "examples.go")
	if err := os.WriteFile(file, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", file)
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the go blocks of docs/client.md do not build: %v\n%s", err, out)
	}
}
