package ternary

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// TL1 and TL2: bitnet.cpp's lookup-table weight formats, laid out our way.
//
// Both see the tensor as a matrix of rows x K: rows = shape[0] and K = the
// product of the other dimensions (for a conv weight (O, C/groups, kH, kW),
// rows = O and K = C/groups*kH*kW, the flattened C-order kernel of each
// output channel; a tensor of rank 0 or 1 is one row). Rows are stored one
// after another, each in a whole number of bytes; values run along K.
//
// TL1, per row: the values are taken in pairs (w0, w1) = (w[2i], w[2i+1]),
// a missing w1 at the end of an odd K being 0. Pair i becomes the index
// 3*w0 + w1 + 4 (0..8) in 4 bits; byte i/2 holds pair i in its low nibble
// when i is even and in its high nibble when i is odd. Row bytes:
// ceil(ceil(K/2)/2). Example: w = [+1, -1, 0, +1, -1] -> pairs (+1,-1),
// (0,+1), (-1,0) -> indices 6, 5, 1 -> bytes 0x56, 0x01.
//
// TL2, per row: T = K/3 (integer division) triples (w0, w1, w2) =
// (w[3i], w[3i+1], w[3i+2]) give v = 9*w0 + 3*w1 + w2 (-13..13). Then:
//   - magnitudes: |v| in 4 bits, triple i in byte i/2, low nibble for even
//     i, high for odd i: ceil(T/2) bytes;
//   - signs: bit i%8 of byte i/8 is 1 when v < 0: ceil(T/8) bytes;
//   - remainder: the last K%3 values (0, 1 or 2 of them) as one TL1 pair
//     (a single value pads with 0) in the low nibble of one byte, present
//     only when K%3 != 0.
// Row bytes: ceil(T/2) + ceil(T/8) + (1 if K%3 != 0). About 5/3 bits a value.

// QType names a packed format: the ternary formats' qtensor dtypes.
type QType = qtensor.DType

// The packed ternary formats (registered with qtensor in init).
const (
	I2S = qtensor.I2S
	TL1 = qtensor.TL1
	TL2 = qtensor.TL2
)

// checkRowsK returns K of the rows x K view of n elements: n must be in
// [1, MaxElements] and rows in [1, n], dividing n (every format, I2_S too, so
// that a count that makes no tensor fails before any loop runs over it).
func checkRowsK(n, rows int) (int, error) {
	if n < 1 || n > MaxElements {
		return 0, errs.Value("n (the number of values) must be between 1 and %d, got %d", MaxElements, n)
	}
	if rows < 1 || rows > n || n%rows != 0 {
		return 0, errs.Value("rows must be between 1 and n = %d and divide it, got %d", n, rows)
	}
	return n / rows, nil
}

// TL1RowBytes is the number of bytes of one TL1 row of K values.
func TL1RowBytes(k int) int { return ((k+1)/2 + 1) / 2 }

// TL2RowBytes is the number of bytes of one TL2 row of K values.
func TL2RowBytes(k int) int {
	t := k / 3
	b := (t+1)/2 + (t+7)/8
	if k%3 != 0 {
		b++
	}
	return b
}

// format is one ternary format: its rows' byte count and row (un)packers;
// I2S packs the flattened tensor (rows ignored). It implements
// qtensor.Format; the exported PackedLenQ, PackQ, UnpackQ and DequantizeQ
// look the format up there.
type format struct {
	name      string
	rowBytes  func(k int) int                  // nil: I2_S, whole tensor
	packRow   func(w []int8, dst []byte)       // TL rows
	unpackRow func(src []byte, w []int8) error // TL rows
}

func init() {
	qtensor.Register(I2S, &format{name: "i2_s"})
	qtensor.Register(TL1, &format{name: "tl1", rowBytes: TL1RowBytes, packRow: packTL1Row, unpackRow: unpackTL1Row})
	qtensor.Register(TL2, &format{name: "tl2", rowBytes: TL2RowBytes, packRow: packTL2Row, unpackRow: unpackTL2Row})
}

func (f *format) Name() string { return f.name }

// PackedLen is the number of packed bytes of n values in rows rows (see
// checkRowsK for the counts it accepts): the one statement of the packed
// lengths, which every check of a packed buffer's length uses.
func (f *format) PackedLen(n, rows int) (int, error) {
	k, err := checkRowsK(n, rows)
	if err != nil {
		return 0, err
	}
	if f.rowBytes == nil {
		return PackedLen(n), nil
	}
	return rows * f.rowBytes(k), nil
}

func (f *format) Pack(values []int8, rows int, dst []byte) error {
	if err := qtensor.CheckLen(f, len(values), rows, len(dst)); err != nil {
		return err
	}
	if f.rowBytes == nil {
		return Pack(values, dst)
	}
	if err := checkTernary(values); err != nil {
		return err
	}
	k, rb := len(values)/rows, len(dst)/rows
	for r := 0; r < rows; r++ {
		f.packRow(values[r*k:(r+1)*k], dst[r*rb:(r+1)*rb])
	}
	return nil
}

func (f *format) Unpack(src []byte, rows int, values []int8) error {
	if err := qtensor.CheckLen(f, len(values), rows, len(src)); err != nil {
		return err
	}
	if f.rowBytes == nil {
		return Unpack(src, values)
	}
	k, rb := len(values)/rows, len(src)/rows
	for r := 0; r < rows; r++ {
		if err := f.unpackRow(src[r*rb:(r+1)*rb], values[r*k:(r+1)*k]); err != nil {
			return errs.Value("row %d: %v", r, err)
		}
	}
	return nil
}

func (f *format) Dequantize(src []byte, rows, blockSize int, scales []float32, out []float32) error {
	n := len(out)
	if err := qtensor.CheckLen(f, n, rows, len(src)); err != nil {
		return err
	}
	if f.rowBytes == nil {
		return Dequantize(src, blockSize, scales, out)
	}
	if err := CheckSizes(n, blockSize); err != nil {
		return err
	}
	nb := NumBlocks(n, blockSize)
	if len(scales) != nb {
		return errs.Value("scales must have %d entries for %d values in blocks of %d, got %d", nb, n, blockSize, len(scales))
	}
	vals := make([]int8, n)
	if err := f.Unpack(src, rows, vals); err != nil {
		return err
	}
	bs := blockSize
	if nb == 1 {
		bs = n
	}
	for p, v := range vals {
		out[p] = float32(v) * scales[p/bs]
	}
	return nil
}

// PackedLenQ is qtensor.Lookup(q).PackedLen: the packed bytes of n values
// in rows rows of format q.
func PackedLenQ(q QType, n, rows int) (int, error) {
	f, err := qtensor.Lookup(q)
	if err != nil {
		return 0, err
	}
	return f.PackedLen(n, rows)
}

func pairIndex(w0, w1 int8) byte { return byte(3*w0 + w1 + 4) }

func pairValues(idx byte) (int8, int8, error) {
	if idx > 8 {
		return 0, 0, errs.Value("invalid TL1 index %d", idx)
	}
	return int8(idx/3) - 1, int8(idx%3) - 1, nil
}

func checkTernary(values []int8) error {
	for p, q := range values {
		if q < -1 || q > 1 {
			return errs.Value("values must be -1, 0 or +1, got %d at position %d", q, p)
		}
	}
	return nil
}

func packTL1Row(w []int8, dst []byte) {
	clear(dst)
	for i := 0; 2*i < len(w); i++ {
		var w1 int8
		if 2*i+1 < len(w) {
			w1 = w[2*i+1]
		}
		dst[i/2] |= pairIndex(w[2*i], w1) << (4 * uint(i&1))
	}
}

func unpackTL1Row(src []byte, w []int8) error {
	for i := 0; 2*i < len(w); i++ {
		a, b, err := pairValues(src[i/2] >> (4 * uint(i&1)) & 15)
		if err != nil {
			return err
		}
		w[2*i] = a
		if 2*i+1 < len(w) {
			w[2*i+1] = b
		} else if b != 0 {
			return errs.Value("invalid TL1 padding value %d", b)
		}
	}
	return nil
}

func packTL2Row(w []int8, dst []byte) {
	clear(dst)
	t := len(w) / 3
	mag, sign := dst[:(t+1)/2], dst[(t+1)/2:(t+1)/2+(t+7)/8]
	for i := 0; i < t; i++ {
		v := 9*int(w[3*i]) + 3*int(w[3*i+1]) + int(w[3*i+2])
		if v < 0 {
			sign[i/8] |= 1 << uint(i%8)
			v = -v
		}
		mag[i/2] |= byte(v) << (4 * uint(i&1))
	}
	if r := w[3*t:]; len(r) > 0 {
		packTL1Row(r, dst[len(dst)-1:])
	}
}

func unpackTL2Row(src []byte, w []int8) error {
	t := len(w) / 3
	mag, sign := src[:(t+1)/2], src[(t+1)/2:(t+1)/2+(t+7)/8]
	for i := 0; i < t; i++ {
		v := int(mag[i/2] >> (4 * uint(i&1)) & 15)
		if v > 13 {
			return errs.Value("invalid TL2 magnitude %d in triple %d", v, i)
		}
		if sign[i/8]>>uint(i%8)&1 == 1 {
			v = -v
		}
		// v = 9*w0 + 3*w1 + w2 with digits in {-1, 0, 1}: balanced ternary.
		w2 := balancedDigit(v)
		v = (v - w2) / 3
		w1 := balancedDigit(v)
		w0 := (v - w1) / 3
		w[3*i], w[3*i+1], w[3*i+2] = int8(w0), int8(w1), int8(w2)
	}
	if r := w[3*t:]; len(r) > 0 {
		return unpackTL1Row(src[len(src)-1:], r)
	}
	return nil
}

// balancedDigit returns the least significant balanced-ternary digit of v.
func balancedDigit(v int) int {
	d := ((v % 3) + 3) % 3 // 0, 1, 2
	if d == 2 {
		return -1
	}
	return d
}

// PackQ packs ternary values (rows x K, C order) into format q.
func PackQ(q QType, values []int8, rows int, dst []byte) error {
	f, err := qtensor.Lookup(q)
	if err != nil {
		return err
	}
	return f.Pack(values, rows, dst)
}

// UnpackQ writes the ternary values held in src (format q, rows x K).
func UnpackQ(q QType, src []byte, rows int, values []int8) error {
	f, err := qtensor.Lookup(q)
	if err != nil {
		return err
	}
	return f.Unpack(src, rows, values)
}

// DequantizeQ writes value*scale for the values held in src (format q, rows
// x K), one scale per blockSize values of the flattened tensor (0: one).
func DequantizeQ(q QType, src []byte, rows, blockSize int, scales []float32, out []float32) error {
	f, err := qtensor.Lookup(q)
	if err != nil {
		return err
	}
	return f.Dequantize(src, rows, blockSize, scales, out)
}
