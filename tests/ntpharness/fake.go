package ntpharness

import (
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// ntpEpochOffset is the number of seconds from 1900-01-01 (NTP era 0) to
// 1970-01-01 (Unix epoch).
const ntpEpochOffset = 2208988800

// FakeServer answers NTP client requests with the local time shifted by an adjustable offset.
type FakeServer struct {
	conn     *net.UDPConn
	offset   atomic.Int64 // time.Duration
	stratum  atomic.Uint32
	silent   atomic.Bool
	requests atomic.Int64
	done     chan struct{}
}

// StartFake starts a FakeServer on 127.0.0.1:0 (UDP) with offset 0 and
// stratum 2. t.Cleanup closes it.
func StartFake(t testing.TB) *FakeServer {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("ntpharness: fake NTP server: listen on 127.0.0.1 UDP: %v", err)
	}
	f := &FakeServer{conn: conn, done: make(chan struct{})}
	f.stratum.Store(2)
	go f.serve(t)
	t.Cleanup(func() {
		_ = conn.Close()
		<-f.done
	})
	return f
}

// Addr returns the server's "127.0.0.1:port", usable as a beevik/ntp address.
func (f *FakeServer) Addr() string { return f.conn.LocalAddr().String() }

// SetOffset sets how far the server's clock is ahead of the local clock
// (negative: behind). A client then measures a ClockOffset of about d.
func (f *FakeServer) SetOffset(d time.Duration) { f.offset.Store(int64(d)) }

// SetStratum sets the stratum of later replies, e.g. 16 (unsynchronized).
func (f *FakeServer) SetStratum(s uint8) { f.stratum.Store(uint32(s)) }

// SetSilent makes the server drop requests (true) or answer them (false).
func (f *FakeServer) SetSilent(silent bool) { f.silent.Store(silent) }

// Requests returns how many requests the server has answered.
func (f *FakeServer) Requests() int64 { return f.requests.Load() }

// serve answers requests until the socket is closed.
func (f *FakeServer) serve(t testing.TB) {
	defer close(f.done)
	req := make([]byte, 512)
	for {
		n, peer, err := f.conn.ReadFromUDP(req)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("ntpharness: fake NTP server: read: %v", err)
			}
			return
		}
		if n < 48 || f.silent.Load() {
			continue
		}
		// Count before replying: the client may look at Requests as soon as
		// it has the answer.
		f.requests.Add(1)
		if _, err := f.conn.WriteToUDP(f.reply(req[:48]), peer); err != nil {
			f.requests.Add(-1)
			t.Errorf("ntpharness: fake NTP server: reply to %v: %v", peer, err)
			continue
		}
	}
}

// reply builds the 48-byte server (mode 4) answer to the request header req.
func (f *FakeServer) reply(req []byte) []byte {
	off := time.Duration(f.offset.Load())
	recv := time.Now().Add(off)
	r := make([]byte, 48)
	r[0] = req[0]&0x38 | 4 // LI=0, VN copied from the request, mode 4 (server)
	r[1] = uint8(f.stratum.Load())
	r[2] = 6                                   // poll: 2^6 s
	r[3] = 0xEC                                // precision: 2^-20 s
	binary.BigEndian.PutUint32(r[4:], 0x0010)  // root delay: 16/65536 s ≈ 0.24 ms
	binary.BigEndian.PutUint32(r[8:], 0x0010)  // root dispersion: ≈ 0.24 ms
	copy(r[12:16], []byte{127, 0, 0, 1})       // reference ID (upstream address)
	putNTPTime(r[16:], recv.Add(-time.Second)) // reference time
	copy(r[24:32], req[40:48])                 // origin = client's transmit time
	putNTPTime(r[32:], recv)                   // receive time
	putNTPTime(r[40:], time.Now().Add(off))    // transmit time
	return r
}

// putNTPTime writes t as a 64-bit NTP timestamp (seconds since 1900, wrapping
// at the era boundary, and a 32-bit binary fraction).
func putNTPTime(b []byte, t time.Time) {
	sec := uint64(t.Unix() + ntpEpochOffset)
	frac := uint64(t.Nanosecond()) << 32 / uint64(time.Second)
	binary.BigEndian.PutUint32(b[0:], uint32(sec))
	binary.BigEndian.PutUint32(b[4:], uint32(frac))
}
