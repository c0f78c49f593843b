package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// uuidAnswer answers /uuids with n increasing version 7 UUIDs, or with
// what broken returns when set.
func uuidAnswer(broken func(n int) string) func(w http.ResponseWriter, r *http.Request, n int) bool {
	var next uint64
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		if r.URL.Path != "/uuids" {
			return false
		}
		if broken != nil {
			writeBody(w, 200, broken(n))
			return true
		}
		ms := uint64(time.Now().UnixMilli())
		var b bytes.Buffer
		for range n {
			next++
			fmt.Fprintf(&b, "%08x-%04x-7%03x-8%03x-%012x\n", ms>>16, ms&0xffff, next>>12&0xfff, next&0xfff, 0xabcdef)
		}
		writeBody(w, 200, b.String())
		return true
	}
}

// NextUUID parses the node's UUIDs, fails over from a node that is down or
// answers something that is not increasing version 7 UUIDs.
func TestNextUUID(t *testing.T) {
	down := startFake(t, 1, unavailable)
	bad := startFake(t, 2, uuidAnswer(func(n int) string { return strings.Repeat("00000000-0000-4000-8000-000000000000\n", n) }))
	good := startFake(t, 3, uuidAnswer(nil))
	c := newClient(t, Config{Servers: []string{down.addr, bad.addr, good.addr}, Attempts: 3})
	var prev string
	for range 5 {
		u, err := c.NextUUID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s := u.String()
		if len(s) != 36 || s[14] != '7' || s <= prev || time.Since(u.Time()) > time.Minute {
			t.Fatalf("NextUUID = %s (time %v) after %s", s, u.Time(), prev)
		}
		prev = s
	}
	us, err := c.NextUUIDN(context.Background(), 4)
	if err != nil || len(us) != 4 || us[0].String() <= prev {
		t.Fatalf("NextUUIDN(4) = %v, %v", us, err)
	}
	if _, err := c.NextUUIDN(context.Background(), 0); !errors.Is(err, ErrRejected) {
		t.Errorf("NextUUIDN(0): %v", err)
	}
	for _, body := range []string{"not a uuid\n", "0190b2d4-7c3e-7abc-8def-0123456789ab\n0190b2d4-7c3e-7abc-8def-0123456789aa\n"} {
		if _, err := parseUUIDs([]byte(body), strings.Count(body, "\n")); err == nil {
			t.Errorf("parseUUIDs accepted %q", body)
		}
	}
}
