// Package zkharness starts real ZooKeeper servers (a standalone server or a
// quorum ensemble) on free loopback ports for integration tests.
//
// It runs the ZooKeeper from Debian's zookeeper package (/usr/share/java), or
// the one named by ZK_CLASSPATH (a Java classpath) or ZOOKEEPER_HOME (an
// unpacked release). Each server is one JVM in its own process group, with
// its config, data and log in a t.TempDir(); t.Cleanup kills it. On Linux the
// kernel also kills the JVM if the test binary dies without its cleanups.
//
// Readiness is judged by the four-letter command srvr (a "Mode: " line), not
// ruok: ruok answers imok before a server serves and after it lost quorum.
package zkharness

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/testpki"
)

// StartTimeout bounds how long StartStandalone, StartEnsemble and StartAll
// wait for servers to serve. It is generous because CI machines are slow; a
// JVM start takes about 1.3 s on an idle machine.
const StartTimeout = 30 * time.Second

const (
	pollInterval  = 50 * time.Millisecond
	logTailLines  = 40
	startAttempts = 3                // tries when a freshly allocated port was taken meanwhile
	stopGrace     = 15 * time.Second // SIGTERM to exit, before Stop escalates to SIGKILL
	killGrace     = 10 * time.Second // SIGKILL to exit
	mainClass     = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
)

var debianJars = []string{"/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"}

// debianNettyJars are the Netty jars Debian's zookeeper.jar manifest lacks
// and its NettyServerCnxnFactory (the TLS port's) needs: without them the
// TLS handshake dies with NoClassDefFoundError ByteToMessageDecoder.
var debianNettyJars = []string{"/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar",
	"/usr/share/java/netty-transport-native-unix-common.jar"}

// Available reports whether a ZooKeeper installation can be found, and where
// (the Java classpath to run it with) or why not. It looks at ZK_CLASSPATH,
// then ZOOKEEPER_HOME, then Debian's /usr/share/java/zookeeper.jar, and
// requires a java binary ($JAVA_HOME/bin/java or java on PATH).
func Available() (classpath string, err error) {
	if _, err := javaPath(); err != nil {
		return "", err
	}
	return findClasspath()
}

func findClasspath() (string, error) {
	if cp := os.Getenv("ZK_CLASSPATH"); cp != "" {
		for _, e := range filepath.SplitList(cp) {
			if _, err := os.Stat(e); err != nil && !strings.HasSuffix(e, "*") {
				return "", fmt.Errorf("ZK_CLASSPATH entry: %w", err)
			}
		}
		return cp, nil
	}
	if home := os.Getenv("ZOOKEEPER_HOME"); home != "" {
		var jars []string
		for _, pat := range []string{"*.jar", "lib/*.jar"} {
			m, _ := filepath.Glob(filepath.Join(home, pat))
			jars = append(jars, m...)
		}
		if !slices.ContainsFunc(jars, func(j string) bool { return strings.HasPrefix(filepath.Base(j), "zookeeper") }) {
			return "", fmt.Errorf("ZOOKEEPER_HOME=%s: no zookeeper*.jar in it or in its lib/", home)
		}
		return strings.Join(jars, string(filepath.ListSeparator)), nil
	}
	if _, err := os.Stat(debianJars[0]); err != nil {
		return "", fmt.Errorf("ZK_CLASSPATH and ZOOKEEPER_HOME unset and no Debian zookeeper: %w", err)
	}
	cp := debianJars[0]
	if _, err := os.Stat(debianJars[1]); err == nil {
		cp += string(filepath.ListSeparator) + debianJars[1] // without it ZooKeeper logs nothing
	}
	for _, j := range debianNettyJars {
		if _, err := os.Stat(j); err == nil {
			cp += string(filepath.ListSeparator) + j
		}
	}
	return cp, nil
}

func javaPath() (string, error) {
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		j := filepath.Join(jh, "bin", "java")
		if _, err := os.Stat(j); err != nil {
			return "", fmt.Errorf("JAVA_HOME is set but: %w", err)
		}
		return j, nil
	}
	j, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("no java to run ZooKeeper with: %w", err)
	}
	return j, nil
}

// Require returns the ZooKeeper classpath, or skips the test with a loud
// message when ZooKeeper cannot be found. When env CI is true it fails the
// test instead: CI must never silently skip integration tests.
func Require(t testing.TB) string {
	t.Helper()
	cp, err := Available()
	if err == nil {
		return cp
	}
	msg := fmt.Sprintf("ZOOKEEPER NOT FOUND (%v): install Debian's zookeeper package "+
		"(apt-get install -y zookeeper) or set ZOOKEEPER_HOME", err)
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatal(msg + "; CI is set, so this is a failure, not a skip")
	}
	t.Skip(msg + "; integration test skipped")
	return ""
}

// Server is one ZooKeeper server process. Its ports and data directory stay
// the same across Stop/Kill and Start.
type Server struct {
	id                                 int
	clientPort, peerPort, electionPort int
	securePort                         int // the TLS client port; 0 without TLS
	dir, java, classpath               string

	mu sync.Mutex
	p  *proc // the latest process; nil before the first Start
}

type proc struct {
	pid  int
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // Wait's result; read only after done is closed
}

// ID returns the server's id: its myid in an ensemble, 1 for a standalone server.
func (s *Server) ID() int { return s.id }

// ClientAddr returns the client address, "127.0.0.1:port".
func (s *Server) ClientAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort))
}

// SecureAddr returns the TLS client address (secureClientPort),
// "127.0.0.1:port", or "" for a server started without TLS.
func (s *Server) SecureAddr() string {
	if s.securePort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.securePort))
}

// LogPath returns the file that receives the server's output (all its runs).
func (s *Server) LogPath() string { return filepath.Join(s.dir, "zookeeper.log") }

func (s *Server) proc() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Running reports whether the server's process is alive (serving or not).
func (s *Server) Running() bool { return s.exited() == nil }

// exited returns nil while the process runs, otherwise why it does not.
func (s *Server) exited() error {
	p := s.proc()
	if p == nil {
		return errors.New("never started")
	}
	select {
	case <-p.done:
		return fmt.Errorf("process %d exited: %v", p.pid, p.err)
	default:
		return nil
	}
}

// Start launches the server process (again) with the same config, data
// directory and ports. It does not wait for it to serve: see WaitServing
// (an ensemble member serves only once a quorum runs).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		select {
		case <-s.p.done:
		default:
			return fmt.Errorf("zk server %d: already running (pid %d)", s.id, s.p.pid)
		}
	}
	logf, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("zk server %d: %w", s.id, err)
	}
	defer logf.Close() // the child has its own copy
	fmt.Fprintf(logf, "=== zkharness: starting server %d at %s ===\n", s.id, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.java, "-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.jmx.log4j.disable=true",
		"-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", s.classpath, mainClass, "zoo.cfg")
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, logf, logf
	cmd.SysProcAttr = sysProcAttr()
	runtime.LockOSThread() // Pdeathsig fires when the forking thread exits: keep it a live one
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("zk server %d: start java: %w", s.id, err)
	}
	p := &proc{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.p = p
	return nil
}

// Stop sends SIGTERM to the server's process group and waits for it to exit,
// escalating to SIGKILL after 15 s. Stopping a stopped server is a no-op.
func (s *Server) Stop() error {
	if err := s.signal(syscall.SIGTERM, stopGrace); err != nil {
		return errors.Join(err, s.signal(syscall.SIGKILL, killGrace))
	}
	return nil
}

// Kill sends SIGKILL to the server's process group and waits for it to exit.
// Killing a stopped server is a no-op.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL, killGrace) }

func (s *Server) signal(sig syscall.Signal, grace time.Duration) error {
	p := s.proc()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("zk server %d: %v to process group %d: %w", s.id, sig, p.pid, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
		return fmt.Errorf("zk server %d: pid %d still running %v after %v", s.id, p.pid, grace, sig)
	}
}

// Mode returns the server's mode ("standalone", "leader", "follower" or
// "observer") from the four-letter command srvr, or an error if the server
// does not serve (not running, not answering, or without quorum).
func (s *Server) Mode() (string, error) {
	if err := s.exited(); err != nil {
		return "", fmt.Errorf("zk server %d: %w", s.id, err)
	}
	out, err := fourLetter(s.ClientAddr(), "srvr", time.Second)
	if err != nil {
		return "", fmt.Errorf("zk server %d: %w", s.id, err)
	}
	mode, err := parseMode(out)
	if err != nil {
		return "", fmt.Errorf("zk server %d: %w", s.id, err)
	}
	return mode, nil
}

// WaitServing waits until the server serves (Mode succeeds) and its client
// port is really its own (not another server's that took a port in a race).
// It fails at once if the process exits; its errors end with the tail of the
// server's log.
func (s *Server) WaitServing(timeout time.Duration) error {
	var last error
	if poll(timeout, func() bool {
		if last = s.exited(); last != nil {
			return true
		}
		if _, last = s.Mode(); last == nil {
			last = s.ownsPort()
		}
		return last == nil
	}) && last == nil {
		return nil
	}
	if s.Running() {
		last = fmt.Errorf("not serving after %v: %w", timeout, last)
	}
	return fmt.Errorf("zk server %d (%s): %w\n--- last %d lines of %s ---\n%s",
		s.id, s.ClientAddr(), last, logTailLines, s.LogPath(), tail(s.LogPath(), logTailLines))
}

// ownsPort checks, with the four-letter command conf, that the server
// answering on the client port uses this server's data directory.
func (s *Server) ownsPort() error {
	out, err := fourLetter(s.ClientAddr(), "conf", time.Second)
	if err != nil {
		return fmt.Errorf("zk server %d: %w", s.id, err)
	}
	if want := "dataDir=" + filepath.Join(s.dir, "data"); !strings.Contains(out, want) {
		return fmt.Errorf("zk server %d: port %d is served by another ZooKeeper (conf lacks %q)", s.id, s.clientPort, want)
	}
	return nil
}

// Cluster is a standalone server or an ensemble.
type Cluster struct {
	// Servers are the cluster's servers, ordered by ID (ID 1 first).
	Servers  []*Server
	ensemble bool
	tls      *TLS // nil: no TLS port
	logged   bool // the logs' tails are already in a reported error
}

// TLS is how StartStandaloneTLS sets up the server's TLS client port.
type TLS struct {
	// PKI holds the server's certificate and key (for 127.0.0.1) and the
	// CA that client certificates must chain to (testpki.New makes one).
	PKI testpki.PKI
	// ClientAuth is ssl.clientAuth: "need" (mutual TLS: a client without a
	// certificate the CA signed is refused), "want" or "none" (only the
	// server is verified).
	ClientAuth string
}

// zooCfg are the zoo.cfg lines of the TLS client port on port (tested
// against Debian's ZooKeeper 3.8: PEM key and trust stores, Netty).
func (t *TLS) zooCfg(port int) string {
	return fmt.Sprintf("secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n"+
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"+
		"ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n"+
		"ssl.trustStore.location=%s\nssl.trustStore.type=PEM\n"+
		"ssl.clientAuth=%s\n", port, t.PKI.ServerKeyCert, t.PKI.CA, t.ClientAuth)
}

// StartStandalone starts one standalone server, waits until it serves and
// registers a t.Cleanup that kills it. It skips or fails the test as Require
// does when ZooKeeper is not installed.
func StartStandalone(t testing.TB) *Cluster {
	t.Helper()
	return start(t, 1, false, nil)
}

// StartStandaloneTLS is StartStandalone with a TLS client port besides the
// plain one (Server.SecureAddr, Cluster.SecureConnectString), set up as
// tls says. Readiness is still checked on the plain port.
func StartStandaloneTLS(t testing.TB, tls TLS) *Cluster {
	t.Helper()
	switch tls.ClientAuth {
	case "need", "want", "none":
	default:
		t.Fatalf("zkharness: StartStandaloneTLS: ClientAuth %q, want need, want or none", tls.ClientAuth)
	}
	return start(t, 1, false, &tls)
}

// StartEnsemble starts n servers as a quorum ensemble on loopback, waits
// until every server serves and exactly one is leader, and registers a
// t.Cleanup that kills them.
func StartEnsemble(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("zkharness: StartEnsemble: n=%d, want >= 1", n)
	}
	return start(t, n, true, nil)
}

func start(t testing.TB, n int, ensemble bool, tls *TLS) *Cluster {
	t.Helper()
	cp := Require(t)
	java, err := javaPath()
	if err != nil {
		t.Fatalf("zkharness: %v", err)
	}
	for attempt := 1; attempt <= startAttempts; attempt++ {
		began := time.Now()
		c, err := launch(t, java, cp, n, ensemble, tls)
		if err == nil {
			t.Logf("zkharness: %d server(s) serving at %s after %v", n, c.ConnectString(), time.Since(began).Round(time.Millisecond))
			return c
		}
		c.killAll(t)
		if attempt == startAttempts || !c.addrInUse() {
			c.logged = true
			t.Fatalf("zkharness: starting %d server(s) (attempt %d of %d): %v", n, attempt, startAttempts, err)
		}
		t.Logf("zkharness: attempt %d lost a port race, retrying on new ports: %v", attempt, err)
	}
	return nil // not reached: the last attempt returns or calls t.Fatalf
}

// launch starts a fresh cluster; it returns the cluster even on error so the
// caller can inspect and kill it.
func launch(t testing.TB, java, cp string, n int, ensemble bool, tls *TLS) (*Cluster, error) {
	root := t.TempDir() // before the Cleanup below: cleanups run last-in first-out
	c := &Cluster{ensemble: ensemble, tls: tls}
	t.Cleanup(func() { c.cleanup(t) })
	ports, err := FreePorts(4 * n)
	if err != nil {
		return c, err
	}
	for i := range n {
		s := &Server{id: i + 1, clientPort: ports[4*i], peerPort: ports[4*i+1], electionPort: ports[4*i+2],
			dir: filepath.Join(root, fmt.Sprintf("zk%d", i+1)), java: java, classpath: cp}
		if tls != nil {
			s.securePort = ports[4*i+3]
		}
		if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o755); err != nil {
			return c, err
		}
		if ensemble {
			if err := os.WriteFile(filepath.Join(s.dir, "data", "myid"), fmt.Appendf(nil, "%d\n", s.id), 0o644); err != nil {
				return c, err
			}
		}
		c.Servers = append(c.Servers, s)
	}
	for _, s := range c.Servers {
		if err := os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(c.config(s)), 0o644); err != nil {
			return c, err
		}
	}
	if err := c.StartAll(); err != nil {
		return c, err
	}
	if ensemble {
		var lerr error
		if !poll(StartTimeout, func() bool { _, lerr = c.Leader(); return lerr == nil }) {
			return c, fmt.Errorf("ensemble serves but has no single leader: %w", lerr)
		}
	}
	return c, nil
}

func (c *Cluster) config(s *Server) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=*\n", filepath.Join(s.dir, "data"), s.clientPort)
	if c.tls != nil {
		b.WriteString(c.tls.zooCfg(s.securePort))
	}
	if c.ensemble {
		b.WriteString("standaloneEnabled=false\n")
		for _, o := range c.Servers {
			fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", o.id, o.peerPort, o.electionPort)
		}
	}
	return b.String()
}

// ConnectString returns the client addresses, "127.0.0.1:p1,127.0.0.1:p2,...".
func (c *Cluster) ConnectString() string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.ClientAddr()
	}
	return strings.Join(addrs, ",")
}

// SecureConnectString returns the TLS client addresses,
// "127.0.0.1:p1,…" ("" for a cluster started without TLS).
func (c *Cluster) SecureConnectString() string {
	var addrs []string
	for _, s := range c.Servers {
		if a := s.SecureAddr(); a != "" {
			addrs = append(addrs, a)
		}
	}
	return strings.Join(addrs, ",")
}

// Leader returns the one server whose Mode is "leader". It is an error if
// there is none (a standalone server has none) or more than one.
func (c *Cluster) Leader() (*Server, error) {
	var leaders []*Server
	var modes []string
	for _, s := range c.Servers {
		m, err := s.Mode()
		if err != nil {
			m = err.Error()
		} else if m == "leader" {
			leaders = append(leaders, s)
		}
		modes = append(modes, fmt.Sprintf("%d: %s", s.id, m))
	}
	if len(leaders) == 1 {
		return leaders[0], nil
	}
	return nil, fmt.Errorf("%d leaders, want 1 (%s)", len(leaders), strings.Join(modes, "; "))
}

// WaitServing waits until a quorum of the servers (all of them for a
// standalone server) serve.
func (c *Cluster) WaitServing(timeout time.Duration) error {
	need := len(c.Servers)/2 + 1
	var status []string
	if poll(timeout, func() bool {
		status = status[:0]
		for _, s := range c.Servers {
			if _, err := s.Mode(); err != nil {
				status = append(status, err.Error())
			}
		}
		return len(c.Servers)-len(status) >= need
	}) {
		return nil
	}
	return fmt.Errorf("zookeeper: fewer than %d of %d servers serve after %v: %s",
		need, len(c.Servers), timeout, strings.Join(status, "; "))
}

// StopAll stops (SIGTERM) every running server and waits for them to exit.
func (c *Cluster) StopAll() error {
	var errs []error
	for _, s := range c.Servers {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}

// StartAll starts every server that is not running and waits, bounded by
// StartTimeout, until each of them serves.
func (c *Cluster) StartAll() error {
	var started []*Server
	for _, s := range c.Servers {
		if s.Running() {
			continue
		}
		if err := s.Start(); err != nil {
			return err
		}
		started = append(started, s)
	}
	deadline := time.Now().Add(StartTimeout)
	for _, s := range started {
		if err := s.WaitServing(time.Until(deadline)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) killAll(t testing.TB) {
	for _, s := range c.Servers {
		if err := s.Kill(); err != nil {
			t.Errorf("zkharness: %v", err)
		}
	}
}

func (c *Cluster) cleanup(t testing.TB) {
	c.killAll(t)
	if t.Failed() && !c.logged {
		for _, s := range c.Servers {
			t.Logf("zkharness: last %d lines of %s:\n%s", logTailLines, s.LogPath(), tail(s.LogPath(), logTailLines))
		}
	}
}

// addrInUse reports whether a server failed because a port was taken.
func (c *Cluster) addrInUse() bool {
	for _, s := range c.Servers {
		if b, err := os.ReadFile(s.LogPath()); err == nil && strings.Contains(string(b), "Address already in use") {
			return true
		}
	}
	return false
}

// FreePorts returns n distinct free loopback ports: all are bound at once,
// then released, so they can still be lost to a race (start retries).
//
// They come from below the kernel's ephemeral range. A follower binds its
// quorum port only when it becomes leader, possibly long after start; a port
// from the ephemeral range may by then be the source port of some outgoing
// connection (load generators open many), and the election fails with
// "Address already in use" until the ensemble has no quorum at all.
func FreePorts(n int) ([]int, error) {
	low, _ := ephemeralRange()
	lo := max(10000, low-16000)
	ports := make([]int, 0, n)
	seen := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries >= 100*n {
			return nil, fmt.Errorf("free port: only %d of %d free below %d after %d tries", len(ports), n, low, tries)
		}
		p := lo + rand.IntN(low-lo)
		if seen[p] {
			continue
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		defer l.Close()
		ports = append(ports, p)
	}
	return ports, nil
}

// ephemeralRange returns the kernel's range of ports for outgoing
// connections (Linux's default when it cannot be read).
func ephemeralRange() (low, high int) {
	low, high = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return low, high
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return low, high
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l < 12000 || h < l {
		return low, high
	}
	return l, h
}

// poll calls cond every pollInterval until it returns true (poll reports
// true) or timeout passes; cond runs at least once. Bounded in time and count.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for range max(1, int(timeout/pollInterval)+1) {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			break
		}
		time.Sleep(pollInterval)
	}
	return false
}

// fourLetter sends a four-letter command and returns the whole answer.
func fourLetter(addr, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	b, err := io.ReadAll(io.LimitReader(conn, 64<<10))
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	return string(b), nil
}

// parseMode extracts the mode from srvr output.
func parseMode(out string) (string, error) {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode:"); ok {
			if mode := strings.TrimSpace(v); mode != "" {
				return mode, nil
			}
		}
	}
	if strings.Contains(out, "not currently serving") {
		return "", errors.New("srvr: not serving (no quorum yet or lost it)")
	}
	if len(out) > 200 {
		out = out[:200] + "..."
	}
	return "", fmt.Errorf("srvr: no Mode: line in %q", out)
}

// tail returns the last n lines of a file (or why it cannot).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
