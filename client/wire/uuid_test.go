package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// reference is the text form written the long way, as RFC 9562 gives it.
func reference(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// The text form is the RFC's, and parsing it gives the UUID back, in
// either case; string order is byte order.
func TestUUIDRoundTrip(t *testing.T) {
	fixed := [][16]byte{
		{},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x01, 0x90, 0xb2, 0xd4, 0x7c, 0x3e, 0x7a, 0xbc, 0x8d, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab},
	}
	r := rand.New(rand.NewPCG(1, 2))
	all := fixed
	for range 1000 {
		var u [16]byte
		for i := range u {
			u[i] = byte(r.Uint32())
		}
		all = append(all, u)
	}
	for i, u := range all {
		s := FormatUUID(u)
		if want := reference(u); s != want {
			t.Fatalf("FormatUUID(%x) = %s, want %s", u, s, want)
		}
		if got := AppendUUID([]byte("x"), u); string(got) != "x"+s {
			t.Fatalf("AppendUUID(\"x\", %x) = %q", u, got)
		}
		if !IsUUIDText(s) || !IsUUIDText([]byte(s)) {
			t.Fatalf("IsUUIDText(%s) = false", s)
		}
		for _, in := range []string{s, strings.ToUpper(s)} {
			back, err := ParseUUID(in)
			if err != nil || back != u {
				t.Fatalf("ParseUUID(%s) = %x, %v; want %x", in, back, err, u)
			}
		}
		if i > 0 {
			prev := all[i-1]
			if (bytes.Compare(prev[:], u[:]) < 0) != (FormatUUID(prev) < s) {
				t.Fatalf("%s and %s: string order is not byte order", FormatUUID(prev), s)
			}
		}
	}
}

// What is not a UUID's text form is refused with ErrInvalidUUID.
func TestParseUUIDRefuses(t *testing.T) {
	for _, s := range []string{
		"",
		"not-a-uuid",
		"0190b2d4-7c3e-7abc-8def-0123456789a",   // 35 characters
		"0190b2d4-7c3e-7abc-8def-0123456789abc", // 37
		"0190b2d4x7c3e-7abc-8def-0123456789ab",  // no hyphen at 8
		"0190b2d4-7c3ex7abc-8def-0123456789ab",  // at 13
		"0190b2d4-7c3e-7abcx8def-0123456789ab",  // at 18
		"0190b2d4-7c3e-7abc-8defx0123456789ab",  // at 23
		"0190b2d4-7c3e-7abc-8def-0123456789ag",  // not hexadecimal
		"0190b2d47c3e7abc8def0123456789ab0000",  // 36 digits, no hyphen
		"{190b2d4-7c3e-7abc-8def-0123456789ab",
		"0190b2d4-7c3e-7abc-8def-0123456789\u00e9", // 36 bytes, not ASCII
	} {
		u, err := ParseUUID(s)
		if !errors.Is(err, ErrInvalidUUID) || u != [16]byte{} {
			t.Errorf("ParseUUID(%q) = %x, %v; want ErrInvalidUUID", s, u, err)
		}
	}
}

// Whatever the text, ParseUUID either refuses it or gives a UUID whose
// text form is the input in lower case.
func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{
		"0190b2d4-7c3e-7abc-8def-0123456789ab", "0190B2D4-7C3E-7ABC-8DEF-0123456789AB",
		"00000000-0000-0000-0000-000000000000", "", "0190b2d4-7c3e-7abc-8def-0123456789ag",
		"0190b2d4x7c3e-7abc-8def-0123456789ab",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUUID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidUUID) {
				t.Fatalf("ParseUUID(%q): %v does not wrap ErrInvalidUUID", s, err)
			}
			return
		}
		if got := FormatUUID(u); got != strings.ToLower(s) {
			t.Fatalf("ParseUUID(%q) = %s", s, got)
		}
	})
}

// The text form costs one allocation (the string), none when appended to
// room that is there.
func TestUUIDTextAllocs(t *testing.T) {
	u := [16]byte{0x01, 0x90, 0xb2, 0xd4, 0x7c, 0x3e, 0x7a, 0xbc, 0x8d, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab}
	buf := make([]byte, 0, 64)
	tests := []struct {
		name string
		f    func()
		max  float64
	}{
		{"FormatUUID", func() { _ = FormatUUID(u) }, 1},
		{"AppendUUID", func() { buf = AppendUUID(buf[:0], u) }, 0},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.f); got > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, got, tt.max)
		}
	}
}
