package proc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func sh(t *testing.T, script string) *Proc {
	t.Helper()
	return Start(t, "sh", "/bin/sh", []string{"-c", script}, Env("GREETING=hello"))
}

func TestStartWaitLogAndKill(t *testing.T) {
	p := sh(t, `echo 'not json'; echo '{"message":"ready","greeting":"'"$GREETING"'"}'; exec sleep 60`)
	m, err := p.WaitLog("ready", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m["greeting"] != "hello" {
		t.Errorf("environment not passed: %v", m)
	}
	if len(p.LogLines()) != 1 || !strings.Contains(p.Tail(2), "not json") {
		t.Errorf("log lines %v, tail %q", p.LogLines(), p.Tail(2))
	}
	if p.Exited() {
		t.Fatal("exited early")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(time.Second); err != nil || code != -1 {
		t.Errorf("after kill: exit %d, %v; want -1 (signal)", code, err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("second kill: %v", err)
	}
}

func TestExitCodeAndWaitLogOnExit(t *testing.T) {
	tests := []struct {
		name   string
		script string
		code   int
	}{
		{"clean", "exit 0", 0},
		{"usage", "exit 2", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := sh(t, tc.script)
			if _, err := p.WaitLog("never", 10*time.Second); !errors.Is(err, ErrExited) {
				t.Errorf("WaitLog on an exiting process: %v, want ErrExited", err)
			}
			if code, err := p.Wait(10 * time.Second); err != nil || code != tc.code {
				t.Errorf("exit %d, %v; want %d", code, err, tc.code)
			}
		})
	}
}

func TestWaitLogTimesOut(t *testing.T) {
	p := sh(t, "exec sleep 60")
	if _, err := p.WaitLog("never", 50*time.Millisecond); err == nil || errors.Is(err, ErrExited) {
		t.Fatalf("WaitLog: %v, want a timeout", err)
	}
	if _, err := p.Wait(10 * time.Millisecond); err == nil {
		t.Fatal("Wait on a running process: no error")
	}
}

func TestCheckJSONLine(t *testing.T) {
	for _, tc := range []struct {
		line    string
		wantErr bool
		dup     bool
	}{
		{`{"level":"info","component":"http","message":"x"}`, false, false},
		{`{"a":{"b":1,"c":[{"d":1},{"d":2}]},"e":null}`, false, false},
		{`{"level":"info","component":"http","component":"http","message":"x"}`, true, true},
		{`{"a":{"b":1,"b":2}}`, true, true},
		{`{"a":[{"b":1,"b":2}]}`, true, true},
		{`not json`, true, false},
		{`[1,2]`, true, false},
		{`{"a":1}{"b":2}`, true, false},
		{`{"a":1`, true, false},
	} {
		err := CheckJSONLine([]byte(tc.line))
		if (err != nil) != tc.wantErr || errors.Is(err, ErrDuplicateKey) != tc.dup {
			t.Errorf("CheckJSONLine(%s) = %v, want error %v (duplicate key %v)", tc.line, err, tc.wantErr, tc.dup)
		}
	}
}
