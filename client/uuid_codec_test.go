package client

import (
	"database/sql"
	"database/sql/driver"
	"encoding"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var (
	_ encoding.TextMarshaler   = UUID{}
	_ encoding.TextUnmarshaler = (*UUID)(nil)
	_ sql.Scanner              = (*UUID)(nil)
	_ driver.Valuer            = UUID{}
)

const sampleUUIDText = "0190b2d4-7c3e-7abc-8def-0123456789ab"

var sampleUUID = UUID{0x01, 0x90, 0xb2, 0xd4, 0x7c, 0x3e, 0x7a, 0xbc, 0x8d, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab}

// The text forms a UUID accepts and refuses, through Parse, UnmarshalText
// and Scan alike.
func TestParseUUID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want UUID
		ok   bool
	}{
		{"canonical", sampleUUIDText, sampleUUID, true},
		{"upper case", "0190B2D4-7C3E-7ABC-8DEF-0123456789AB", sampleUUID, true},
		{"zero", "00000000-0000-0000-0000-000000000000", UUID{}, true},
		{"empty", "", UUID{}, false},
		{"35 characters", sampleUUIDText[:35], UUID{}, false},
		{"37 characters", sampleUUIDText + "0", UUID{}, false},
		{"no hyphens", "0190b2d47c3e7abc8def0123456789ab", UUID{}, false},
		{"hyphen misplaced", "0190b2d47-c3e-7abc-8def-0123456789ab", UUID{}, false},
		{"not hexadecimal", "0190b2d4-7c3e-7abc-8def-0123456789ag", UUID{}, false},
		{"braces", "{190b2d4-7c3e-7abc-8def-0123456789a}", UUID{}, false},
		{"not ASCII", "0190b2d4-7c3e-7abc-8def-0123456789\u00e9", UUID{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := Parse(tc.in)
			if tc.ok != (err == nil) || u != tc.want {
				t.Fatalf("Parse(%q) = %v, %v; want %v, ok %v", tc.in, u, err, tc.want, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidUUID) {
				t.Errorf("Parse(%q): %v does not wrap ErrInvalidUUID", tc.in, err)
			}
			for name, decode := range map[string]func(*UUID) error{
				"UnmarshalText":  func(v *UUID) error { return v.UnmarshalText([]byte(tc.in)) },
				"Scan(string)":   func(v *UUID) error { return v.Scan(tc.in) },
				"Scan([]byte)":   func(v *UUID) error { return v.Scan([]byte(tc.in)) },
				"json.Unmarshal": func(v *UUID) error { return json.Unmarshal([]byte(`"`+tc.in+`"`), v) },
			} {
				got := UUID{0xee} // left as it was on error
				err := decode(&got)
				want := tc.want
				if !tc.ok {
					want = UUID{0xee}
				}
				if tc.ok != (err == nil) || got != want {
					t.Errorf("%s(%q) = %v, %v; want %v, ok %v", name, tc.in, got, err, want, tc.ok)
				}
				if !tc.ok && !errors.Is(err, ErrInvalidUUID) {
					t.Errorf("%s(%q): %v does not wrap ErrInvalidUUID", name, tc.in, err)
				}
			}
		})
	}
}

// The encodings give the canonical form, and read it back.
func TestUUIDEncodings(t *testing.T) {
	text, err := sampleUUID.MarshalText()
	if err != nil || string(text) != sampleUUIDText {
		t.Fatalf("MarshalText = %q, %v; want %q", text, err, sampleUUIDText)
	}
	j, err := json.Marshal(struct{ ID UUID }{sampleUUID})
	if err != nil || string(j) != `{"ID":"`+sampleUUIDText+`"}` {
		t.Fatalf("json.Marshal = %s, %v", j, err)
	}
	v, err := sampleUUID.Value()
	if s, ok := v.(string); err != nil || !ok || s != sampleUUIDText {
		t.Fatalf("Value = %#v, %v; want the string %q", v, err, sampleUUIDText)
	}
	if !driver.IsValue(v) {
		t.Fatalf("Value %#v is not a driver.Value", v)
	}
	var back UUID
	if err := back.Scan(v); err != nil || back != sampleUUID {
		t.Fatalf("Scan(Value()) = %v, %v", back, err)
	}
}

// Scan takes the 16 bytes of a binary column, and refuses NULL, other
// lengths and other types with an error naming the problem.
func TestScanUUID(t *testing.T) {
	tests := []struct {
		name string
		src  any
		want UUID
		err  string // "" when it scans
	}{
		{"16 bytes", sampleUUID[:], sampleUUID, ""},
		{"16-byte string", string(sampleUUID[:]), sampleUUID, ""},
		{"36 characters", sampleUUIDText, sampleUUID, ""},
		{"NULL", nil, UUID{}, "NULL"},
		{"15 bytes", sampleUUID[:15], UUID{}, "15 bytes"},
		{"17 bytes", append(sampleUUID[:], 0), UUID{}, "17 bytes"},
		{"empty", []byte{}, UUID{}, "0 bytes"},
		{"an int64", int64(7), UUID{}, "int64"},
		{"a float", 1.5, UUID{}, "float64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var u UUID
			err := u.Scan(tc.src)
			switch {
			case tc.err == "" && (err != nil || u != tc.want):
				t.Fatalf("Scan(%v) = %v, %v; want %v", tc.src, u, err, tc.want)
			case tc.err != "" && (err == nil || !errors.Is(err, ErrInvalidUUID) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Scan(%v): %v; want an ErrInvalidUUID naming %q", tc.src, err, tc.err)
			}
		})
	}
	var n sql.Null[UUID]
	if err := n.Scan(nil); err != nil || n.Valid {
		t.Fatalf("sql.Null[UUID].Scan(nil) = %+v, %v; want not valid", n, err)
	}
	if err := n.Scan([]byte(sampleUUIDText)); err != nil || !n.Valid || n.V != sampleUUID {
		t.Fatalf("sql.Null[UUID].Scan(%q) = %+v, %v", sampleUUIDText, n, err)
	}
}
