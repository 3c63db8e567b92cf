package ternary

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cast"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// TQ2_0 and TQ1_0: llama.cpp's own ternary formats (ggml types 35 and 34).
//
// Both cut the flattened tensor into blocks of 256 values, which must not
// straddle rows: in the rows x K view of the other formats (rows =
// shape[0], K the product of the other dimensions) K is a multiple of 256.
// A value q in {-1, 0, +1} is the code c = q+1 (0, 1, 2). A GGUF file
// stores each block as its payload followed by the block's scale d as an
// IEEE float16, little-endian; our packed bytes hold the payloads only, one
// block after another, and the scales travel apart as float32 (each one a
// float16 value), one per block (block_size 256).
//
// TQ2_0 payload, 64 bytes: the block's two halves of 128 values, each 32
// bytes; value i of half h (0 <= i < 128) is in byte 32h + i%32 at bit
// shift 2*(i/32). It is I2_S's group with the four 2-bit fields of every
// byte in the opposite order. 2.0625 bits a value with the scale.
//
// TQ1_0 payload, 52 bytes: 48 bytes qs, then 4 bytes qh. Base 3, five
// codes a byte: byte j < 32 of qs holds v = 81*c[j] + 27*c[32+j] +
// 9*c[64+j] + 3*c[96+j] + c[128+j]; byte 32+j (j < 16) the same over
// c[160+j], c[176+j], ..., c[224+j] (steps of 16); qh byte j (j < 4) four
// codes, v = 81*c[240+j] + 27*c[244+j] + 9*c[248+j] + 3*c[252+j]. Each v
// (0..242) is stored as ceil(v*256/243), so that the k-th code (k = 0 the
// most significant) comes back as ((b*3^k mod 256) * 3) >> 8. 1.6875 bits a
// value with the scale.
//
// Quantization (absmax, as the gguf package's numpy quantizer and
// llama.cpp's reference do it, bit for bit): per block d = max|x| in
// float32, id = 1/d in float32 (0 when d is 0), q = round_half_away(x*id)
// with x*id in float32, which is sign(x) where |x*id| >= 0.5 and else 0
// (also 0 when x*id is not finite: d so small that 1/d overflows). The
// scale stored is d rounded to float16, to nearest even; the codes come from
// the float32 d.

// TQ geometry.
const (
	TQBlock      = 256 // values per block
	TQ2Payload   = 64  // TQ2_0 payload bytes per block
	TQ1Payload   = 52  // TQ1_0 payload bytes per block (qs 48, qh 4)
	tq1QS0       = 32  // qs bytes over the first 160 values (32 apart)
	tq1QS        = 48  // qs bytes in all
	tqScaleBytes = 2   // the float16 scale of a GGUF block
)

// The llama.cpp formats (registered with qtensor in init).
const (
	TQ2 = qtensor.TQ2
	TQ1 = qtensor.TQ1
)

// IsTQ reports whether q is TQ2_0 or TQ1_0.
func IsTQ(q QType) bool { return q == TQ2 || q == TQ1 }

// tqFormat is TQ2_0 or TQ1_0: its payload size and its block packers over
// codes (0, 1, 2).
type tqFormat struct {
	name    string
	payload int
	pack    func(c *[TQBlock]byte, dst []byte)
	unpack  func(src []byte, c *[TQBlock]byte) error // a ValueError for a byte the format never writes
}

var (
	tq2Format = &tqFormat{name: "tq2_0", payload: TQ2Payload, pack: packTQ2, unpack: unpackTQ2}
	tq1Format = &tqFormat{name: "tq1_0", payload: TQ1Payload, pack: packTQ1, unpack: unpackTQ1}
)

func init() {
	qtensor.Register(TQ2, tq2Format)
	qtensor.Register(TQ1, tq1Format)
}

// tqFormatOf returns q's format (q is TQ2 or TQ1).
func tqFormatOf(q QType) *tqFormat {
	if q == TQ1 {
		return tq1Format
	}
	return tq2Format
}

func (f *tqFormat) Name() string { return f.name }

// PackedLen is n/256 payloads; rows x K with K a multiple of 256.
func (f *tqFormat) PackedLen(n, rows int) (int, error) {
	k, err := checkRowsK(n, rows)
	if err != nil {
		return 0, err
	}
	if k%TQBlock != 0 {
		return 0, errs.Value("%s packs blocks of %d values along rows: K (the values per row, the product of "+
			"the dimensions after the first) must be a multiple of %d, got K = %d (%d values in %d rows)",
			f.name, TQBlock, TQBlock, k, n, rows)
	}
	return n / TQBlock * f.payload, nil
}

// forBlocks runs fn over the blocks [0, nb) in parallel chunks and returns
// the error of the earliest chunk that failed. The chunks are of at least
// par.MinWork values, up to par.ChunksPerThread a thread, which the threads
// take as they free up: a thread held up on a shared machine does less.
func forBlocks(nb int, fn func(b0, b1 int) error) error {
	chunks := par.ChunksWork(nb, TQBlock)
	errsOut := make([]error, len(chunks)-1)
	par.Run(chunks, func(c, b0, b1 int) {
		if !par.Stopped() {
			errsOut[c] = fn(b0, b1)
		}
	})
	for _, err := range errsOut {
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *tqFormat) Pack(values []int8, rows int, dst []byte) error {
	if err := qtensor.CheckLen(f, len(values), rows, len(dst)); err != nil {
		return err
	}
	return forBlocks(len(values)/TQBlock, func(b0, b1 int) error {
		var c [TQBlock]byte
		for b := b0; b < b1; b++ {
			if !tqCodesOf(values[b*TQBlock:(b+1)*TQBlock], &c) {
				return checkTernary(values[:(b+1)*TQBlock]) // names the first bad value
			}
			f.pack(&c, dst[b*f.payload:(b+1)*f.payload])
		}
		return nil
	})
}

func (f *tqFormat) Unpack(src []byte, rows int, values []int8) error {
	if err := qtensor.CheckLen(f, len(values), rows, len(src)); err != nil {
		return err
	}
	return forBlocks(len(values)/TQBlock, func(b0, b1 int) error {
		var c [TQBlock]byte
		for b := b0; b < b1; b++ {
			if err := f.unpack(src[b*f.payload:(b+1)*f.payload], &c); err != nil {
				return errs.Value("block %d (bytes %d..%d): %v", b, b*f.payload, (b+1)*f.payload-1, err)
			}
			v := values[b*TQBlock : (b+1)*TQBlock]
			for i := range v {
				v[i] = int8(c[i]) - 1
			}
		}
		return nil
	})
}

// Dequantize writes value*scale, one scale per blockSize values of the
// flattened tensor (0: one); a TQ tensor's own scales are per 256-block.
func (f *tqFormat) Dequantize(src []byte, rows, blockSize int, scales []float32, out []float32) error {
	n := len(out)
	if err := qtensor.CheckLen(f, n, rows, len(src)); err != nil {
		return err
	}
	if err := CheckSizes(n, blockSize); err != nil {
		return err
	}
	bs, err := scaleBlock(n, blockSize, scales)
	if err != nil {
		return err
	}
	return forBlocks(n/TQBlock, func(b0, b1 int) error {
		var c [TQBlock]byte
		for b := b0; b < b1; b++ {
			if err := f.unpack(src[b*f.payload:(b+1)*f.payload], &c); err != nil {
				return errs.Value("block %d (bytes %d..%d): %v", b, b*f.payload, (b+1)*f.payload-1, err)
			}
			o := out[b*TQBlock : (b+1)*TQBlock]
			if bs == TQBlock {
				s := scales[b]
				for i := range o {
					o[i] = float32(int8(c[i])-1) * s
				}
				continue
			}
			for i := range o {
				o[i] = float32(int8(c[i])-1) * scales[(b*TQBlock+i)/bs]
			}
		}
		return nil
	})
}

// Eight bytes at a time, as little-endian 64-bit words.
const (
	bytes01 = 0x0101010101010101
	bytes03 = 0x0303030303030303
	bytesFC = 0xfcfcfcfcfcfcfcfc
)

// tqCodesOf writes the codes (q+1) of the 256 values v (v[:256]) into c
// and reports whether every value is -1, 0 or +1, eight at a time: a byte
// is one of 0x00, 0x01, 0xff exactly when its bits 1..7 are equal and, if
// they are set, so is bit 0; its code is ((q&3)+1)&3, which never carries
// out of the byte.
func tqCodesOf(v []int8, c *[TQBlock]byte) bool {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v[:TQBlock]))), TQBlock)
	var bad uint64
	for i := 0; i < TQBlock; i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		bad |= (w^w<<1)&bytesFC | w>>7&^w&bytes01
		binary.LittleEndian.PutUint64(c[i:], (w&bytes03+bytes01)&bytes03)
	}
	return bad == 0
}

// packTQ2 writes the TQ2_0 payload of one block's codes (each 0..2, so the
// shifted fields of a word stay inside their bytes).
func packTQ2(c *[TQBlock]byte, dst []byte) {
	d := dst[:TQ2Payload:TQ2Payload]
	for h := 0; h < 2; h++ {
		cs := c[h*128 : h*128+128 : h*128+128]
		for j := 0; j < 32; j += 8 {
			w := binary.LittleEndian.Uint64(cs[j:]) | binary.LittleEndian.Uint64(cs[32+j:])<<2 |
				binary.LittleEndian.Uint64(cs[64+j:])<<4 | binary.LittleEndian.Uint64(cs[96+j:])<<6
			binary.LittleEndian.PutUint64(d[h*32+j:], w)
		}
	}
}

// unpackTQ2 reads one TQ2_0 payload; code 3 is never written.
func unpackTQ2(src []byte, c *[TQBlock]byte) error {
	s := src[:TQ2Payload:TQ2Payload]
	var bad byte
	for h := 0; h < 2; h++ {
		cs := c[h*128 : h*128+128 : h*128+128]
		for j := 0; j < 32; j++ {
			b := s[h*32+j]
			bad |= b & (b >> 1) & 0x55
			cs[j], cs[32+j], cs[64+j], cs[96+j] = b&3, b>>2&3, b>>4&3, b>>6
		}
	}
	if bad != 0 {
		for i, v := range c {
			if v == 3 {
				return errs.Value("invalid TQ2_0 code 3 at value %d of the block (byte %d)", i, i/128*32+i%32)
			}
		}
	}
	return nil
}

// tq1Byte is the stored byte of a base-3 number v (0..242).
func tq1Byte(v int) byte { return byte((v*256 + 242) / 243) }

// tq1Digit is code k (0: the most significant of five) of stored byte b.
func tq1Digit(b byte, k int) byte { return byte(uint16(b*pow3[k]) * 3 >> 8) }

var pow3 = [5]byte{1, 3, 9, 27, 81}

// tq1Canon5 and tq1Canon4 mark the bytes that tq1Byte writes for five codes
// (qs) and for four codes and a zero (qh).
var tq1Canon5, tq1Canon4 [256]bool

func init() {
	for v := 0; v < 243; v++ {
		tq1Canon5[tq1Byte(v)] = true
		if v%3 == 0 {
			tq1Canon4[tq1Byte(v)] = true
		}
	}
}

// packTQ1 writes the TQ1_0 payload of one block's codes.
func packTQ1(c *[TQBlock]byte, dst []byte) {
	d := dst[:TQ1Payload:TQ1Payload]
	for j := 0; j < tq1QS0; j++ {
		v := 81*int(c[j]) + 27*int(c[32+j]) + 9*int(c[64+j]) + 3*int(c[96+j]) + int(c[128+j])
		d[j] = tq1Byte(v)
	}
	for j := 0; j < tq1QS-tq1QS0; j++ {
		v := 81*int(c[160+j]) + 27*int(c[176+j]) + 9*int(c[192+j]) + 3*int(c[208+j]) + int(c[224+j])
		d[tq1QS0+j] = tq1Byte(v)
	}
	for j := 0; j < 4; j++ {
		v := 81*int(c[240+j]) + 27*int(c[244+j]) + 9*int(c[248+j]) + 3*int(c[252+j])
		d[tq1QS+j] = tq1Byte(v)
	}
}

// unpackTQ1 reads one TQ1_0 payload. Every byte decodes to codes 0..2 (as
// llama.cpp decodes it); a byte that packTQ1 never writes is a ValueError,
// so that what is read packs back to the same bytes.
func unpackTQ1(src []byte, c *[TQBlock]byte) error {
	s := src[:TQ1Payload:TQ1Payload]
	for j, b := range s {
		ok := tq1Canon5[b]
		if j >= tq1QS {
			ok = tq1Canon4[b]
		}
		if !ok {
			return errs.Value("invalid TQ1_0 byte %#02x at byte %d of the block (not the base-3 encoding of any codes)", b, j)
		}
	}
	for j := 0; j < tq1QS0; j++ {
		b := s[j]
		for k := 0; k < 5; k++ {
			c[32*k+j] = tq1Digit(b, k)
		}
	}
	for j := 0; j < tq1QS-tq1QS0; j++ {
		b := s[tq1QS0+j]
		for k := 0; k < 5; k++ {
			c[160+16*k+j] = tq1Digit(b, k)
		}
	}
	for j := 0; j < 4; j++ {
		b := s[tq1QS+j]
		for k := 0; k < 4; k++ {
			c[240+4*k+j] = tq1Digit(b, k)
		}
	}
	return nil
}

// F16Bits rounds f to the nearest IEEE half-precision float, ties to even,
// as numpy does: cast.F16Bits.
func F16Bits(f float32) uint16 { return cast.F16Bits(f) }

// F16Value is the float32 value of half-precision bits h (exact).
func F16Value(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0: // zero or subnormal: man * 2^-24, exact in float32
		v := float32(man) * 0x1p-24
		if sign != 0 {
			v = -v
		}
		return v
	case 31:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// RoundF16 is f rounded to float16 (F16Bits) and back to float32.
func RoundF16(f float32) float32 { return F16Value(F16Bits(f)) }
