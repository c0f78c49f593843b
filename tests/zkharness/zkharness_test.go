package zkharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// srvr outputs captured from Debian's ZooKeeper 3.8.0.
const (
	srvrStandalone = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\nLatency min/avg/max: 0/0.0/0\nReceived: 1\nSent: 0\nConnections: 1\nOutstanding: 0\nZxid: 0x0\nMode: standalone\nNode count: 5\n"
	srvrLeader     = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\nLatency min/avg/max: 0/0.0/0\nReceived: 3\nSent: 2\nConnections: 1\nOutstanding: 0\nZxid: 0x100000000\nMode: leader\nNode count: 5\nProposal sizes last/min/max: -1/-1/-1\n"
	srvrFollower   = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\nLatency min/avg/max: 0/0.0/0\nReceived: 3\nSent: 2\nConnections: 1\nOutstanding: 0\nZxid: 0x100000000\nMode: follower\nNode count: 5\n"
	srvrNoQuorum   = "This ZooKeeper instance is not currently serving requests\n"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		name, out, want string
	}{
		{"standalone", srvrStandalone, "standalone"},
		{"leader", srvrLeader, "leader"},
		{"follower", srvrFollower, "follower"},
		{"crlf observer", "Zookeeper version: 3.8.0\r\nMode: observer\r\nNode count: 5\r\n", "observer"},
		{"no quorum", srvrNoQuorum, ""},
		{"ruok answer", "imok", ""},
		{"empty", "", ""},
		{"empty mode", "Zxid: 0x0\nMode: \nNode count: 5\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMode(tc.out)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("parseMode = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseMode = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestAvailableReportsWhy(t *testing.T) {
	t.Setenv("ZK_CLASSPATH", "")
	t.Setenv("ZOOKEEPER_HOME", t.TempDir())
	if _, err := findClasspath(); err == nil || !strings.Contains(err.Error(), "ZOOKEEPER_HOME") {
		t.Fatalf("empty ZOOKEEPER_HOME: err = %v, want one naming ZOOKEEPER_HOME", err)
	}
	t.Setenv("ZK_CLASSPATH", "/nonexistent/zookeeper.jar")
	if _, err := findClasspath(); err == nil {
		t.Fatal("missing ZK_CLASSPATH jar: no error")
	}
	t.Setenv("ZK_CLASSPATH", "/x/lib/*")
	if cp, err := findClasspath(); err != nil || cp != "/x/lib/*" {
		t.Fatalf("wildcard ZK_CLASSPATH: %q, %v", cp, err)
	}
}

func TestFreePortsDistinct(t *testing.T) {
	ports, err := FreePorts(30)
	if err != nil {
		t.Fatal(err)
	}
	low, _ := ephemeralRange()
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("bad or duplicate port %d in %v", p, ports)
		}
		if p >= low {
			t.Fatalf("port %d is in the ephemeral range (from %d): an outgoing connection may take it before a follower binds it", p, low)
		}
		seen[p] = true
	}
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// connect opens a go-zookeeper client and waits until it has a session.
func connect(t *testing.T, c *Cluster) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(strings.Split(c.ConnectString(), ","), 4*time.Second, zk.WithLogger(discard{}))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(conn.Close)
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	for range 1000 {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-timeout.C:
			t.Fatalf("no ZooKeeper session within 15s (state %v)", conn.State())
		}
	}
	t.Fatal("no ZooKeeper session after 1000 events")
	return nil
}

func mustGet(t *testing.T, conn *zk.Conn, path, want string) {
	t.Helper()
	got, _, err := conn.Get(path)
	if err != nil || string(got) != want {
		t.Fatalf("Get(%s) = %q, %v; want %q", path, got, err, want)
	}
}

func TestIntegration_Standalone(t *testing.T) {
	c := StartStandalone(t)
	if len(c.Servers) != 1 || c.ConnectString() != c.Servers[0].ClientAddr() {
		t.Fatalf("servers %d, connect string %q", len(c.Servers), c.ConnectString())
	}
	if m, err := c.Servers[0].Mode(); err != nil || m != "standalone" {
		t.Fatalf("Mode = %q, %v; want standalone", m, err)
	}
	if _, err := c.Leader(); err == nil {
		t.Fatal("Leader of a standalone server: no error")
	}
	conn := connect(t, c)
	if _, err := conn.Create("/zkharness", []byte("hello"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	mustGet(t, conn, "/zkharness", "hello")
}

func TestIntegration_StandaloneRestartKeepsData(t *testing.T) {
	c := StartStandalone(t)
	s, addr := c.Servers[0], c.Servers[0].ClientAddr()
	conn := connect(t, c)
	if _, err := conn.Create("/kept", []byte("v1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	conn.Close()

	if err := c.StopAll(); err != nil {
		t.Fatalf("StopAll: %v", err)
	}
	if s.Running() {
		t.Fatal("Running after Stop")
	}
	if _, err := s.Mode(); err == nil {
		t.Fatal("Mode of a stopped server: no error")
	}
	began := time.Now()
	if err := c.StartAll(); err != nil {
		t.Fatalf("StartAll: %v", err)
	}
	t.Logf("restart after Stop serving in %v", time.Since(began).Round(time.Millisecond))
	if s.ClientAddr() != addr {
		t.Fatalf("address changed: %s -> %s", addr, s.ClientAddr())
	}
	mustGet(t, connect(t, c), "/kept", "v1")

	// A crash (SIGKILL) keeps acknowledged writes too.
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("second Start of a running server: no error")
	}
	if err := c.WaitServing(StartTimeout); err != nil {
		t.Fatalf("WaitServing: %v", err)
	}
	mustGet(t, connect(t, c), "/kept", "v1")
}

func TestIntegration_EnsembleLeaderFailover(t *testing.T) {
	c := StartEnsemble(t, 3)
	modes := map[string]int{}
	for _, s := range c.Servers {
		m, err := s.Mode()
		if err != nil {
			t.Fatalf("Mode: %v", err)
		}
		modes[m]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("modes %v, want 1 leader and 2 followers", modes)
	}
	conn := connect(t, c)
	if _, err := conn.Create("/before", []byte("written before failover"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	old, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Kill(); err != nil {
		t.Fatalf("Kill leader: %v", err)
	}
	began := time.Now()
	var leader *Server
	if !poll(20*time.Second, func() bool { leader, err = c.Leader(); return err == nil }) {
		t.Fatalf("no new leader 20s after killing server %d: %v", old.ID(), err)
	}
	t.Logf("server %d is the new leader %v after killing server %d", leader.ID(), time.Since(began).Round(time.Millisecond), old.ID())
	if leader == old {
		t.Fatal("the killed server is still leader")
	}
	if err := c.WaitServing(10 * time.Second); err != nil {
		t.Fatalf("WaitServing with 2 of 3: %v", err)
	}
	conn2 := connect(t, c)
	mustGet(t, conn2, "/before", "written before failover")
	if _, err := conn2.Create("/after", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create after failover: %v", err)
	}

	// The old leader rejoins as a follower and catches up.
	if err := old.Start(); err != nil {
		t.Fatalf("restart old leader: %v", err)
	}
	if err := old.WaitServing(StartTimeout); err != nil {
		t.Fatalf("old leader rejoining: %v", err)
	}
	if m, err := old.Mode(); err != nil || m != "follower" {
		t.Fatalf("rejoined old leader: Mode = %q, %v; want follower", m, err)
	}
	if l, err := c.Leader(); err != nil || l != leader {
		t.Fatalf("leader after rejoin: %v, %v; want server %d", l, err, leader.ID())
	}
}

// gone reports whether no process with this pid exists (a zombie counts as gone:
// the container's init may not reap orphans).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(after, "Z")
}

func TestIntegration_NoJVMOutlivesCleanup(t *testing.T) {
	var pids []int
	t.Run("cluster", func(t *testing.T) {
		c := StartEnsemble(t, 3)
		for _, s := range c.Servers {
			pids = append(pids, s.proc().pid)
		}
		if err := c.Servers[0].Stop(); err != nil { // a stopped one must not confuse cleanup
			t.Fatal(err)
		}
	})
	if len(pids) != 3 {
		t.Fatalf("subtest recorded pids %v", pids)
	}
	for _, pid := range pids {
		if !gone(pid) || !errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH) {
			t.Errorf("JVM pid %d (or its process group) survived t.Cleanup", pid)
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// TestIntegration_CrashHelper is run by TestIntegration_NoJVMOutlivesCrash in
// a child process: it starts a server and exits without any cleanup.
func TestIntegration_CrashHelper(t *testing.T) {
	if os.Getenv("ZKHARNESS_CRASH_HELPER") != "1" {
		t.Skip("helper for TestIntegration_NoJVMOutlivesCrash")
	}
	c := StartStandalone(t)
	fmt.Printf("PID=%d\n", c.Servers[0].proc().pid)
	os.Exit(3)
}

func TestIntegration_NoJVMOutlivesCrash(t *testing.T) {
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*StartTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestIntegration_CrashHelper$")
	cmd.Env = append(os.Environ(), "ZKHARNESS_CRASH_HELPER=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	m := regexp.MustCompile(`PID=(\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	pid, _ := strconv.Atoi(m[1])
	if !poll(5*time.Second, func() bool { return gone(pid) }) {
		syscall.Kill(-pid, syscall.SIGKILL)
		t.Fatalf("JVM pid %d survived the crash of its test binary", pid)
	}
}
