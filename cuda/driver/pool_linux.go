//go:build linux && cgo

package driver

import (
	"sync"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// pool keeps a device's scratch buffers and streams between calls (see
// Ctx.Scratch). Buffers are handed out whole to one call at a time and come
// back only after that call's stream has finished with them.
type pool struct {
	mu           sync.Mutex
	free         map[int64][]uint64 // size class -> idle buffers
	idleBytes    int64
	inUse        int
	streams      []Stream
	streamsInUse int
	allocs       int64
}

func (c ctx) Scratch(size int64, what string, fn func(buf uint64, s Stream) error) error {
	d := c.d
	s, err := d.getStream()
	if err != nil {
		return err
	}
	buf, err := d.getBuf(size, what)
	if err != nil {
		d.putStream(s)
		return err
	}
	err = fn(buf, s)
	// Whatever happened, wait for the stream before the buffer goes back.
	if r := cuStreamSynchronize(s); r != 0 {
		// The context is unusable (a sticky error): keep nothing.
		d.dropStream(s)
		d.dropBuf()
		if err == nil {
			err = check("cuStreamSynchronize", r)
		}
		return err
	}
	d.putStream(s)
	d.putBuf(buf, size)
	return err
}

// getBuf returns a buffer of at least size bytes (in the current context).
// When the device is out of memory, the idle buffers are freed and the
// allocation tried once more; then MemoryError with the sizes.
func (d *device) getBuf(size int64, what string) (uint64, error) {
	c := sizeClass(size)
	pl := &d.pool
	pl.mu.Lock()
	if l := pl.free[c]; len(l) > 0 {
		p := l[len(l)-1]
		pl.free[c] = l[:len(l)-1]
		pl.idleBytes -= c
		pl.inUse++
		pl.mu.Unlock()
		return p, nil
	}
	pl.mu.Unlock()
	p, r := cuMemAlloc(c)
	if r == errOutOfMemory {
		if err := d.releaseIdle(); err != nil {
			return 0, err
		}
		p, r = cuMemAlloc(c)
	}
	if r == errOutOfMemory {
		f, t, _ := cuMemGetInfo()
		return 0, errs.Memory("cuda: out of memory on cuda:%d (%s): %s needs %s (%d bytes) of device memory; %s free of %s",
			d.ord, d.name, what, human(c), c, human(f), human(t))
	}
	if r != 0 {
		return 0, check("cuMemAlloc", r)
	}
	pl.mu.Lock()
	pl.inUse++
	pl.allocs++
	pl.mu.Unlock()
	return p, nil
}

func (d *device) putBuf(p uint64, size int64) {
	c := sizeClass(size)
	pl := &d.pool
	pl.mu.Lock()
	pl.free[c] = append(pl.free[c], p)
	pl.idleBytes += c
	pl.inUse--
	pl.mu.Unlock()
}

// dropBuf forgets a buffer after a failure of its stream (it may still be in
// use by the GPU; the context is unusable anyway).
func (d *device) dropBuf() {
	d.pool.mu.Lock()
	d.pool.inUse--
	d.pool.mu.Unlock()
}

func (d *device) getStream() (Stream, error) {
	pl := &d.pool
	pl.mu.Lock()
	if n := len(pl.streams); n > 0 {
		s := pl.streams[n-1]
		pl.streams = pl.streams[:n-1]
		pl.streamsInUse++
		pl.mu.Unlock()
		return s, nil
	}
	pl.mu.Unlock()
	s, r := cuStreamCreate()
	if r != 0 {
		return 0, check("cuStreamCreate", r)
	}
	pl.mu.Lock()
	pl.streamsInUse++
	pl.mu.Unlock()
	return s, nil
}

func (d *device) putStream(s Stream) {
	d.pool.mu.Lock()
	d.pool.streams = append(d.pool.streams, s)
	d.pool.streamsInUse--
	d.pool.mu.Unlock()
}

func (d *device) dropStream(s Stream) {
	cuStreamDestroy(s)
	d.pool.mu.Lock()
	d.pool.streamsInUse--
	d.pool.mu.Unlock()
}

// releaseIdle frees the idle buffers and destroys the idle streams (in the
// current context). Buffers in use by a running call are not touched.
func (d *device) releaseIdle() error {
	pl := &d.pool
	pl.mu.Lock()
	free, streams := pl.free, pl.streams
	pl.free, pl.streams, pl.idleBytes = map[int64][]uint64{}, nil, 0
	pl.mu.Unlock()
	var first error
	for _, l := range free {
		for _, p := range l {
			if err := check("cuMemFree", cuMemFree(p)); err != nil && first == nil {
				first = err
			}
		}
	}
	for _, s := range streams {
		if err := check("cuStreamDestroy", cuStreamDestroy(s)); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// addTo adds the pool's counts to st.
func (pl *pool) addTo(st *PoolStats) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, l := range pl.free {
		st.IdleBuffers += len(l)
	}
	st.IdleBytes += pl.idleBytes
	st.InUseBuffers += pl.inUse
	st.IdleStreams += len(pl.streams)
	st.InUseStreams += pl.streamsInUse
	st.Allocations += pl.allocs
}
