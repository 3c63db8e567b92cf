package buf

import (
	"bytes"
	"sync"
)

// Cache keeps values derived from byte strings (a weight's packed codes)
// from call to call, so that a layer called again skips the derivation. A
// value is returned only when the bytes it was derived from equal the bytes
// passed now (a copy is kept and compared): a key may repeat (an address
// reused by another array, codes changed in place) and still never yields
// a stale value. At most MaxBytes (copies and values together) are kept,
// the least recently used dropped first; the zero value keeps nothing.
type Cache[K comparable, V any] struct {
	MaxBytes int
	mu       sync.Mutex
	m        map[K]*cached[V]
	size     int
	tick     uint64
}

type cached[V any] struct {
	src  []byte
	val  V
	size int
	used uint64
}

// Get returns the value kept under key when it was derived from bytes equal
// to src; otherwise it copies src, calls build on the copy (outside the
// lock: concurrent misses may build twice) and keeps its value, of size
// bytes, under key with that copy: what is kept is derived from exactly the
// bytes kept, even if src changes meanwhile. A value that build reports
// with an error is neither kept nor returned.
func (c *Cache[K, V]) Get(key K, src []byte, build func(src []byte) (V, int, error)) (V, error) {
	c.mu.Lock()
	e := c.m[key]
	c.mu.Unlock()
	if e != nil && bytes.Equal(e.src, src) { // e is never modified once kept
		c.mu.Lock()
		c.tick++
		e.used = c.tick
		c.mu.Unlock()
		return e.val, nil
	}
	size := len(src)
	if size > c.MaxBytes/2 { // would push out most of the rest: not kept
		v, _, err := build(src)
		return v, err
	}
	cp := bytes.Clone(src)
	v, n, err := build(cp)
	if err != nil {
		return v, err
	}
	if size += n; size > c.MaxBytes/2 {
		return v, nil
	}
	e = &cached[V]{src: cp, val: v, size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[K]*cached[V]{}
	}
	if old := c.m[key]; old != nil {
		c.size -= old.size
	}
	c.tick++
	e.used = c.tick
	c.m[key] = e
	c.size += size
	for c.size > c.MaxBytes {
		var lru K
		oldest := ^uint64(0)
		for k, x := range c.m {
			if x.used < oldest {
				lru, oldest = k, x.used
			}
		}
		c.size -= c.m[lru].size
		delete(c.m, lru)
	}
	return v, nil
}

// Len returns the number of values kept and their size in bytes.
func (c *Cache[K, V]) Len() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.size
}

// Clear drops every value kept.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.size = nil, 0
}
