package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// Releases that predate the cluster znode's features list: 5baa9d7, the
// release before --worker-id-range, and 5f6c4e9, which knows the range but
// neither the list nor tag incarnations.
const (
	releaseBeforeRange    = "5baa9d7"
	releaseBeforeFeatures = "5f6c4e9"
)

// oldBuilds holds the binaries built from git history, once per test
// binary: a build takes tens of seconds on a small machine.
var oldBuilds struct {
	mu   sync.Mutex
	bins map[string]string
	errs map[string]error
}

// oldRelease returns snowflaked built from commit of this repository's
// history. It skips the test only when the repository has no history for
// the commit (a shallow clone); a failed build fails it.
func oldRelease(t *testing.T, commit string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("this checkout has no git history for release %s (a shallow clone?): %v %s", commit, err, out)
	}
	oldBuilds.mu.Lock()
	defer oldBuilds.mu.Unlock()
	if bin, ok := oldBuilds.bins[commit]; ok {
		return bin
	}
	if err, ok := oldBuilds.errs[commit]; ok {
		t.Fatal(err)
	}
	if oldBuilds.bins == nil {
		oldBuilds.bins, oldBuilds.errs = map[string]string{}, map[string]error{}
	}
	bin, err := buildRelease(root, commit, oldBinDir)
	if err != nil {
		oldBuilds.errs[commit] = err
		t.Fatal(err)
	}
	oldBuilds.bins[commit] = bin
	return bin
}

// buildRelease extracts commit's tree (git archive) into a temporary
// directory and builds its cmd/snowflaked into dir.
func buildRelease(root, commit, dir string) (string, error) {
	src, err := os.MkdirTemp("", "snowflaked-release-"+commit+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin = pipe
	var aErr, uErr strings.Builder
	archive.Stderr, untar.Stderr = &aErr, &uErr
	if err := untar.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %v %s", commit, err, aErr.String())
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("untar %s: %v %s", commit, err, uErr.String())
	}
	bin := filepath.Join(dir, "snowflaked-"+commit)
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./cmd/snowflaked")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build release %s: %v\n%s", commit, err, out)
	}
	return bin, nil
}

// oldNodeArgs are the flags of an old release's node in cluster: no flag
// it does not know (--create-cluster), --worker-id-range only when given.
func oldNodeArgs(dir, zk, cluster, nodeKey, listen string, extra ...string) []string {
	args := []string{
		"--listen", listen, "--cache-file", filepath.Join(dir, "cache.json"), "--log-format", "json",
		"--zk", zk, "--cluster", cluster, "--node-key", nodeKey,
		"--zk-session-timeout", zkSession.String(), "--report-interval", reportInterval.String(),
		"--fence-ahead", clusterFence.String(), "--peer-interval", "1s",
	}
	return append(args, extra...)
}

// mustNotServe waits for p (listening on listen) to exit and fails the
// test if it exits 0 or ever answers /id with an ID meanwhile.
func mustNotServe(t *testing.T, p *proc, listen string) int {
	t.Helper()
	c := &http.Client{Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(startTimeout)
	for !p.Exited() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still running after %s:\n%s", p.Name(), startTimeout, p.Tail(20))
		}
		if resp, err := c.Get("http://" + listen + "/id"); err == nil {
			b := make([]byte, 64)
			n, _ := resp.Body.Read(b)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("%s served an ID: %q\n%s", p.Name(), b[:n], p.Tail(20))
			}
		}
		time.Sleep(pollEvery)
	}
	code := p.exitCode()
	if code == 0 {
		t.Fatalf("%s exited 0:\n%s", p.Name(), p.Tail(20))
	}
	t.Logf("%s exited %d without serving; last lines:\n%s", p.Name(), code, p.Tail(2))
	return code
}

// TestDowngrade_OldReleasesRefuseClustersWithFeatures builds the releases
// before the features list from git history and starts each on clusters
// this release created: one with --worker-id-range 512-1023, one plain
// (which requires tag incarnations). Each must exit non-zero without
// serving or writing anything. The control case, the same binary on a
// cluster it creates itself, serves: the refusal is the cluster's doing.
func TestDowngrade_OldReleasesRefuseClustersWithFeatures(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	z := zk.ConnectString()
	for _, c := range [][]string{
		{"cluster", "create", "ranged", "--zk", z, "--worker-id-range", "512-1023"},
		{"cluster", "create", "plain", "--zk", z},
	} {
		if code, out, errOut := ctl(t, c...); code != 0 {
			t.Fatalf("%v: exit %d %s %s", c, code, out, errOut)
		}
	}
	for _, tc := range []struct {
		release, cluster string
		args             []string // the release's flags for the cluster's settings
	}{
		{releaseBeforeRange, "ranged", nil}, // it has no --worker-id-range
		{releaseBeforeRange, "plain", nil},
		{releaseBeforeFeatures, "ranged", []string{"--worker-id-range", "512-1023"}},
		{releaseBeforeFeatures, "plain", nil},
	} {
		t.Run(tc.release+"/"+tc.cluster, func(t *testing.T) {
			bin := oldRelease(t, tc.release)
			listen := freeAddr(t)
			p := start(t, bin, oldNodeArgs(t.TempDir(), z, tc.cluster, "old-"+tc.release, listen, tc.args...))
			code := mustNotServe(t, p, listen)
			if !strings.Contains(p.Output(), "cluster znode /snowflaked/"+tc.cluster+" holds malformed data") {
				t.Errorf("exit %d for another reason than the cluster znode:\n%s", code, p.Tail(20))
			}
			rows := workerRows(t, zk, tc.cluster)
			if len(rows) != 0 {
				t.Errorf("the old release wrote worker rows: %+v", rows)
			}
		})
	}
	t.Run("control", func(t *testing.T) {
		bin := oldRelease(t, releaseBeforeRange)
		p := startNode(t, bin, oldNodeArgs(t.TempDir(), z, "old-own", "ctl", "127.0.0.1:0"))
		p.waitReadyz(http.StatusOK, readyTimeout)
		if ids := p.ids(3); len(ids) != 3 {
			t.Fatalf("control: %v", ids)
		}
	})
}

// TestDowngrade_RangeClusterUpgradedLocksOutTheReleaseBeforeRange: a
// cluster with --worker-id-range 512-1023 created by 5f6c4e9 is in the flat
// shape, and 5baa9d7 joins it with a worker ID outside the range (the
// defect). Once a node of this release has joined, the cluster znode is in
// the new shape and 5baa9d7 no longer starts.
func TestDowngrade_RangeClusterUpgradedLocksOutTheReleaseBeforeRange(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	z := zk.ConnectString()
	before := oldRelease(t, releaseBeforeFeatures)
	beforeRange := oldRelease(t, releaseBeforeRange)

	p := startNode(t, before, oldNodeArgs(t.TempDir(), z, "legacy", "made-by-5f6c4e9", "127.0.0.1:0", "--worker-id-range", "512-1023"))
	p.waitReadyz(http.StatusOK, readyTimeout)
	if _, w := decodeMs(p.ids(1)[0]); w < 512 {
		t.Fatalf("5f6c4e9 served worker %d outside its own range", w)
	}
	p.signal(syscall.SIGTERM)
	p.exitCode()

	// Before: the release before the range joins and serves a worker ID
	// outside 512-1023.
	dir := t.TempDir()
	q := startNode(t, beforeRange, oldNodeArgs(dir, z, "legacy", "rolled-back", "127.0.0.1:0"))
	q.waitReadyz(http.StatusOK, readyTimeout)
	if _, w := decodeMs(q.ids(1)[0]); w >= 512 {
		t.Fatalf("before: 5baa9d7 served worker %d, inside the range: the defect this test relies on is gone", w)
	} else {
		t.Logf("before: 5baa9d7 joined the flat cluster with range 512-1023 and served worker %d", w)
	}
	q.signal(syscall.SIGTERM)
	q.exitCode()

	// This release joins: the cluster znode is upgraded.
	r := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), z, "legacy", "current", "--worker-id-range", "512-1023"))
	r.waitReadyz(http.StatusOK, readyTimeout)
	r.signal(syscall.SIGTERM)
	r.exitCode()
	code, out, errOut := ctl(t, "cluster", "list", "--zk", z)
	if code != 0 || !strings.Contains(out, "worker_id_range") {
		t.Fatalf("cluster list after the upgrade: exit %d %s %s", code, out, errOut)
	}

	// After: the same 5baa9d7 node (its cache file too) refuses to start.
	listen := freeAddr(t)
	s := start(t, beforeRange, oldNodeArgs(dir, z, "legacy", "rolled-back", listen))
	mustNotServe(t, s, listen)
	if !strings.Contains(s.Output(), "holds malformed data") {
		t.Errorf("5baa9d7 failed for another reason:\n%s", s.Tail(20))
	}
	if rows := workerRows(t, zk, "legacy"); rows["rolled-back"].InService {
		t.Errorf("5baa9d7 is in service after the upgrade: %+v", rows["rolled-back"])
	}
}
