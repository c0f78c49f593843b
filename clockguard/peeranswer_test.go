package clockguard

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
)

// rawPeer serves each connection to a listener on 127.0.0.1 with serve,
// which answers the requests it reads from r (readHead skips one request's
// head); it returns the listener's address.
func rawPeer(t *testing.T, serve func(c net.Conn, r *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			})
		}
	})
	return ln.Addr().String()
}

// readHead reads one request's head from r.
func readHead(r *bufio.Reader) error {
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if l == "\r\n" {
			return nil
		}
	}
}

// rawTimePeer answers every GET /time with answer(unixNs) and then closes
// the connection when closeAfter is set.
func rawTimePeer(t *testing.T, fc interface{ WallNanos() int64 }, answer func(body string) string, closeAfter bool) string {
	t.Helper()
	return rawPeer(t, func(c net.Conn, r *bufio.Reader) {
		for readHead(r) == nil {
			body := `{"unix_ns":` + strconv.FormatInt(fc.WallNanos(), 10) + `}`
			if _, err := io.WriteString(c, answer(body)); err != nil || closeAfter {
				return
			}
		}
	})
}

// TestPeerAnsweringConnectionCloseIsMeasured: a peer that answers /time
// with "Connection: close" (a node in graceful shutdown, keep-alives off,
// an HTTP/1.0 hop) is measured by the sample it answered, not counted as
// unreachable: its verdict on a held jump counts.
func TestPeerAnsweringConnectionCloseIsMeasured(t *testing.T) {
	fc := clocktest.NewFake(t0)
	addr := rawTimePeer(t, fc, func(body string) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}, true)
	p := newTestPeers(t, newGuard(t), fc, StaticPeers([]Peer{{WorkerID: 1, Addr: addr}}), PeersConfig{})
	snap, err := p.checkNow(context.Background())
	if err != nil {
		t.Fatalf("CheckNow: %v", err)
	}
	if snap.Unreachable != 0 || len(snap.Peers) != 1 || snap.Peers[0].Error != "" {
		t.Fatalf("a peer that answered every request counts as unreachable: %+v", snap.Peers)
	}
}

// TestOversizedTimeAnswerRefusedAtOnce: an answer that announces more than
// maxTimeBody is refused on its head, its body left unread: a peer that
// announces a huge body and trickles it does not hold the round to its
// Timeout (closing a net/http body drains it).
func TestOversizedTimeAnswerRefusedAtOnce(t *testing.T) {
	fc := clocktest.NewFake(t0)
	addr := rawPeer(t, func(c net.Conn, r *bufio.Reader) {
		if readHead(r) != nil {
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n"); err != nil {
			return
		}
		chunk := []byte(strings.Repeat(" ", 8192))
		for { // trickle, until the client hangs up
			if _, err := c.Write(chunk); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	const timeout = time.Minute
	p := newTestPeers(t, newGuard(t), fc, StaticPeers([]Peer{{WorkerID: 1, Addr: addr}}), PeersConfig{Timeout: timeout})
	start := time.Now()
	snap, _ := p.checkNow(context.Background())
	if took := time.Since(start); took >= timeout/2 {
		t.Fatalf("an oversized answer held the round %v (Timeout %v): %+v", took, timeout, snap.Peers)
	}
	if len(snap.Peers) != 1 || !strings.Contains(snap.Peers[0].Error, "larger than") {
		t.Fatalf("the oversized answer is not refused as one: %+v", snap.Peers)
	}
}
