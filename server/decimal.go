package server

import (
	"encoding/binary"
	"strconv"
)

// appendID appends id in decimal, as strconv.AppendInt(b, id, 10) does.
// IDs of a running node have 17 to 19 digits (a timestamp in the high
// bits), and those take a path without a division per digit pair: three
// divisions by constants split the ID into at most three digits and two
// blocks of eight, and each block is converted in one 64-bit register
// (two digits per 16-bit lane) and stored at once. Anything else goes to
// strconv.
func appendID(b []byte, id int64) []byte {
	if id < 1e16 {
		return strconv.AppendInt(b, id, 10)
	}
	v := uint64(id)
	hi := v / 1e16 // 1 to 922
	rest := v - hi*1e16
	mid := rest / 1e8
	lo := rest - mid*1e8
	switch {
	case hi >= 100:
		b = append(b, byte('0'+hi/100), byte('0'+hi/10%10), byte('0'+hi%10))
	case hi >= 10:
		b = append(b, byte('0'+hi/10), byte('0'+hi%10))
	default:
		b = append(b, byte('0'+hi))
	}
	b = binary.LittleEndian.AppendUint64(b, eightDigits(uint32(mid)))
	return binary.LittleEndian.AppendUint64(b, eightDigits(uint32(lo)))
}

// eightDigits returns x (below 10^8) as eight ASCII digits, leading zeros
// included, the first digit in the lowest byte (store it little-endian).
// Each step splits every lane of the register in two at once: 32-bit lanes
// of four digits, 16-bit lanes of two, bytes of one. The multiply-shift
// pairs divide exactly in their range (x*5243>>19 is x/100 below 43699,
// x*103>>10 is x/10 below 179) and no lane's product reaches the next lane.
func eightDigits(x uint32) uint64 {
	v := uint64(x/10000) | uint64(x%10000)<<32  // [first four, last four]
	q := (v * 5243 >> 19) & 0x0000007f_0000007f // each lane / 100
	v = q | (v-q*100)<<16                       // [2 digits, 2 digits] per 32-bit lane
	q = (v * 103 >> 10) & 0x000f000f_000f000f   // each 16-bit lane / 10
	v = q | (v-q*10)<<8                         // one digit per byte
	return v | 0x30303030_30303030
}
