package ternary

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// The TQ2_0 / TQ1_0 quantizer (see tq.go for the rule). Per block: the
// absmax reduction (the kernel seam absMax, shared with I2_S's quantizer),
// the threshold t of the block (TQThreshold), the codes by comparison with
// t and their packing (the seams tq2 and tq1).

// TQQuantizeOp is the registry's op "quantize_tq": the TQ quantizer's
// kernels per family (generic: the oracle).
var TQQuantizeOp = cpu.NewOp("quantize_tq", tqGeneric)

// TQKernels is one family's kernels of the TQ quantizer.
type TQKernels struct {
	family cpu.Family
	// absMax: see Quantizer.absMax.
	absMax func(x []float32) (float32, int)
	// tq2 and tq1 write the TQ2_0 / TQ1_0 payloads of len(ts) blocks of
	// 256 finite values, one after another in x and dst, block b with
	// threshold ts[b] > 0: code 2 where x >= t, 0 where x <= -t, else 1.
	tq2, tq1 func(x, ts []float32, dst []byte)
}

// Family returns the family of k's kernels.
func (k *TQKernels) Family() cpu.Family { return k.family }

var tqGeneric = &TQKernels{family: cpu.Generic, absMax: absMaxGeneric,
	tq2: func(x, ts []float32, dst []byte) { tqPackGeneric(tq2Format, x, ts, dst) },
	tq1: func(x, ts []float32, dst []byte) { tqPackGeneric(tq1Format, x, ts, dst) },
}

// tqPackGeneric is a seam tq2 / tq1 in Go: per block the codes, then f's
// packing.
func tqPackGeneric(f *tqFormat, x, ts []float32, dst []byte) {
	var c [TQBlock]byte
	for b, t := range ts {
		tqCodesGeneric(x[b*TQBlock:(b+1)*TQBlock], t, &c)
		f.pack(&c, dst[b*f.payload:(b+1)*f.payload])
	}
}

// tqCodesGeneric: see TQKernels.codes. For finite x the int32 order of the
// bits is the order of values >= 0 and the uint32 order the order of
// magnitudes of values <= 0 (codeFinite).
func tqCodesGeneric(x []float32, t float32, c *[TQBlock]byte) {
	xs := x[:TQBlock:TQBlock]
	ti, tn := int32(math.Float32bits(t)), math.Float32bits(-t)
	for i, v := range xs {
		c[i] = codeFinite(math.Float32bits(v), ti, tn)
	}
}

// TQThreshold returns the smallest float32 t > 0 whose float32 product
// t*id is >= 0.5: since rounding is monotonic and symmetric,
// round_half_away(x*id) is +1 exactly when x >= t and -1 when x <= -t (for
// |x| <= 1/id, as every x of the block is). ok is false when id is 0 or
// not finite (every code is then 1: see tq.go).
func TQThreshold(id float32) (t float32, ok bool) {
	if !(id > 0 && id <= math.MaxFloat32) {
		return 0, false
	}
	// For t >= 0 the next float32 toward 0 or +Inf is one bit pattern
	// down or up (math.Nextafter32 without its general cases: this runs
	// once a block).
	t = 0.5 / id
	for t > 0 && math.Float32frombits(math.Float32bits(t)-1)*id >= 0.5 {
		t = math.Float32frombits(math.Float32bits(t) - 1)
	}
	for !(t*id >= 0.5) {
		t = math.Float32frombits(math.Float32bits(t) + 1)
	}
	return t, true
}

// tqInverse is the reference's id: 1/d in float32, 0 for d == 0.
func tqInverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// QuantizeTQ quantizes x, rows x K (K a multiple of 256), into format q
// (TQ2 or TQ1) with the kernels the process selected; see
// TQKernels.Quantize.
func QuantizeTQ(q QType, x []float32, rows int, checkFinite bool, packed []byte, scales []float32) error {
	return TQQuantizeOp.Get().Quantize(q, x, rows, checkFinite, packed, scales)
}

// Quantize writes the payloads of x's 256-value blocks into packed and
// their float16 scales, as float32, into scales (len(x)/256 of them), in
// parallel over blocks. With checkFinite, a NaN or ±Inf is a ValueError
// naming the first such index, and so is a block whose max|x| rounds to
// float16 Inf (>= 65520). Without it: NaN is left out of a block's maximum
// and quantizes to 0; a block holding ±Inf gets scale +Inf and values 0; a
// scale past float16's range is stored as +Inf.
func (k *TQKernels) Quantize(q QType, x []float32, rows int, checkFinite bool, packed []byte, scales []float32) error {
	if !IsTQ(q) {
		return errs.Value("QuantizeTQ writes tq2_0 or tq1_0, got %s", q)
	}
	f := tqFormatOf(q)
	n := len(x)
	if err := qtensor.CheckLen(f, n, rows, len(packed)); err != nil {
		return err
	}
	nb := n / TQBlock
	if len(scales) != nb {
		return errs.Value("scales must have %d entries for %d values in blocks of %d, got %d", nb, n, TQBlock, len(scales))
	}
	seam := k.tq2
	if q == TQ1 {
		seam = k.tq1
	}
	return forBlocks(nb, func(b0, b1 int) error {
		var c [TQBlock]byte
		var ts [tqBatch]float32
		var firstErr error
		run := b0 // blocks run..b-1 wait for seam with thresholds ts[:b-run]
		flush := func(b int) {
			if b > run {
				seam(x[run*TQBlock:b*TQBlock], ts[:b-run], packed[run*f.payload:b*f.payload])
			}
			run = b
		}
		for b := b0; b < b1; b++ {
			xs := x[b*TQBlock : (b+1)*TQBlock]
			d, bad := k.absMax(xs)
			h := F16Bits(d)
			scales[b] = F16Value(h)
			if checkFinite && firstErr == nil {
				if bad >= 0 {
					firstErr = qtensor.NonFinite(x, b*TQBlock+bad)
				} else if h == 0x7c00 {
					firstErr = errs.Value("x: block %d (flat indices %d..%d) has max|x| = %v, past float16's range "+
						"(65504): %s stores each block's scale as float16", b, b*TQBlock, (b+1)*TQBlock-1, d, f.name)
				}
			}
			t, ok := TQThreshold(tqInverse(d))
			if ok && bad < 0 {
				if b-run == tqBatch {
					flush(b)
				}
				ts[b-run] = t
				continue
			}
			flush(b)
			if !ok {
				for i := range c {
					c[i] = 1
				}
			} else {
				tqCodesNonFinite(xs, t, &c)
			}
			f.pack(&c, packed[b*f.payload:(b+1)*f.payload])
			run = b + 1
		}
		flush(b1)
		return firstErr
	})
}

// tqBatch is the most blocks a seam call codes (their thresholds on the
// stack).
const tqBatch = 64

// tqCodesNonFinite is TQKernels.codes for a block holding NaN (code 1) or
// ±Inf (there is none with a finite threshold: d would be Inf).
func tqCodesNonFinite(x []float32, t float32, c *[TQBlock]byte) {
	for i, v := range x[:TQBlock] {
		switch {
		case v >= t:
			c[i] = 2
		case v <= -t:
			c[i] = 0
		default:
			c[i] = 1
		}
	}
}
