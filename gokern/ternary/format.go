// Package ternary implements BitNet b1.58 ternary quantization and its packed
// formats. This file holds the I2_S layout; see DESIGN.md, "Formats".
//
// I2_S stores each ternary value q in {-1, 0, +1} as the 2-bit code q+1
// (-1 -> 0, 0 -> 1, +1 -> 2; code 3 is invalid). The flattened tensor is cut
// into groups of 128 values and each group takes 32 bytes: value j of a group
// (0 <= j < 128) lives in byte j%32 of the group, at bit shift 6-2*(j/32).
// In other words the group is four 32-value lanes, lane 0 in the top two bits
// of every byte. A short last group is padded with code 1 (value 0). This is
// bitnet.cpp's x86 layout, so a group can be unpacked with one shift and mask
// per lane over 32 consecutive bytes.
package ternary

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// Group geometry of the I2_S layout.
const (
	GroupValues = 128 // values per packed group
	GroupBytes  = 32  // bytes per packed group
	LaneValues  = 32  // values per 2-bit lane of a group
	padByte     = 0x55
)

// Method selects how a block's scale is computed.
type Method int32

// The scale methods; the numbers are those of the C ABI.
const (
	AbsMean Method = 0 // scale = max(mean|x|, 1e-5), q = round-half-even(x/scale) clamped to [-1, 1]
	AbsMax  Method = 1 // scale = max(max|x|, 1e-8), q = sign(x) where |x/scale| > 0.5
)

// String returns the method's Python name.
func (m Method) String() string {
	switch m {
	case AbsMean:
		return "absmean"
	case AbsMax:
		return "absmax"
	}
	return "unknown"
}

// ParseMethod is the inverse of String.
func ParseMethod(s string) (Method, error) {
	switch s {
	case "absmean":
		return AbsMean, nil
	case "absmax":
		return AbsMax, nil
	}
	return 0, errs.Value("method must be 'absmean' or 'absmax', got %q", s)
}

// MaxElements bounds tensor sizes (qtensor.MaxElements).
const MaxElements = qtensor.MaxElements

// PackedLen is the number of I2_S bytes for n values.
func PackedLen(n int) int { return (n + GroupValues - 1) / GroupValues * GroupBytes }

// NumBlocks is the number of scales for n values in blocks of blockSize
// (blockSize 0 means one block for the whole tensor).
func NumBlocks(n, blockSize int) int {
	if blockSize == 0 || blockSize >= n {
		return 1
	}
	return (n + blockSize - 1) / blockSize
}

// CheckSizes validates an element count and block size as the C ABI and the
// kernels accept them.
func CheckSizes(n, blockSize int) error {
	if n <= 0 {
		return errs.Value("tensor must have at least one element, got %d", n)
	}
	if n > MaxElements {
		return errs.Value("tensor has %d elements, more than the supported %d", n, MaxElements)
	}
	if blockSize < 0 {
		return errs.Value("block_size must be positive (or 0 for one scale per tensor), got %d", blockSize)
	}
	return nil
}

// slot returns the byte index and bit shift of flat position p.
func slot(p int) (int, uint) {
	return (p>>7)<<5 | p&31, uint(6 - 2*((p>>5)&3))
}

// Code maps a ternary value to its 2-bit I2_S code.
func Code(q int8) byte { return byte(q + 1) }

// Unpack writes the ternary values of the first len(out) positions of packed.
// A code 3 (never written by Quantize or Pack) is a ValueError naming its
// position, and so is a code other than 1 in the padding of a short last
// group (see checkPadding).
func Unpack(packed []byte, out []int8) error {
	if err := checkCodes(packed, len(out)); err != nil {
		return err
	}
	return decode(packed, out, nil, 0)
}

// Dequantize writes value*scale for the first len(out) positions of packed,
// with one scale per blockSize values (blockSize 0: one scale). Invalid codes
// and padding are ValueErrors, as in Unpack.
func Dequantize(packed []byte, blockSize int, scales []float32, out []float32) error {
	n := len(out)
	if err := CheckSizes(n, blockSize); err != nil {
		return err
	}
	if err := checkCodes(packed, n); err != nil {
		return err
	}
	bs, err := scaleBlock(n, blockSize, scales)
	if err != nil {
		return err
	}
	return decode(packed, out, scales, bs)
}

// checkCodes checks that packed holds the PackedLen(n) bytes of n values
// and that the padding after them is code 1 (checkPadding).
func checkCodes(packed []byte, n int) error {
	if len(packed) < PackedLen(n) {
		return errs.Value("packed has %d bytes, %d values need %d", len(packed), n, PackedLen(n))
	}
	return checkPadding(packed, n)
}

// scaleBlock checks that scales holds one scale per block of blockSize
// values (0: one scale) of n values and returns the values per scale.
func scaleBlock(n, blockSize int, scales []float32) (int, error) {
	nb := NumBlocks(n, blockSize)
	if len(scales) != nb {
		return 0, errs.Value("scales must have %d entries for %d values in blocks of %d, got %d", nb, n, blockSize, len(scales))
	}
	if nb == 1 {
		return n, nil
	}
	return blockSize, nil
}

// decode writes the values of the first len(out) positions of packed
// (checkCodes passed) into out, times scales[p/bs] when scales is not nil
// (float32 out), in parallel; a code 3 is a ValueError naming its position.
func decode[T int8 | float32](packed []byte, out []T, scales []float32, bs int) error {
	return forGroups(len(out), func(lo, hi int) error {
		for p := lo; p < hi; {
			// A whole group with no code 3: its 32 bytes at once.
			if p%GroupValues == 0 && p+GroupValues <= hi && decodeGroup(packed[p/GroupValues*GroupBytes:], out[p:p+GroupValues]) {
				if scales != nil {
					o := out[p : p+GroupValues]
					for i := range o {
						o[i] *= T(scales[(p+i)/bs])
					}
				}
				p += GroupValues
				continue
			}
			b, sh := slot(p)
			c := packed[b] >> sh & 3
			if c == 3 {
				return errs.Value("invalid I2_S code 3 at position %d (byte %d)", p, b)
			}
			v := T(int8(c) - 1)
			if scales != nil {
				v *= T(scales[p/bs])
			}
			out[p] = v
			p++
		}
		return nil
	})
}

// decodeGroup writes the 128 values of the group whose bytes start src
// into o and reports true, or false when the group holds a code 3 (o is
// then partly written).
func decodeGroup[T int8 | float32](src []byte, o []T) bool {
	if o8, ok := any(o).([]int8); ok {
		return decodeGroupI8(src, o8)
	}
	g := src[:GroupBytes:GroupBytes]
	o = o[:GroupValues:GroupValues]
	var bad byte
	for j, b := range g {
		bad |= b & (b >> 1) & 0x55
		o[j] = T(int8(b>>6) - 1)
		o[LaneValues+j] = T(int8(b>>4&3) - 1)
		o[2*LaneValues+j] = T(int8(b>>2&3) - 1)
		o[3*LaneValues+j] = T(int8(b&3) - 1)
	}
	return bad == 0
}

// forGroups runs fn over [0, n) in parallel chunks of whole 128-value groups
// and returns the error of the earliest chunk that failed.
func forGroups(n int, fn func(lo, hi int) error) error {
	groups := (n + GroupValues - 1) / GroupValues
	chunks := par.Chunks(groups, 256)
	errsOut := make([]error, len(chunks)-1)
	par.Run(chunks, func(c, g0, g1 int) {
		errsOut[c] = fn(g0*GroupValues, min(g1*GroupValues, n))
	})
	for _, err := range errsOut {
		if err != nil {
			return err
		}
	}
	return nil
}

// Pack writes values (each -1, 0 or +1) in the I2_S layout into packed, which
// must hold PackedLen(len(values)) bytes; padding gets code 1.
func Pack(values []int8, packed []byte) error {
	n := len(values)
	if len(packed) != PackedLen(n) {
		return errs.Value("packed must have %d bytes for %d values, got %d", PackedLen(n), n, len(packed))
	}
	clear(packed)
	for p, q := range values {
		if q < -1 || q > 1 {
			return errs.Value("values must be -1, 0 or +1, got %d at position %d", q, p)
		}
		b, sh := slot(p)
		packed[b] |= Code(q) << sh
	}
	padTail(packed, n)
	return nil
}

// checkPadding returns a ValueError when a position of the last group past
// n (there are none when 128 divides n) holds a code other than 1, the
// padding Quantize, Pack and bitnet.cpp write: the bytes then are not an I2_S
// tensor of n values. packed holds at least PackedLen(n) bytes.
func checkPadding(packed []byte, n int) error {
	for p := n; p&(GroupValues-1) != 0; p++ {
		b, sh := slot(p)
		if c := packed[b] >> sh & 3; c != 1 {
			return errs.Value("invalid I2_S padding: code %d at position %d (byte %d), past the %d values, "+
				"where a short last group holds code 1", c, p, b, n)
		}
	}
	return nil
}

// padTail sets code 1 at the positions of the last group past n (whatever
// their bits were).
func padTail(packed []byte, n int) {
	for p := n; p&(GroupValues-1) != 0; p++ {
		b, sh := slot(p)
		packed[b] = packed[b]&^(3<<sh) | 1<<sh
	}
}

// decodeGroupI8 is decodeGroup for int8, eight values at a time: lane k
// of the bytes of a word is (w >> (6-2k)) & 3 in each byte, and code c
// becomes the byte c-1 as x = (c+3)&3 (3, 0, 1) with 0xfc or-ed in where x
// is 3.
func decodeGroupI8(src []byte, o []int8) bool {
	g := src[:GroupBytes:GroupBytes]
	ob := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(o[:GroupValues]))), GroupValues)
	var bad uint64
	for j := 0; j < GroupBytes; j += 8 {
		w := binary.LittleEndian.Uint64(g[j:])
		for k := range 4 {
			c := w >> (6 - 2*k) & bytes03
			bad |= c & (c >> 1) & bytes01
			x := (c + bytes03) & bytes03
			binary.LittleEndian.PutUint64(ob[k*LaneValues+j:], x|(x&(x>>1)&bytes01)*0xfc)
		}
	}
	return bad == 0
}

// lcm returns the least common multiple of a and b, or 0 when it would
// exceed limit.
func lcm(a, b, limit int) int {
	g := a
	for h := b; h != 0; {
		g, h = h, g%h
	}
	hi, lo := bits.Mul64(uint64(a/g), uint64(b))
	if hi != 0 || lo > uint64(limit) {
		return 0
	}
	return int(lo)
}
