package wire

import (
	"encoding/hex"
	"errors"
	"fmt"
)

// UUIDTextLen is the length of a UUID's text form: 32 hexadecimal digits in
// groups of 8-4-4-4-12, joined by 4 hyphens.
const UUIDTextLen = 36

// ErrInvalidUUID is the error of ParseUUID for text that is not a UUID.
var ErrInvalidUUID = errors.New("invalid uuid")

// AppendUUID appends the text form of u (its 16 bytes in network order) to
// b: the canonical form, 36 lower-case characters, 8-4-4-4-12, as /uuid and
// /uuids answer it. Its string order is u's byte order.
func AppendUUID(b []byte, u [16]byte) []byte {
	var buf [UUIDTextLen]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:36], u[10:16])
	return append(b, buf[:]...)
}

// FormatUUID is the text form of u (see AppendUUID).
func FormatUUID(u [16]byte) string {
	var b [UUIDTextLen]byte
	return string(AppendUUID(b[:0], u))
}

// IsUUIDText reports whether b has the shape of a UUID's text form: 36
// characters with hyphens at 8, 13, 18 and 23 (the digits are not
// checked; ParseUUID does).
func IsUUIDText[T string | []byte](b T) bool {
	return len(b) == UUIDTextLen && b[8] == '-' && b[13] == '-' && b[18] == '-' && b[23] == '-'
}

// ParseUUID reads a UUID's text form, in either case. It checks the form,
// not the version or variant. Its errors wrap ErrInvalidUUID.
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if !IsUUIDText(s) {
		return u, fmt.Errorf("%w: %q is not of the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", ErrInvalidUUID, s)
	}
	var digits [32]byte
	copy(digits[0:8], s[0:8])
	copy(digits[8:12], s[9:13])
	copy(digits[12:16], s[14:18])
	copy(digits[16:20], s[19:23])
	copy(digits[20:32], s[24:36])
	if _, err := hex.Decode(u[:], digits[:]); err != nil {
		return [16]byte{}, fmt.Errorf("%w: %q has a character that is not hexadecimal", ErrInvalidUUID, s)
	}
	return u, nil
}
