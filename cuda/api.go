package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/cuda/driver"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// This file is the package's API: argument checks, then the work on the
// driver (exec.go). Without a driver or GPU, or in a build without one (see
// package driver), every call that needs a device fails with a
// RuntimeError saying why.
//
// Device pointers are uint64 (CUdeviceptr), never Go pointers. Host
// pointers (QuantizeHost) point to memory the caller owns (numpy arrays);
// they are used only during the call, which returns after the stream has
// finished with them.

// Status tells whether CUDA can be used, and if not why.
type Status = driver.Status

// PoolStats describes the pool of every device together.
type PoolStats = driver.PoolStats

// Probe loads the driver on first use and reports the status. It never
// fails: an unavailable driver or GPU is a Status with a Reason.
func Probe() Status { return drv.Status() }

// DeviceCount returns the number of CUDA devices, or the reason there are none.
func DeviceCount() (int, error) {
	s := drv.Status()
	if !s.Available {
		return 0, errs.Runtime("%s", s.Reason)
	}
	return s.DeviceCount, nil
}

// DeviceName returns the name of device i (without creating its context).
func DeviceName(i int) (string, error) {
	d, err := drv.Device(i)
	if err != nil {
		return "", err
	}
	return d.Name(), nil
}

// MemInfo returns the free and total memory of device i in bytes.
func MemInfo(i int) (free, total int64, err error) {
	err = onDevice(i, false, func(g gpu) error {
		free, total, err = g.ctx.MemInfo()
		return err
	})
	return free, total, err
}

// EmptyCache frees the idle device buffers and streams of the pool that the
// host path (QuantizeHost) keeps between calls.
func EmptyCache() error { return drv.EmptyCache() }

// Pool returns the pool statistics.
func Pool() PoolStats { return drv.Pool() }

// checkQuantize validates a quantization's sizes and returns its plan.
func checkQuantize(n, blockSize int64, m ternary.Method, packedLen, nScales int64) (plan, error) {
	if err := checkMethod(m); err != nil {
		return plan{}, err
	}
	p, err := newPlan(n, blockSize)
	if err != nil {
		return plan{}, err
	}
	if want := int64(ternary.PackedLen(int(n))); packedLen != want {
		return plan{}, errs.Value("packed must have %d bytes for %d values, got %d", want, n, packedLen)
	}
	if nScales != p.nb {
		return plan{}, errs.Value("scales must have %d entries for %d values in blocks of %d, got %d", p.nb, n, blockSize, nScales)
	}
	return p, nil
}

func checkDevPtr(p uint64, name string, alignment uint64) error {
	if p == 0 {
		return errs.Value("%s is NULL", name)
	}
	if p%alignment != 0 {
		return errs.Value("%s (0x%x) must be aligned to %d bytes", name, p, alignment)
	}
	return nil
}

// QuantizeDevice quantizes n float32 values at device address x into I2_S
// codes at packed and scales at scales, on device dev, enqueued on stream
// (a CUstream; 0 is the legacy default stream). work is a device workspace
// of at least WorkspaceSize(n, blockSize) bytes. The call returns once the
// work is enqueued, except with check, where it waits for the stream to
// read back the first non-finite index (a ValueError naming it).
func QuantizeDevice(dev int, x, packed, scales, work uint64, n, blockSize int64, m ternary.Method, check bool,
	packedLen, nScales, workLen int64, stream uint64) error {
	p, err := checkQuantize(n, blockSize, m, packedLen, nScales)
	if err != nil {
		return err
	}
	if workLen < p.workBytes() {
		return errs.Value("work must have at least %d bytes for %d values in blocks of %d, got %d", p.workBytes(), n, blockSize, workLen)
	}
	for _, c := range []struct {
		p     uint64
		name  string
		align uint64
	}{{x, "x", 4}, {packed, "packed", 1}, {scales, "scales", 4}, {work, "work", 8}} {
		if err := checkDevPtr(c.p, c.name, c.align); err != nil {
			return err
		}
	}
	b, s := devBufs{x: x, packed: packed, scales: scales, work: work}, driver.Stream(stream)
	return onDevice(dev, true, func(g gpu) error {
		if err := g.ctx.CheckPointers(b.x, b.packed, b.scales, b.work); err != nil {
			return err
		}
		if err := g.exec(quantizeOps(p, m, check, b, g.gridCap), s); err != nil {
			return err
		}
		if !check {
			return nil
		}
		var bad uint64
		if err := g.ctx.ReadSync(unsafe.Pointer(&bad), b.work, 8, s); err != nil || bad >= uint64(p.n) {
			return err
		}
		var v float32
		if err := g.ctx.ReadSync(unsafe.Pointer(&v), b.x+4*bad, 4, s); err != nil {
			return err
		}
		return nonFinite(v, int64(bad))
	})
}

func nonFinite(v float32, idx int64) error {
	return errs.Value("x contains a non-finite value (%v) at flat index %d; pass check_finite=False to quantize anyway", v, idx)
}

// QuantizeHost quantizes n float32 values in host memory on device dev:
// copy in, kernels, copy out, through pooled device buffers and a pooled
// stream. It returns when packed and scales hold the result.
func QuantizeHost(dev int, x unsafe.Pointer, n, blockSize int64, m ternary.Method, check bool,
	packed unsafe.Pointer, packedLen int64, scales unsafe.Pointer, nScales int64) error {
	p, err := checkQuantize(n, blockSize, m, packedLen, nScales)
	if err != nil {
		return err
	}
	if x == nil || packed == nil || scales == nil {
		return errs.Value("x, packed and scales must not be NULL")
	}
	plen := int64(ternary.PackedLen(int(p.n)))
	xb, pb, sb := align(4*p.n, 256), align(plen, 256), align(4*p.nb, 256)
	bad := uint64(math.MaxUint64)
	err = onDevice(dev, true, func(g gpu) error {
		c := g.ctx
		return c.Scratch(xb+pb+sb+p.workBytes(), fmt.Sprintf("quantize_i2s of %d values", p.n), func(buf uint64, s driver.Stream) error {
			b := devBufs{x: buf, packed: buf + uint64(xb), scales: buf + uint64(xb+pb), work: buf + uint64(xb+pb+sb)}
			if err := c.CopyHtoD(b.x, x, 4*p.n, s); err != nil {
				return err
			}
			if err := g.exec(quantizeOps(p, m, check, b, g.gridCap), s); err != nil {
				return err
			}
			if err := c.CopyDtoH(packed, b.packed, plen, s); err != nil {
				return err
			}
			if err := c.CopyDtoH(scales, b.scales, 4*p.nb, s); err != nil {
				return err
			}
			if check {
				return c.ReadSync(unsafe.Pointer(&bad), b.work, 8, s)
			}
			return nil
		})
	})
	if err != nil || !check || bad >= uint64(p.n) {
		return err
	}
	return nonFinite(unsafe.Slice((*float32)(x), p.n)[bad], int64(bad))
}

// UnpackDevice writes the n ternary values (int8) of the I2_S codes at
// packed into out, on stream, without waiting. Codes are not validated on
// the GPU: a code 3, which quantization never writes, unpacks as 2.
func UnpackDevice(dev int, packed uint64, packedLen int64, out uint64, n int64, stream uint64) error {
	if err := checkUnpack(n, 0, packedLen); err != nil {
		return err
	}
	if err := checkDevPtr(packed, "packed", 1); err != nil {
		return err
	}
	if err := checkDevPtr(out, "out", 1); err != nil {
		return err
	}
	return devExec(dev, unpackOp(n, packed, out, 1<<30), stream, packed, out)
}

// DequantizeDevice writes value*scale (float32) for the n values at packed
// into out, on stream, without waiting (codes are not validated, see
// UnpackDevice).
func DequantizeDevice(dev int, packed uint64, packedLen, blockSize int64, scales uint64, nScales int64,
	out uint64, n int64, stream uint64) error {
	if err := checkUnpack(n, blockSize, packedLen); err != nil {
		return err
	}
	if nb := int64(ternary.NumBlocks(int(n), int(blockSize))); nScales != nb {
		return errs.Value("scales must have %d entries for %d values in blocks of %d, got %d", nb, n, blockSize, nScales)
	}
	for _, c := range []struct {
		p     uint64
		name  string
		align uint64
	}{{packed, "packed", 1}, {scales, "scales", 4}, {out, "out", 4}} {
		if err := checkDevPtr(c.p, c.name, c.align); err != nil {
			return err
		}
	}
	return devExec(dev, dequantizeOp(n, blockSize, packed, scales, out, 1<<30), stream, packed, scales, out)
}

func checkUnpack(n, blockSize, packedLen int64) error {
	if err := ternary.CheckSizes(int(n), int(blockSize)); err != nil {
		return err
	}
	if want := int64(ternary.PackedLen(int(n))); packedLen < want {
		return errs.Value("packed has %d bytes, %d values need %d", packedLen, n, want)
	}
	return nil
}

// TimeQuantize enqueues repeat quantizations (without the finite check) on
// stream between two CUDA events and returns the mean milliseconds of one,
// measured by the events (the GPU's time, not the host's).
func TimeQuantize(dev int, x, packed, scales, work uint64, n, blockSize int64, m ternary.Method,
	packedLen, nScales, workLen int64, stream uint64, repeat int) (float64, error) {
	p, err := checkQuantize(n, blockSize, m, packedLen, nScales)
	if err != nil {
		return 0, err
	}
	if workLen < p.workBytes() {
		return 0, errs.Value("work must have at least %d bytes, got %d", p.workBytes(), workLen)
	}
	if repeat < 1 {
		return 0, errs.Value("repeat must be >= 1, got %d", repeat)
	}
	b, s := devBufs{x: x, packed: packed, scales: scales, work: work}, driver.Stream(stream)
	var ms float64
	err = onDevice(dev, true, func(g gpu) error {
		if err := g.ctx.CheckPointers(b.x, b.packed, b.scales, b.work); err != nil {
			return err
		}
		ops := quantizeOps(p, m, false, b, g.gridCap)
		var err error
		ms, err = g.ctx.Time(s, repeat, func() error { return g.exec(ops, s) })
		return err
	})
	return ms, err
}

// TimeCopy times repeat device-to-device copies of nbytes (cuMemcpyDtoDAsync)
// on stream with CUDA events: the bandwidth ceiling of the benchmark.
func TimeCopy(dev int, dst, src uint64, nbytes int64, stream uint64, repeat int) (float64, error) {
	if nbytes <= 0 || repeat < 1 {
		return 0, errs.Value("nbytes and repeat must be positive, got %d and %d", nbytes, repeat)
	}
	if err := checkDevPtr(dst, "dst", 1); err != nil {
		return 0, err
	}
	if err := checkDevPtr(src, "src", 1); err != nil {
		return 0, err
	}
	s := driver.Stream(stream)
	var ms float64
	err := onDevice(dev, false, func(g gpu) error {
		if err := g.ctx.CheckPointers(dst, src); err != nil {
			return err
		}
		var err error
		ms, err = g.ctx.Time(s, repeat, func() error { return g.ctx.CopyDtoD(dst, src, nbytes, s) })
		return err
	})
	return ms, err
}
