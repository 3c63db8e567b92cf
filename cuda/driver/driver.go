// Package driver is bitnet_go's access to the NVIDIA CUDA driver API: the
// only cgo and the only Linux-specific code of the CUDA path.
//
// On Linux with cgo, the driver is loaded at run time with
// dlopen("libcuda.so.1") by a small C shim with its own typedefs
// (shim_linux.go): no CUDA header or library is needed to build, and the
// library loads on machines without a GPU or driver, where every call says
// why CUDA is unavailable. Elsewhere (stub.go) the driver is never
// available. The GPU operations (package cuda) are written against the
// interfaces below and exist once for every platform.
//
// Device addresses are uint64 (CUdeviceptr), never Go pointers. Errors are
// gokern/errs errors: a failed driver call is a RuntimeError
// "cuda: <call> failed: <CUDA_ERROR_NAME>: <description>".
package driver

import (
	"fmt"
	"unsafe"
)

// Driver is the CUDA driver of the process.
type Driver interface {
	// Status loads the driver on first use and reports whether CUDA can be
	// used, and if not why. It never fails.
	Status() Status
	// Device returns device ordinal without creating its context: a
	// RuntimeError (the Status's Reason) when CUDA is unavailable, a
	// ValueError when ordinal is out of range.
	Device(ordinal int) (Device, error)
	// EmptyCache frees the idle buffers and streams of every device's pool
	// (see Ctx.Scratch). Without a driver it does nothing.
	EmptyCache() error
	// Pool returns the pool statistics of every device together.
	Pool() PoolStats
}

// Device is one GPU. Its primary context is shared with PyTorch, CuPy and
// the CUDA runtime in the same process, and never released.
type Device interface {
	Ordinal() int
	Name() string
	Multiprocessors() int64
	// ComputeCapability is the device's compute capability (e.g. 9, 0 for sm_90).
	ComputeCapability() (major, minor int)
	// Do calls fn with the device's primary context current on a locked OS
	// thread (pushed, then popped: the caller's current context is left as
	// it was). The first Do retains the primary context (which takes device
	// memory); its failure is kept and returned by every later Do.
	Do(fn func(Ctx) error) error
}

// Ctx is a Device with its context current: valid only during the Do call
// that passed it. Calls that take a Stream enqueue and return without
// waiting, unless they say otherwise.
type Ctx interface {
	// Module returns the functions entries of a PTX module, in order,
	// JIT-compiling image the first time a name is asked for on the device.
	// The result, an error included, is kept for the life of the process;
	// name identifies the image in that cache and in error messages.
	Module(name, image string, entries []string) ([]Function, error)
	// Launch enqueues f on s; each arg is the bytes of one by-value kernel
	// parameter (copied before Launch returns).
	Launch(f Function, grid, block Dim3, shared uint32, s Stream, args ...[]byte) error
	MemsetD32(dst uint64, value uint32, count int64, s Stream) error
	CopyHtoD(dst uint64, src unsafe.Pointer, n int64, s Stream) error
	// CopyDtoH: dst must stay valid until s is synchronised, so it must not
	// be Go memory (use ReadSync for that).
	CopyDtoH(dst unsafe.Pointer, src uint64, n int64, s Stream) error
	CopyDtoD(dst, src uint64, n int64, s Stream) error
	// ReadSync copies n bytes to dst, then waits for s: dst may be Go memory.
	ReadSync(dst unsafe.Pointer, src uint64, n int64, s Stream) error
	Sync(s Stream) error
	// CheckPointers returns a ValueError unless every address is memory of
	// this device (so that a tensor of another GPU or of the host is an
	// error, not a fault in a kernel).
	CheckPointers(ptrs ...uint64) error
	MemInfo() (free, total int64, err error)
	// Scratch lends fn a pooled device buffer of at least size bytes and a
	// pooled stream, then waits for the stream and gives both back to the
	// pool (or, if the stream failed, drops them: the context is unusable).
	// Out of device memory, the idle buffers are freed and the allocation
	// tried again; then it is a MemoryError naming what and the sizes.
	Scratch(size int64, what string, fn func(buf uint64, s Stream) error) error
	// Time records an event on s, calls enqueue repeat times, records a
	// second event, waits for it, and returns the mean milliseconds of one
	// call measured by the events (the GPU's time, not the host's).
	Time(s Stream, repeat int, enqueue func() error) (float64, error)
}

// Stream is a CUstream handle; 0 is the legacy default stream.
type Stream uint64

// Function is a kernel of a loaded module.
type Function struct {
	Handle uint64 // CUfunction
	Name   string // its .entry name, for error messages
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Status tells whether CUDA can be used, and if not why.
type Status struct {
	Available     bool   `json:"available"`
	Reason        string `json:"reason,omitempty"`
	DriverVersion int    `json:"driver_version"` // e.g. 13000 for CUDA 13.0; 0 when unknown
	DeviceCount   int    `json:"device_count"`
}

// PoolStats describes the pools of every device together.
type PoolStats struct {
	IdleBuffers   int   `json:"idle_buffers"`
	IdleBytes     int64 `json:"idle_bytes"`
	InUseBuffers  int   `json:"in_use_buffers"`
	IdleStreams   int   `json:"idle_streams"`
	InUseStreams  int   `json:"in_use_streams"`
	Allocations   int64 `json:"allocations"` // cuMemAlloc calls so far
	ModulesLoaded int   `json:"modules_loaded"`
}

// System returns the process's driver (loaded on first use).
func System() Driver { return system }

// sizeClass rounds a pool request up: powers of two from 4 KiB up to 1 MiB,
// then steps of 1/8 of the power of two below (at most 12.5% unused).
func sizeClass(size int64) int64 {
	if size <= 1<<20 {
		c := int64(4096)
		for c < size {
			c <<= 1
		}
		return c
	}
	p := int64(1) << 20
	for p*2 <= size {
		p *= 2
	}
	step := p / 8
	return (size + step - 1) / step * step
}

// human formats a byte count for messages ("2.2 MiB").
func human(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
