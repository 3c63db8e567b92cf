package cuda

import (
	"math"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/cuda/driver"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ops/conv2d"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// ConvOperands are the device operands of Conv2DDevice: x float32 (N, C,
// H, W); the I2_S codes of the flattened weight (WBytes bytes) and its
// NScales float32 scales (one per BlockSize values, 0: one); bias float32
// (O) or 0 for none; out float32 (N, O, Ho, Wo); Work a workspace of
// WorkLen >= ConvWorkspaceSize bytes.
type ConvOperands struct {
	X, W, Scales, Bias, Out, Work uint64
	WBytes, NScales, BlockSize    int64
	WorkLen                       int64
}

// ConvWorkspaceSize returns the bytes of device workspace Conv2DDevice
// needs for the checked geometry d: the int8 activations and a few bytes.
func ConvWorkspaceSize(d *conv2d.Dims) int64 {
	return align(convOffQ(d)+int64(d.XLen), 256)
}

// Conv2DDevice computes the convolution of conv2d.Conv2DInfo on device dev,
// enqueued on stream. With actBits 8, the W1.58A8 path with the same bits as
// the CPU: per-sample activation scales, int8 activations, int32 sums per
// scale block, the same float32 folds in the same order. With actBits 0,
// float32 activations: float32 sums per scale block (within float32 rounding
// of the dequantized weight's convolution, not bit-identical). It returns the
// kernel that ran. With check, it first waits for the stream to read back
// x's first NaN/Inf (a ValueError naming it, as the CPU path's), and copies
// bias and the scales to the host to check them; without, it returns once
// the work is enqueued. With check, a weight code 3 is a ValueError naming
// its first position (as the CPU's); without, a code 3 reads as 2.
func Conv2DDevice(dev int, d *conv2d.Dims, o ConvOperands, actBits int, check bool, stream uint64) (string, error) {
	p, b, err := prepareConv(d, o, actBits)
	if err != nil {
		return "", err
	}
	if d.N == 0 {
		return p.kernelName(false), nil // nothing runs: no device asked
	}
	s := driver.Stream(stream)
	tc := false
	err = onDevice(dev, true, func(g gpu) error {
		if err := g.ctx.CheckPointers(b.ptrs()...); err != nil {
			return err
		}
		tc = g.cc >= mmaMinCC
		scan, run := convOps(p, check, b, g.gridCap, tc)
		if len(scan) > 0 {
			if err := g.exec(scan, s); err != nil {
				return err
			}
		}
		if check {
			if err := checkConvFinite(g.ctx, d, b, o.NScales, s); err != nil {
				return err
			}
		}
		return g.exec(run, s)
	})
	if err != nil {
		return "", err
	}
	return p.kernelName(tc), nil
}

// TimeConv2D times repeat convolutions of Conv2DDevice (no finite check)
// run back to back on stream between two CUDA events: the mean
// milliseconds of one, the kernels alone (the benchmark's kernel time).
func TimeConv2D(dev int, d *conv2d.Dims, o ConvOperands, actBits int, stream uint64, repeat int) (float64, error) {
	p, b, err := prepareConv(d, o, actBits)
	if err != nil {
		return 0, err
	}
	if repeat < 1 {
		return 0, errs.Value("repeat must be >= 1, got %d", repeat)
	}
	if d.N == 0 {
		return 0, errs.Value("x: batch N must be >= 1 to time a convolution, got 0")
	}
	s := driver.Stream(stream)
	var ms float64
	err = onDevice(dev, true, func(g gpu) error {
		if err := g.ctx.CheckPointers(b.ptrs()...); err != nil {
			return err
		}
		scan, run := convOps(p, false, b, g.gridCap, g.cc >= mmaMinCC)
		ops := append(scan, run...)
		var err error
		ms, err = g.ctx.Time(s, repeat, func() error { return g.exec(ops, s) })
		return err
	})
	return ms, err
}

// prepareConv checks the operands of a convolution (everything that needs
// no device) and returns its plan and buffers.
func prepareConv(d *conv2d.Dims, o ConvOperands, actBits int) (convPlan, convBufs, error) {
	if actBits != 0 && actBits != 8 {
		return convPlan{}, convBufs{}, errs.Value("act_bits must be 0 (float32 activations) or 8, got %d", actBits)
	}
	p, err := newConvPlan(d, o.BlockSize, o.NScales, actBits == 0)
	if err != nil {
		return convPlan{}, convBufs{}, err
	}
	if want := int64(ternary.PackedLen(d.WLen)); o.WBytes != want {
		return convPlan{}, convBufs{}, errs.Value("weight: packed must have %d bytes for %d values, got %d", want, d.WLen, o.WBytes)
	}
	if o.WorkLen < p.work {
		return convPlan{}, convBufs{}, errs.Value("work must have at least %d bytes, got %d", p.work, o.WorkLen)
	}
	for _, c := range []struct {
		p     uint64
		name  string
		align uint64
	}{{o.X, "x", 4}, {o.W, "weight", 1}, {o.Scales, "scales", 4}, {o.Out, "out", 4}, {o.Work, "work", 256}} {
		if err := checkDevPtr(c.p, c.name, c.align); err != nil {
			return convPlan{}, convBufs{}, err
		}
	}
	if o.Bias != 0 && o.Bias%4 != 0 {
		return convPlan{}, convBufs{}, errs.Value("bias (0x%x) must be aligned to 4 bytes", o.Bias)
	}
	return p, convBufs{x: o.X, w: o.W, scales: o.Scales, bias: o.Bias, out: o.Out, work: o.Work}, nil
}

// checkConvFinite reads back x's first non-finite index and the weight's
// first code 3 (the scan's), then bias and the scales, and reports the first
// problem as the CPU path does (gokern/ops/conv2d: the same messages, x
// first, then the codes).
func checkConvFinite(c driver.Ctx, d *conv2d.Dims, b convBufs, nScales int64, s driver.Stream) error {
	var slots [2]uint64 // x's first non-finite index, the weight's first code 3
	if err := c.ReadSync(unsafe.Pointer(&slots[0]), b.work, 16, s); err != nil {
		return err
	}
	bad, code := slots[0], slots[1]
	if bad < uint64(d.XLen) {
		var v float32
		if err := c.ReadSync(unsafe.Pointer(&v), b.x+4*bad, 4, s); err != nil {
			return err
		}
		i := int(bad)
		w, h := i%d.W, i/d.W%d.H
		ch, n := i/(d.W*d.H)%d.C, i/(d.W*d.H*d.C)
		return errs.Value("x contains NaN or Inf (first at index (%d, %d, %d, %d), value %v); "+
			"pass check_finite=False to skip this check", n, ch, h, w, v)
	}
	for _, t := range []struct {
		addr uint64
		n    int64
		msg  string
	}{
		{b.bias, int64(d.O), "bias contains NaN or Inf (first at index %d, value %v)"},
		{b.scales, nScales, "weight: scales contain NaN or Inf (first at index %d, value %v)"},
	} {
		if t.addr == 0 {
			continue
		}
		host := make([]float32, t.n)
		if err := c.ReadSync(unsafe.Pointer(&host[0]), t.addr, 4*t.n, s); err != nil {
			return err
		}
		for i, v := range host {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return errs.Value(t.msg, i, v)
			}
		}
	}
	if code < uint64(d.WLen) {
		return errs.Value("weight: invalid I2_S code 3 at element %d", code)
	}
	return nil
}
