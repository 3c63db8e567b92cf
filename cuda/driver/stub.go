//go:build !linux || !cgo

package driver

import "github.com/bitnet-go/bitnet_go/gokern/errs"

// Without Linux and cgo there is no shim: CUDA is never available, and every
// operation that needs a device fails with the Status's Reason.

const unsupported = "cuda: not available on this platform or build of bitnet_go (the CUDA path needs Linux and cgo)"

type stub struct{}

var system Driver = stub{}

func (stub) Status() Status { return Status{Reason: unsupported} }

func (stub) Device(int) (Device, error) { return nil, errs.Runtime("%s", unsupported) }

func (stub) EmptyCache() error { return nil }

func (stub) Pool() PoolStats { return PoolStats{} }
