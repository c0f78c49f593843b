package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/client/idtext"
)

// EncodeID and DecodeID round-trip every size's edges in every encoding,
// sort as the IDs do, and refuse what is not an ID of the size.
func TestEncodeDecodeID(t *testing.T) {
	js53 := Layout{TimeBits: 41, WorkerBits: 5, SequenceBits: 7, Epoch: DefaultEpoch, Unit: 1}
	tests := []struct {
		bits  uint
		width [4]int
	}{
		{DefaultLayout().IDBits(), [4]int{11, 11, 13, 13}},
		{js53.IDBits(), [4]int{9, 10, 11, 11}},
		{DenseIDBits, [4]int{11, 11, 13, 13}},
	}
	for _, tt := range tests {
		for i, enc := range []Encoding{Base62, Base58, Base36, Base32} {
			max := int64(math.MaxInt64)
			if tt.bits < 63 {
				max = 1<<tt.bits - 1
			}
			var prev string
			for _, id := range []int64{0, 1, 61, 62, 3843, 1 << 40, max - 1, max} {
				s, err := EncodeID(id, tt.bits, enc)
				if err != nil || len(s) != tt.width[i] {
					t.Fatalf("EncodeID(%d, %d, %s) = %q, %v; want width %d", id, tt.bits, enc, s, err, tt.width[i])
				}
				if s <= prev {
					t.Fatalf("%s: %q after %q: not increasing", enc, s, prev)
				}
				prev = s
				back, err := DecodeID(s, tt.bits, enc)
				if err != nil || back != id {
					t.Fatalf("DecodeID(%q, %d, %s) = %d, %v; want %d", s, tt.bits, enc, back, err, id)
				}
			}
			if tt.bits < 63 {
				if _, err := EncodeID(max+1, tt.bits, enc); !errors.Is(err, ErrInvalidID) || !errors.Is(err, idtext.ErrRange) {
					t.Errorf("EncodeID(2^%d, %s): %v, want ErrInvalidID and ErrRange", tt.bits, enc, err)
				}
			}
		}
	}
	for _, tt := range []struct {
		name string
		s    string
		bits uint
		enc  Encoding
		want error
	}{
		{"short", "abc", 63, Base62, idtext.ErrWidth},
		{"bad char", "0000000000_", 63, Base62, idtext.ErrChar},
		{"past 2^53", "80000000000", 53, Base32, idtext.ErrRange},
		{"64 bits", "00000000000", 64, Base62, ErrInvalidID},
	} {
		if _, err := DecodeID(tt.s, tt.bits, tt.enc); !errors.Is(err, ErrInvalidID) || !errors.Is(err, tt.want) {
			t.Errorf("%s: DecodeID(%q): %v, want ErrInvalidID and %v", tt.name, tt.s, err, tt.want)
		}
	}
	if _, err := EncodeID(-1, 63, Base62); !errors.Is(err, ErrInvalidID) {
		t.Errorf("EncodeID(-1): %v", err)
	}
	if _, err := ParseEncoding("base64"); !errors.Is(err, idtext.ErrEncoding) {
		t.Errorf("ParseEncoding(base64): %v", err)
	}
	if e, err := ParseEncoding("base58"); err != nil || e != Base58 {
		t.Errorf("ParseEncoding(base58) = %v, %v", e, err)
	}
}

// EncodeUUID and DecodeUUID round-trip and keep the UUIDs' order.
func TestEncodeDecodeUUID(t *testing.T) {
	us := []UUID{{}, {0x01, 0x9b, 0x76, 0xda, 0xa8, 0, 0x70}, {0x01, 0x9b, 0x76, 0xda, 0xa8, 1, 0x70}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for _, enc := range []Encoding{Base62, Base58, Base36, Base32} {
		var strs []string
		for _, u := range us {
			s, err := EncodeUUID(u, enc)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeUUID(s, enc)
			if err != nil || back != u {
				t.Fatalf("DecodeUUID(%q, %s) = %s, %v; want %s", s, enc, back, err, u)
			}
			strs = append(strs, s)
		}
		if !slices.IsSorted(strs) {
			t.Errorf("%s: %q not in the UUIDs' order", enc, strs)
		}
		if _, err := DecodeUUID(strs[1][1:], enc); !errors.Is(err, ErrInvalidUUID) || !errors.Is(err, idtext.ErrWidth) {
			t.Errorf("%s: a short UUID: %v", enc, err)
		}
	}
}

// textAnswer answers /segment/{tag}?count=N as a node of reset tags
// would: N strings, one a line, recording the format asked for.
func textAnswer(formats *[]string, line func(i int) string) func(w http.ResponseWriter, r *http.Request, n int) bool {
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		*formats = append(*formats, r.URL.Query().Get("format")+"|"+r.Header.Get("Authorization"))
		var b strings.Builder
		for i := range n {
			b.WriteString(line(i) + "\n")
		}
		writeBody(w, 200, b.String())
		return true
	}
}

// NextSegmentText returns the node's lines as they are, with the tag's
// token, in the format asked for, failing over from a node that fails or
// answers garbage; a bad count or tag is refused without a request.
func TestNextSegmentText(t *testing.T) {
	var formats []string
	down := startFake(t, 1, unavailable)
	garbage := startFake(t, 2, func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		writeBody(w, 200, "20261207000001\n\n")
		return true
	})
	good := startFake(t, 3, textAnswer(&formats, func(i int) string { return "2026120700012" + string(rune('3'+i)) }))
	c := newClient(t, Config{Servers: []string{down.addr, garbage.addr, good.addr}, Subset: 3, Attempts: 3, Tokens: map[string]string{"orders": "s3cret"}})
	for range 3 { // round-robin starts anywhere: each call reaches the good node
		lines, err := c.NextSegmentText(context.Background(), "orders", 3)
		if err != nil || !slices.Equal(lines, []string{"20261207000123", "20261207000124", "20261207000125"}) {
			t.Fatalf("NextSegmentText(orders, 3) = %q, %v", lines, err)
		}
	}
	lines, err := c.NextSegmentEncoded(context.Background(), "orders", 2, Base62)
	if err != nil || len(lines) != 2 {
		t.Fatalf("NextSegmentEncoded = %q, %v", lines, err)
	}
	if got := formats[len(formats)-1]; got != "base62|Bearer s3cret" {
		t.Errorf("last request: format|auth %q, want base62|Bearer s3cret", got)
	}
	if got := formats[0]; got != "|Bearer s3cret" {
		t.Errorf("first request: format|auth %q, want none and the token", got)
	}
	before := good.requests.Load() + down.requests.Load() + garbage.requests.Load()
	for _, tt := range []struct {
		name string
		call func() ([]string, error)
		code string
	}{
		{"zero", func() ([]string, error) { return c.NextSegmentText(context.Background(), "orders", 0) }, "invalid_count"},
		{"too many", func() ([]string, error) { return c.NextSegmentText(context.Background(), "orders", DefaultMaxBatch+1) }, "invalid_count"},
		{"bad tag", func() ([]string, error) { return c.NextSegmentText(context.Background(), "a/b", 1) }, "invalid_tag"},
		{"no encoding", func() ([]string, error) { return c.NextSegmentEncoded(context.Background(), "orders", 1, Encoding(0)) }, "invalid_format"},
	} {
		var rej *RejectedError
		if _, err := tt.call(); !errors.As(err, &rej) || rej.Code != tt.code {
			t.Errorf("%s: %v, want ErrRejected %s", tt.name, err, tt.code)
		}
	}
	if after := good.requests.Load() + down.requests.Load() + garbage.requests.Load(); after != before {
		t.Errorf("refused calls made %d requests", after-before)
	}
	// A node's refusal is the caller's, not retried.
	rejecting := startFake(t, 4, func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		writeBody(w, 400, `{"error":{"code":"invalid_format","message":"tag orders gives formatted numbers: format base62 does not apply"}}`)
		return true
	})
	c2 := newClient(t, Config{Servers: []string{rejecting.addr}})
	var rej *RejectedError
	if _, err := c2.NextSegmentEncoded(context.Background(), "orders", 1, Base32); !errors.As(err, &rej) || rej.Code != "invalid_format" || rejecting.requests.Load() != 1 {
		t.Errorf("a rejected format: %v after %d requests", err, rejecting.requests.Load())
	}
}

func TestParseLines(t *testing.T) {
	for _, tt := range []struct {
		body string
		n    int
		ok   bool
	}{
		{"a\nb\n", 2, true},
		{"a\nb", 2, false},
		{"a\n\n", 2, false},
		{"a\nb\nc\n", 2, false},
		{"a\n", 2, false},
		{"a b\n", 1, false},
		{"é\n", 1, false},
		{"", 1, false},
	} {
		got, err := parseLines([]byte(tt.body), tt.n)
		if (err == nil) != tt.ok {
			t.Errorf("parseLines(%q, %d) = %q, %v", tt.body, tt.n, got, err)
		}
	}
}

// NextSegment on a tag whose IDs are text (a tag that resets by period,
// with literal text in its format) is refused as such: a RejectedError
// naming NextSegmentText, the node not marked down, so the text call on
// the same client and node still works.
func TestNextSegmentOnTextIDs(t *testing.T) {
	var formats []string
	node := startFake(t, 1, textAnswer(&formats, func(i int) string { return fmt.Sprintf("ORD-2026-12-07-%06d", i+1) }))
	c := newClient(t, Config{Servers: []string{node.addr}, Subset: 1, Attempts: 3})
	for _, call := range []func() error{
		func() error { _, err := c.NextSegment(context.Background(), "orders"); return err },
		func() error { _, err := c.NextSegmentN(context.Background(), "orders", 50); return err },
	} {
		err := call()
		var rej *RejectedError
		if !errors.As(err, &rej) || rej.Status != 200 || !strings.Contains(rej.Message, "NextSegmentText") || !strings.Contains(rej.Message, "ORD-2026-12-07-000001") {
			t.Fatalf("an integer call on text IDs: %v, want a RejectedError (status 200) naming NextSegmentText and the text", err)
		}
	}
	lines, err := c.NextSegmentText(context.Background(), "orders", 2)
	if err != nil || !slices.Equal(lines, []string{"ORD-2026-12-07-000001", "ORD-2026-12-07-000002"}) {
		t.Fatalf("NextSegmentText after the refusals: %q, %v (the node must not be marked down)", lines, err)
	}
}
