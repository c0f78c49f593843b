// Package docker_test checks docker/Dockerfile and docker/docker-compose.yml
// without a Docker engine: the compose file parses and wires the right
// services, ports, volumes and SNOWFLAKED_* variables, and the binary builds
// static with the Dockerfile's own flags.
package docker_test

import (
	"debug/elf"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"codeberg.org/snowflaked/snowflaked/node"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

// composeService is one service of the compose file.
type composeService struct {
	Image       string            `yaml:"image"`
	Hostname    string            `yaml:"hostname"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   []string          `yaml:"depends_on"`
	Build       struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	return c
}

func TestComposeZooKeeperEnsemble(t *testing.T) {
	c := loadCompose(t)
	ids := map[string]string{}
	for name, s := range c.Services {
		if !strings.HasPrefix(s.Image, "zookeeper:") {
			continue
		}
		id := s.Environment["ZOO_MY_ID"]
		if id == "" {
			t.Errorf("%s: no ZOO_MY_ID", name)
		}
		if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share ZOO_MY_ID %s", name, other, id)
		}
		ids[id] = name
		for _, want := range []string{"server.1=zk1:2888:3888;2181", "server.2=zk2:2888:3888;2181", "server.3=zk3:2888:3888;2181"} {
			if !strings.Contains(s.Environment["ZOO_SERVERS"], want) {
				t.Errorf("%s: ZOO_SERVERS %q lacks %q", name, s.Environment["ZOO_SERVERS"], want)
			}
		}
		if s.Hostname != name {
			t.Errorf("%s: hostname %q, ZOO_SERVERS names it %q", name, s.Hostname, name)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("want a 3-server ZooKeeper ensemble, found %d servers", len(ids))
	}
}

func TestComposeSnowflakedNodes(t *testing.T) {
	c := loadCompose(t)
	known := node.EnvVars()
	nodeKeys, hostPorts := map[string]string{}, map[string]string{}
	nodes := 0
	for name, s := range c.Services {
		if s.Build.Dockerfile == "" {
			continue
		}
		nodes++
		if s.Build.Dockerfile != "docker/Dockerfile" || s.Build.Context != ".." {
			t.Errorf("%s: build %+v, want context .. and docker/Dockerfile", name, s.Build)
		}
		checkNodeEnv(t, c, name, s, known)
		if other, dup := nodeKeys[s.Environment["SNOWFLAKED_NODE_KEY"]]; dup {
			t.Errorf("%s and %s share node key %q", name, other, s.Environment["SNOWFLAKED_NODE_KEY"])
		}
		nodeKeys[s.Environment["SNOWFLAKED_NODE_KEY"]] = name
		checkNodePorts(t, name, s, hostPorts)
		checkCacheVolume(t, c, name, s)
	}
	if nodes != 3 {
		t.Fatalf("want 3 snowflaked nodes, found %d", nodes)
	}
}

// checkNodeEnv checks a node service's environment: every SNOWFLAKED_
// variable is a flag, the required ones are set, and each ZooKeeper server
// is a service the node depends on.
func checkNodeEnv(t *testing.T, c composeFile, name string, s composeService, known map[string]bool) {
	t.Helper()
	env := s.Environment
	for k := range env {
		if strings.HasPrefix(k, "SNOWFLAKED_") && !known[k] {
			t.Errorf("%s: %s matches no snowflaked flag", name, k)
		}
	}
	for _, need := range []string{"SNOWFLAKED_ZK", "SNOWFLAKED_NODE_KEY", "SNOWFLAKED_ADVERTISE", "SNOWFLAKED_LISTEN", "SNOWFLAKED_CACHE_FILE"} {
		if env[need] == "" {
			t.Errorf("%s: %s is not set", name, need)
		}
	}
	for _, hp := range strings.Split(env["SNOWFLAKED_ZK"], ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || port != "2181" {
			t.Errorf("%s: SNOWFLAKED_ZK entry %q is not zkN:2181", name, hp)
			continue
		}
		if _, ok := c.Services[host]; !ok {
			t.Errorf("%s: SNOWFLAKED_ZK names %q, which is no service", name, host)
		}
		if !slices.Contains(s.DependsOn, host) {
			t.Errorf("%s: does not depend on %s", name, host)
		}
	}
}

// checkNodePorts checks that a node advertises its hostname and listen port
// and publishes that port once, on a host port no other service publishes.
func checkNodePorts(t *testing.T, name string, s composeService, hostPorts map[string]string) {
	t.Helper()
	env := s.Environment
	_, listenPort, err := net.SplitHostPort(env["SNOWFLAKED_LISTEN"])
	if err != nil {
		t.Errorf("%s: SNOWFLAKED_LISTEN %q: %v", name, env["SNOWFLAKED_LISTEN"], err)
	}
	advHost, advPort, err := net.SplitHostPort(env["SNOWFLAKED_ADVERTISE"])
	if err != nil || advHost != s.Hostname || advPort != listenPort {
		t.Errorf("%s: SNOWFLAKED_ADVERTISE %q should be %s:%s (its hostname and listen port)", name, env["SNOWFLAKED_ADVERTISE"], s.Hostname, listenPort)
	}
	if len(s.Ports) != 1 {
		t.Errorf("%s: ports %v, want one mapping", name, s.Ports)
		return
	}
	parts := strings.Split(s.Ports[0], ":")
	if len(parts) != 3 || parts[2] != listenPort {
		t.Errorf("%s: port mapping %q does not reach the listen port %s", name, s.Ports[0], listenPort)
	} else if other, dup := hostPorts[parts[1]]; dup {
		t.Errorf("%s and %s both publish host port %s", name, other, parts[1])
	} else {
		hostPorts[parts[1]] = name
	}
}

// checkCacheVolume checks that a declared volume holds the node's cache
// file's directory.
func checkCacheVolume(t *testing.T, c composeFile, name string, s composeService) {
	t.Helper()
	cacheDir := filepath.Dir(s.Environment["SNOWFLAKED_CACHE_FILE"])
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == cacheDir {
			if _, ok := c.Volumes[parts[0]]; !ok {
				t.Errorf("%s: volume %q is not declared", name, parts[0])
			}
			return
		}
	}
	t.Errorf("%s: no volume at %s, the cache file's directory", name, cacheDir)
}

// Every published port is bound to 127.0.0.1: the API has no
// authentication, and a bare "8081:8080" publishes on every address of the
// host.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	c := loadCompose(t)
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") || strings.Count(p, ":") != 2 {
				t.Errorf("%s: port mapping %q, want 127.0.0.1:<host port>:<container port>", name, p)
			}
		}
	}
}

// The compose file's comments show how to run snowflakectl inside the
// stack (ZooKeeper publishes no port): docker compose exec on a node
// service, the binary where the Dockerfile puts it, and for the commands
// that read ZooKeeper the stack's ensemble and cluster.
func TestComposeCommentsRunSnowflakectl(t *testing.T) {
	c := loadCompose(t)
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	const ctl = "/usr/local/bin/snowflakectl"
	if !regexp.MustCompile(`(?m)^COPY --from=build .*/out/snowflakectl.* /usr/local/bin/$`).MatchString(readDockerfile(t)) {
		t.Fatalf("the Dockerfile does not put snowflakectl in /usr/local/bin/")
	}
	line := regexp.MustCompile(`(?m)^#\s+docker compose -f docker/docker-compose\.yml exec (\S+) (\S+) (.*)$`)
	found := 0
	for _, m := range line.FindAllStringSubmatch(string(b), -1) {
		found++
		service, bin, args := m[1], m[2], strings.Fields(m[3])
		s, ok := c.Services[service]
		if !ok || s.Build.Dockerfile == "" {
			t.Errorf("%q: %s is no snowflaked service", m[0], service)
			continue
		}
		if bin != ctl {
			t.Errorf("%q: runs %s, want %s", m[0], bin, ctl)
		}
		for i := 0; i+1 < len(args); i++ {
			want := map[string]string{"--zk": s.Environment["SNOWFLAKED_ZK"], "--cluster": s.Environment["SNOWFLAKED_CLUSTER"]}[args[i]]
			if want != "" && args[i+1] != want {
				t.Errorf("%q: %s %s, the stack has %s", m[0], args[i], args[i+1], want)
			}
		}
		if slices.Contains(args, "--zk") && !slices.Contains(args, "--cluster") {
			t.Errorf("%q: no --cluster (the stack's is %q, not the default)", m[0], s.Environment["SNOWFLAKED_CLUSTER"])
		}
	}
	if found == 0 {
		t.Errorf("no comment line shows `docker compose -f docker/docker-compose.yml exec <node> %s …`", ctl)
	}
}

// dockerfileBuildFlags returns the go build flags of the Dockerfile's RUN line.
func readDockerfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDockerfileShape(t *testing.T) {
	df := readDockerfile(t)
	known := node.EnvVars()
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	checks := []struct {
		name string
		ok   bool
	}{
		{"builder uses the go.mod Go version", goVer != nil && strings.Contains(df, "FROM golang:"+goVer[1])},
		{"multi-stage: a second FROM", strings.Count(df, "\nFROM ") >= 1 && strings.Count(df, "FROM ") >= 2},
		{"static: CGO_ENABLED=0", strings.Contains(df, "CGO_ENABLED=0 go build -trimpath")},
		{"non-root USER", regexp.MustCompile(`(?m)^USER (6553[0-9]|[1-9][0-9]{3,})`).MatchString(df)},
		{"HEALTHCHECK on /readyz", regexp.MustCompile(`(?m)^HEALTHCHECK .*\n?.*/readyz`).MatchString(df)},
		{"EXPOSE 8080 matches SNOWFLAKED_LISTEN=:8080", strings.Contains(df, "EXPOSE 8080") && strings.Contains(df, "SNOWFLAKED_LISTEN=:8080")},
		{"VOLUME /data holds the cache file", strings.Contains(df, `VOLUME ["/data"]`) && strings.Contains(df, "SNOWFLAKED_CACHE_FILE=/data/")},
		{"binaries stamped with the VERSION build arg", strings.Count(df, `-ldflags "-s -w -X main.version=${VERSION}"`) == 2},
		{"image labelled with VERSION (ARG in the final stage)", regexp.MustCompile(`(?s)FROM gcr\.io/[^\n]*\nARG VERSION=dev\n.*org\.opencontainers\.image\.version="\$\{VERSION\}"`).MatchString(df)},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("Dockerfile: %s: not so", c.name)
		}
	}
	for _, m := range regexp.MustCompile(`SNOWFLAKED_[A-Z_]+`).FindAllString(df, -1) {
		if !known[m] {
			t.Errorf("Dockerfile sets %s, which matches no flag", m)
		}
	}
}

// TestDockerfileBinaryIsStatic builds both binaries with the Dockerfile's
// own flags and checks that they need no dynamic loader or shared library.
func TestDockerfileBinaryIsStatic(t *testing.T) {
	df := readDockerfile(t)
	re := regexp.MustCompile(`CGO_ENABLED=0 go build (-trimpath -ldflags "[^"]*") -o /out/(\S+) (\./cmd/\S+)`)
	builds := re.FindAllStringSubmatch(df, -1)
	if len(builds) != 2 {
		t.Fatalf("want 2 go build lines in the Dockerfile, found %d", len(builds))
	}
	dir := t.TempDir()
	for _, b := range builds {
		flags := strings.ReplaceAll(b[1], "${VERSION}", "test")
		ldflags := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(flags)[1]
		out := filepath.Join(dir, b[2])
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, b[3])
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[3], err, msg)
		}
		f, err := elf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has a dynamic loader (PT_INTERP): not static", b[2])
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s needs shared libraries %v", b[2], libs)
		}
		f.Close()
	}
}

// TestMakefileDockerStampsVersion: make docker builds the image with the
// Makefile's VERSION (git describe) as the build arg and the tag, so an
// image built the documented way never says "dev".
func TestMakefileDockerStampsVersion(t *testing.T) {
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	recipe := regexp.MustCompile(`(?m)^docker:\n\t(.*)$`).FindStringSubmatch(mk)
	if recipe == nil {
		t.Fatal("Makefile has no docker target")
	}
	for _, want := range []string{"docker build -f docker/Dockerfile", "--build-arg VERSION=$(VERSION)", "-t snowflaked:$(VERSION)"} {
		if !strings.Contains(recipe[1], want) {
			t.Errorf("make docker runs %q, want it to contain %q", recipe[1], want)
		}
	}
	if !regexp.MustCompile(`(?m)^\.PHONY:.* docker( |$)`).MatchString(mk) {
		t.Error("docker is not .PHONY (the docker/ folder would make it up to date)")
	}
}
