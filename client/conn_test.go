package client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawNode is a loopback server that answers each request it reads with
// answer (which writes whatever it likes on the connection); it counts
// the bytes answer wrote before the client hung up.
type rawNode struct {
	addr    string
	written atomic.Int64
	conns   atomic.Int64
}

func startRaw(t *testing.T, answer func(w io.Writer) error) *rawNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &rawNode{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.conns.Add(1)
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					// One request: lines up to the empty one.
					for {
						l, err := r.ReadString('\n')
						if err != nil {
							return
						}
						if l == "\r\n" {
							break
						}
					}
					cw := &countingWriter{w: c, n: &n.written}
					if answer(cw) != nil {
						return
					}
				}
			})
		}
	})
	return n
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n.Add(int64(k))
	return k, err
}

// An answer larger than the IDs asked for can take is refused from its
// Content-Length, before its body is read, or once its chunks pass the
// bound: a node answering 100 MiB for one ID costs the client a few bytes,
// and the call fails over. So is an answer that is not HTTP as a node or
// a proxy speaks it.
func TestAnswerSizeIsBounded(t *testing.T) {
	tests := []struct {
		name   string
		answer func(w io.Writer) error
		want   string // in the failover error
	}{
		{"100 MiB body for one ID", func(w io.Writer) error {
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n"); err != nil {
				return err
			}
			zeros := make([]byte, 64<<10)
			for range 1600 {
				if _, err := w.Write(zeros); err != nil {
					return err
				}
			}
			return nil
		}, "a body of 104857600 bytes"},
		{"endless chunked body", func(w io.Writer) error {
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
				return err
			}
			chunk := "10000\r\n" + strings.Repeat("1", 64<<10) + "\r\n"
			for range 1600 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return err
				}
			}
			return nil
		}, "a chunked body of more than the 20 bytes expected at most"},
		{"chunked body of one-byte chunks, endless", func(w io.Writer) error {
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
				return err
			}
			for range 1 << 20 {
				if _, err := io.WriteString(w, "1\r\n1\r\n"); err != nil {
					return err
				}
			}
			return nil
		}, "a chunked body of more than the 20 bytes expected at most"},
		{"chunk size not hex", func(w io.Writer) error {
			_, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n1\n\r\n0\r\n\r\n")
			return err
		}, `chunk size "zz"`},
		{"chunk not followed by CRLF", func(w io.Writer) error {
			_, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n1\nxx\r\n0\r\n\r\n")
			return err
		}, "a chunk not followed by CRLF"},
		{"endless chunk extension", func(w io.Writer) error {
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x="); err != nil {
				return err
			}
			_, err := w.Write([]byte(strings.Repeat("a", 1<<20)))
			return err
		}, "a chunk line longer than"},
		{"a coding other than chunked", func(w io.Writer) error {
			_, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
			return err
		}, `Transfer-Encoding "gzip, chunked" (want chunked)`},
		{"no Content-Length", func(w io.Writer) error {
			_, err := io.WriteString(w, "HTTP/1.1 200 OK\r\n\r\n1\n")
			return err
		}, "no Content-Length"},
		{"endless header", func(w io.Writer) error {
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nX: "); err != nil {
				return err
			}
			_, err := w.Write([]byte(strings.Repeat("a", 1<<20)))
			return err
		}, "headers longer than"},
		{"not HTTP", func(w io.Writer) error {
			_, err := io.WriteString(w, "SSH-2.0-OpenSSH_9.6\r\n\r\n")
			return err
		}, "status line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := startRaw(t, tc.answer)
			good := startFake(t, 2, nil)
			var failover atomic.Value
			c := newClient(t, Config{Servers: []string{bad.addr, good.addr}, Timeout: 5 * time.Second,
				Hooks: Hooks{Failover: func(e FailoverEvent) { failover.Store(e.Err.Error()) }}})
			if _, err := c.Next(context.Background()); err != nil {
				t.Fatalf("Next: %v", err)
			}
			got, _ := failover.Load().(string)
			if !strings.Contains(got, tc.want) {
				t.Fatalf("failover error %q, want it to mention %q", got, tc.want)
			}
			// The client hung up: the bad node could write little more
			// than a socket buffer.
			if w := bad.written.Load(); w > 16<<20 {
				t.Fatalf("the bad node wrote %d bytes before the client hung up", w)
			}
		})
	}
}

// A keep-alive connection the node closed while idle is replaced by a new
// one: the call succeeds without a failover.
func TestClosedIdleConnectionIsReplaced(t *testing.T) {
	var seq atomic.Int64
	node := startRaw(t, func(w io.Writer) error {
		id := seq.Add(1)
		body := strconv.FormatInt(id, 10) + "\n"
		if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
			return err
		}
		return errors.New("close after one answer") // without saying so
	})
	c := newClient(t, Config{Servers: []string{node.addr}})
	for i := range 3 {
		if _, err := c.Next(context.Background()); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if st := c.Stats(); st.Failovers != 0 || st.Errors != 0 {
		t.Fatalf("stats %+v: want no failover", st)
	}
	if n := node.conns.Load(); n != 3 {
		t.Fatalf("%d connections, want one per call (the node closes each)", n)
	}
}
