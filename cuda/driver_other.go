//go:build !linux || !cgo

package cuda

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Without Linux and cgo there is no driver shim: CUDA is never available.

const unsupported = "cuda: not supported by this build of bitnet_go (the CUDA path needs Linux and cgo)"

func probe() Status { return Status{Reason: unsupported} }

func errUnsupported() error { return errs.Runtime("%s", unsupported) }

func devQuantize(int, plan, ternary.Method, bool, devBufs, uint64) error { return errUnsupported() }

func hostQuantize(int, plan, ternary.Method, bool, unsafe.Pointer, unsafe.Pointer, unsafe.Pointer) error {
	return errUnsupported()
}

func devExec(int, []op, uint64, []uint64) error { return errUnsupported() }

func devTimeQuantize(int, plan, ternary.Method, devBufs, uint64, int) (float64, error) {
	return 0, errUnsupported()
}

func devTimeCopy(int, uint64, uint64, int64, uint64, int) (float64, error) {
	return 0, errUnsupported()
}

func deviceName(int) (string, error) { return "", errUnsupported() }

func memInfo(int) (int64, int64, error) { return 0, 0, errUnsupported() }

func emptyCache() error { return nil }

func poolStats() PoolStats { return PoolStats{} }
