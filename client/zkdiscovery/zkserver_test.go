//go:build unix

package zkdiscovery

// A real standalone ZooKeeper on 127.0.0.1 for these tests: the small part
// of the server's tests/zkharness that they need, here because the client
// module cannot import the server's. It runs the ZooKeeper of ZK_CLASSPATH
// (a Java classpath), of ZOOKEEPER_HOME (an unpacked release) or of
// Debian's zookeeper package (/usr/share/java), with java from JAVA_HOME
// or PATH. Without them a test is skipped, loudly; with CI=true it fails
// instead.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// zkStartTimeout bounds the wait for the server to serve (a JVM start takes
// about 1.5 s on an idle machine; CI machines are slower).
const zkStartTimeout = 30 * time.Second

// startZooKeeper starts a standalone ZooKeeper on a free loopback port, with no
// limit on connections per client address (maxClientCnxns=0: the tests
// open hundreds from 127.0.0.1), waits until it serves, and returns its
// address, "127.0.0.1:port". t.Cleanup kills it; the tail of its log is in
// the test's output when the test failed.
func startZooKeeper(t testing.TB) string {
	t.Helper()
	java, cp, err := findZooKeeper()
	if err != nil {
		msg := fmt.Sprintf("ZOOKEEPER NOT FOUND (%v): install Debian's zookeeper package or set ZOOKEEPER_HOME", err)
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal(msg + "; CI is set, so this is a failure, not a skip")
		}
		t.Skip(msg + "; test skipped")
	}
	var last error
	for range 3 { // a free port may be taken meanwhile
		addr, err := runZooKeeper(t, java, cp)
		if err == nil {
			return addr
		}
		last = err
	}
	t.Fatalf("zookeeper: %v", last)
	return ""
}

// runZooKeeper runs one server; its error ends with the tail of the server's log.
func runZooKeeper(t testing.TB, java, cp string) (string, error) {
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	data := filepath.Join(dir, "data")
	cfg := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=srvr,conf\n", data, port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return "", fmt.Errorf("write zoo.cfg: %w", err)
	}
	logPath := filepath.Join(dir, "zookeeper.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", fmt.Errorf("create the server's log: %w", err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.jmx.log4j.disable=true",
		"-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", "zoo.cfg")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	cmd.SysProcAttr = sysProcAttr()
	runtime.LockOSThread() // Pdeathsig fires when the forking thread exits: keep it a live one
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return "", fmt.Errorf("start java: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	deadline := time.Now().Add(zkStartTimeout)
	for {
		out, err := fourLetter(addr, "srvr")
		if err == nil && strings.Contains(out, "Mode: standalone") {
			if conf, err := fourLetter(addr, "conf"); err == nil && strings.Contains(conf, "dataDir="+data) {
				break
			}
			kill()
			return "", fmt.Errorf("port %d is another ZooKeeper's", port)
		}
		select {
		case <-exited:
			return "", fmt.Errorf("ZooKeeper exited before serving:\n%s", tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			kill()
			return "", fmt.Errorf("ZooKeeper not serving on %s after %v:\n%s", addr, zkStartTimeout, tail(logPath))
		}
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("zookeeper: the tail of %s:\n%s", logPath, tail(logPath))
		}
	})
	return addr, nil
}

// findZooKeeper returns the java binary and ZooKeeper's classpath.
func findZooKeeper() (java, cp string, err error) {
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		java = filepath.Join(jh, "bin", "java")
	} else if java, err = exec.LookPath("java"); err != nil {
		return "", "", fmt.Errorf("no java: %w", err)
	}
	if _, err := os.Stat(java); err != nil {
		return "", "", fmt.Errorf("java: %w", err)
	}
	if cp := os.Getenv("ZK_CLASSPATH"); cp != "" {
		return java, cp, nil
	}
	if home := os.Getenv("ZOOKEEPER_HOME"); home != "" {
		var jars []string
		for _, pat := range []string{"*.jar", "lib/*.jar"} {
			m, _ := filepath.Glob(filepath.Join(home, pat))
			jars = append(jars, m...)
		}
		if len(jars) == 0 {
			return "", "", fmt.Errorf("ZOOKEEPER_HOME=%s: no jars", home)
		}
		return java, strings.Join(jars, string(filepath.ListSeparator)), nil
	}
	const debian = "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(debian); err != nil {
		return "", "", fmt.Errorf("ZK_CLASSPATH and ZOOKEEPER_HOME unset and no Debian zookeeper: %w", err)
	}
	cp = debian
	if j := "/usr/share/java/slf4j-simple.jar"; exists(j) {
		cp += string(filepath.ListSeparator) + j // without it ZooKeeper logs nothing
	}
	return java, cp, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// freePort returns a loopback port free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// fourLetter sends a four-letter command and returns the answer.
func fourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, io.EOF) {
		return string(b), err
	}
	return string(b), nil
}

// tail is the last 40 lines of the file at path.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}
