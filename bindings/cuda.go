package main

/*
#include <stdint.h>
*/
import "C"

import (
	"encoding/json"

	"github.com/bitnet-go/bitnet_go/cuda"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ops/conv2d"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// The CUDA exports (package cuda). Device pointers and streams are uint64
// (CUdeviceptr, CUstream; stream 0 is the legacy default stream); the
// device is the driver's ordinal. The driver is loaded at the first call
// that needs it; without a driver or GPU those calls fail with status 4
// (RuntimeError) and a message saying which, and bng_cuda_status says so
// without failing.

func jsonOut(buf *C.char, bufcap C.int64_t, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return str(buf, bufcap, string(b))
}

func outPtr[T any](p *T, name string) error {
	if p == nil {
		return errs.Value("%s is NULL", name)
	}
	return nil
}

// bng_cuda_status writes {"available", "reason", "driver_version",
// "device_count"} as JSON; it loads the driver on first use.
//
//export bng_cuda_status
func bng_cuda_status(buf *C.char, bufcap C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error { return jsonOut(buf, bufcap, cuda.Probe()) })
}

// bng_cuda_ptx_info writes the embedded PTX module's facts as JSON
// ({"version", "target", "entries", ...}); needs no driver.
//
//export bng_cuda_ptx_info
func bng_cuda_ptx_info(buf *C.char, bufcap C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error { return jsonOut(buf, bufcap, cuda.EmbeddedPTX()) })
}

// bng_cuda_pool_stats writes the host path's device pool statistics as JSON.
//
//export bng_cuda_pool_stats
func bng_cuda_pool_stats(buf *C.char, bufcap C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error { return jsonOut(buf, bufcap, cuda.Pool()) })
}

//export bng_cuda_device_name
func bng_cuda_device_name(dev C.int32_t, buf *C.char, bufcap C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		name, err := cuda.DeviceName(int(dev))
		if err != nil {
			return err
		}
		return str(buf, bufcap, name)
	})
}

// bng_cuda_mem_info writes the free and total memory of device dev in bytes.
//
//export bng_cuda_mem_info
func bng_cuda_mem_info(dev C.int32_t, free, total *C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if err := outPtr(free, "free"); err != nil {
			return err
		}
		if err := outPtr(total, "total"); err != nil {
			return err
		}
		f, t, err := cuda.MemInfo(int(dev))
		if err != nil {
			return err
		}
		*free, *total = C.int64_t(f), C.int64_t(t)
		return nil
	})
}

// bng_cuda_empty_cache frees the idle buffers and streams of the pool.
//
//export bng_cuda_empty_cache
func bng_cuda_empty_cache(errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, cuda.EmptyCache)
}

// bng_cuda_workspace_size writes the bytes of device workspace that
// bng_cuda_quantize_i2s needs for n values in blocks of block_size.
//
//export bng_cuda_workspace_size
func bng_cuda_workspace_size(n, blockSize C.int64_t, out *C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if err := outPtr(out, "out"); err != nil {
			return err
		}
		w, err := cuda.WorkspaceSize(int64(n), int64(blockSize))
		if err != nil {
			return err
		}
		*out = C.int64_t(w)
		return nil
	})
}

// Diagnostics entries (bng_diagnostics, diag.go) for the CUDA benchmark and
// tests. Arguments are JSON numbers; device pointers and streams are
// unsigned 64-bit integers, decoded exactly.
func init() {
	registerDiag("cuda_time_quantize", diagTimeQuantize)
	registerDiag("cuda_time_copy", diagTimeCopy)
	registerDiag("cuda_time_conv2d", diagTimeConv2D)
	registerDiag("cuda_plan", diagPlan)
}

// maxRepeat bounds the repeat count of the timers.
const maxRepeat = 1 << 20

func checkRepeat(repeat int64) error {
	if repeat < 1 || repeat > maxRepeat {
		return errs.Value("repeat must be in [1, %d], got %d", maxRepeat, repeat)
	}
	return nil
}

// msResult is the result of the timers: the mean milliseconds of one call,
// measured with CUDA events.
type msResult struct {
	MS float64 `json:"ms"`
}

// timerArgs are the arguments every timer takes: the device, the stream
// and the repeat count.
type timerArgs struct {
	Dev    int32  `json:"dev"`
	Stream uint64 `json:"stream"`
	Repeat int64  `json:"repeat"`
}

func (t *timerArgs) common() *timerArgs { return t }

// timer returns the diagnostics entry that decodes its arguments A (a
// struct embedding timerArgs) as entry name's, checks the repeat count and
// returns run's time as {"ms"}.
func timer[A any, P interface {
	*A
	common() *timerArgs
}](name string, run func(a *A) (float64, error)) func(json.RawMessage) (any, error) {
	return func(req json.RawMessage) (any, error) {
		a := new(A)
		if err := decodeArgs(name, req, a); err != nil {
			return nil, err
		}
		if err := checkRepeat(P(a).common().Repeat); err != nil {
			return nil, err
		}
		ms, err := run(a)
		if err != nil {
			return nil, err
		}
		return msResult{ms}, nil
	}
}

// quantizeTimerArgs: {"dev", "x", "n", "block_size", "method", "packed",
// "packed_len", "scales", "n_scales", "work", "work_len", "stream",
// "repeat"} (bng_cuda_quantize_i2s's arguments without check_finite, plus
// repeat): cuda_time_quantize runs repeat quantizations without the finite
// check on stream between two CUDA events -> {"ms"}.
type quantizeTimerArgs struct {
	timerArgs
	X         uint64 `json:"x"`
	N         int64  `json:"n"`
	BlockSize int64  `json:"block_size"`
	Method    int32  `json:"method"`
	Packed    uint64 `json:"packed"`
	PackedLen int64  `json:"packed_len"`
	Scales    uint64 `json:"scales"`
	NScales   int64  `json:"n_scales"`
	Work      uint64 `json:"work"`
	WorkLen   int64  `json:"work_len"`
}

var diagTimeQuantize = timer("cuda_time_quantize", func(a *quantizeTimerArgs) (float64, error) {
	return cuda.TimeQuantize(int(a.Dev), a.X, a.Packed, a.Scales, a.Work, a.N, a.BlockSize,
		ternary.Method(a.Method), a.PackedLen, a.NScales, a.WorkLen, a.Stream, int(a.Repeat))
})

// copyTimerArgs: {"dev", "dst", "src", "nbytes", "stream", "repeat"}:
// cuda_time_copy times repeat device-to-device copies of nbytes on stream
// -> {"ms"}.
type copyTimerArgs struct {
	timerArgs
	Dst    uint64 `json:"dst"`
	Src    uint64 `json:"src"`
	NBytes int64  `json:"nbytes"`
}

var diagTimeCopy = timer("cuda_time_copy", func(a *copyTimerArgs) (float64, error) {
	return cuda.TimeCopy(int(a.Dev), a.Dst, a.Src, a.NBytes, a.Stream, int(a.Repeat))
})

// convTimerArgs: the operands of bng_cuda_conv2d as device addresses and
// lengths ({"x", "w", "scales", "bias" (0: none), "out", "work", "w_bytes",
// "n_scales", "block_size" (0: one scale), "work_len"}), its geometry (
// "x_shape" [N, C, H, W], "w_shape" [O, C/groups, kH, kW], "stride" and
// "dilation" [h, w], "padding" [top, left, bottom, right], "groups"),
// "act_bits" (0 or 8), and "dev", "stream", "repeat": cuda_time_conv2d runs
// repeat convolutions (no finite check) back to back between two CUDA events
// -> {"ms"}. x and out are trusted to hold the geometry's sizes, as the
// timers' other buffers are.
type convTimerArgs struct {
	timerArgs
	X         uint64 `json:"x"`
	W         uint64 `json:"w"`
	Scales    uint64 `json:"scales"`
	Bias      uint64 `json:"bias"`
	Out       uint64 `json:"out"`
	Work      uint64 `json:"work"`
	WBytes    int64  `json:"w_bytes"`
	NScales   int64  `json:"n_scales"`
	BlockSize int64  `json:"block_size"`
	WorkLen   int64  `json:"work_len"`
	ActBits   int32  `json:"act_bits"`
	XShape    [4]int `json:"x_shape"`
	WShape    [4]int `json:"w_shape"`
	Stride    [2]int `json:"stride"`
	Padding   [4]int `json:"padding"`
	Dilation  [2]int `json:"dilation"`
	Groups    int    `json:"groups"`
}

var diagTimeConv2D = timer("cuda_time_conv2d", func(a *convTimerArgs) (float64, error) {
	x, w := a.XShape, a.WShape
	d, err := conv2d.Shape{
		N: x[0], C: x[1], H: x[2], W: x[3], O: w[0], WC: w[1], KH: w[2], KW: w[3], Groups: a.Groups,
		StrideH: a.Stride[0], StrideW: a.Stride[1],
		PadT: a.Padding[0], PadL: a.Padding[1], PadB: a.Padding[2], PadR: a.Padding[3],
		DilH: a.Dilation[0], DilW: a.Dilation[1],
	}.Check()
	if err != nil {
		return 0, err
	}
	return cuda.TimeConv2D(int(a.Dev), &d, cuda.ConvOperands{
		X: a.X, W: a.W, Scales: a.Scales, Bias: a.Bias, Out: a.Out, Work: a.Work,
		WBytes: a.WBytes, NScales: a.NScales, BlockSize: a.BlockSize, WorkLen: a.WorkLen,
	}, int(a.ActBits), a.Stream, int(a.Repeat))
})

// diagPlan: {"n", "block_size"} (0: one scale) -> how the quantization runs
// on the GPU, {"passes", "tile", "blocks", "workspace"}; needs no driver.
func diagPlan(req json.RawMessage) (any, error) {
	var a struct {
		N         int64 `json:"n"`
		BlockSize int64 `json:"block_size"`
	}
	if err := decodeArgs("cuda_plan", req, &a); err != nil {
		return nil, err
	}
	return cuda.Describe(a.N, a.BlockSize)
}
