package cuda

import (
	"sync"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/cuda/driver"
)

// drv is the driver the operations run on: the process's (tests run them on
// a fake, see withDriver in fake_test.go).
var drv = driver.System()

// moduleName names the embedded module in the driver's module cache and in
// its errors ("PTX ISA 8.4, sm_75").
var moduleName = sync.OnceValue(func() string {
	info := EmbeddedPTX()
	return "PTX ISA " + info.Version + ", " + info.Target
})

// gpu is a device during an operation: its context current and, when the
// operation launches kernels, the embedded module's functions (indexed by
// kernel).
type gpu struct {
	ctx     driver.Ctx
	fns     []driver.Function
	gridCap int64 // bound of every grid: enough CTAs to fill the GPU several times over
	cc      int   // compute capability, major*10 + minor
}

// onDevice runs fn on device dev; kernels loads the embedded module first.
func onDevice(dev int, kernels bool, fn func(gpu) error) error {
	d, err := drv.Device(dev)
	if err != nil {
		return err
	}
	return d.Do(func(c driver.Ctx) error {
		major, minor := d.ComputeCapability()
		g := gpu{ctx: c, gridCap: max(1, d.Multiprocessors()*32), cc: 10*major + minor}
		if kernels {
			fns, err := c.Module(moduleName(), ptxSource, kernelNames[:])
			if err != nil {
				return err
			}
			g.fns = fns
		}
		return fn(g)
	})
}

// exec enqueues ops on stream s.
func (g gpu) exec(ops []op, s driver.Stream) error {
	for i := range ops {
		o := &ops[i]
		if !o.launch {
			if err := g.ctx.MemsetD32(o.ptr, o.value, o.count, s); err != nil {
				return err
			}
			continue
		}
		grid := driver.Dim3{X: uint32(min(int64(o.grid), g.gridCap)), Y: 1, Z: 1}
		args := o.argBytes()
		if err := g.ctx.Launch(g.fns[o.k], grid, driver.Dim3{X: ctaThreads, Y: 1, Z: 1}, 0, s, args); err != nil {
			return err
		}
	}
	return nil
}

// devExec runs one launch on stream after checking that ptrs are memory of
// the device.
func devExec(dev int, o op, stream uint64, ptrs ...uint64) error {
	return onDevice(dev, true, func(g gpu) error {
		if err := g.ctx.CheckPointers(ptrs...); err != nil {
			return err
		}
		return g.exec([]op{o}, driver.Stream(stream))
	})
}

// argBytes returns the bytes of a launch's by-value argument struct.
func (o *op) argBytes() []byte {
	if o.conv != nil {
		return unsafe.Slice((*byte)(unsafe.Pointer(o.conv)), unsafe.Sizeof(*o.conv))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&o.args)), unsafe.Sizeof(o.args))
}
