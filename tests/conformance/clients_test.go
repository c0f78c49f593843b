package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// clientUnderTest is one client of the repository and how to drive it.
type clientUnderTest struct {
	name string
	// tools are the programs its build and driver need, each with the
	// Debian package that has it.
	tools []tool
	// dir is its folder under the module root ("" for Go).
	dir string
}

type tool struct{ pkg, name string }

var clientsUnderTest = []clientUnderTest{
	{name: "go"},
	{name: "java", dir: "clients/java", tools: []tool{{"default-jdk-headless", "javac"}, {"default-jdk-headless", "java"}, {"make", "make"}}},
	{name: "python", dir: "clients/python", tools: []tool{{"python3", "python3"}, {"make", "make"}}},
	{name: "typescript", dir: "clients/typescript", tools: []tool{{"nodejs", "node"}, {"npm", "npm"}, {"make", "make"}}},
}

// selectedClients are the clients CONFORMANCE_CLIENTS names (comma
// separated), all when it is empty.
func selectedClients(t *testing.T) []clientUnderTest {
	t.Helper()
	v := strings.TrimSpace(os.Getenv("CONFORMANCE_CLIENTS"))
	if v == "" {
		return clientsUnderTest
	}
	var out []clientUnderTest
	for _, name := range strings.Split(v, ",") {
		i := slices.IndexFunc(clientsUnderTest, func(c clientUnderTest) bool { return c.name == strings.TrimSpace(name) })
		if i < 0 {
			t.Fatalf("CONFORMANCE_CLIENTS=%q: no client %q (go, java, python, typescript)", v, name)
		}
		out = append(out, clientsUnderTest[i])
	}
	return out
}

// start builds the client (its toolchain missing: a skip, or a failure
// under CI=true) and starts its driver.
func (c clientUnderTest) start(t *testing.T) *driver {
	t.Helper()
	if c.dir == "" {
		return startDriver(t, c.name, t.TempDir(), binGoDriver)
	}
	for _, tl := range c.tools {
		testsupport.NeedTool(t, tl.pkg, tl.name)
	}
	dir := filepath.Join(testsupport.ModuleRoot(t), c.dir)
	build := exec.Command("make", "-s", "-C", dir, "build")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make -C %s build: %v\n%s", c.dir, err, out)
	}
	return startDriver(t, c.name, dir, filepath.Join(dir, "conformance", "driver"))
}
