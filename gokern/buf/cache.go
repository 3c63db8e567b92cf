package buf

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// Cache keeps values derived from byte strings (a weight's packed codes)
// from call to call, so that a layer called again skips the derivation. A
// value is returned only when the bytes it was derived from equal the bytes
// passed now (a copy is kept and compared): a key may repeat (an address
// reused by another array, codes changed in place) and still never yields
// a stale value. At most MaxBytes (copies and values together) are kept,
// the least recently used dropped first; the zero value keeps nothing.
//
// The values kept are on a list in recency order (a hit moves its value to
// the front, a value kept goes in at the front, the back is dropped first),
// so that a hit, an insertion and each value dropped take constant time
// whatever the number of values kept.
type Cache[K comparable, V any] struct {
	MaxBytes int
	mu       sync.Mutex
	m        map[K]*cached[K, V]
	// front is the most recently used value, back the least; nil when
	// none is kept.
	front, back *cached[K, V]
	size        int
}

// cached is a value kept. key, src, val and size never change once it is
// kept (they are read outside the lock); prev, next and kept are the
// cache's, under its lock.
type cached[K comparable, V any] struct {
	key        K
	src        []byte
	val        V
	size       int
	prev, next *cached[K, V] // towards the front, towards the back
	kept       bool          // on the list (and in the map)
}

// Get returns the value kept under key when it was derived from bytes equal
// to src; otherwise it copies src, calls build on the copy (outside the
// lock: concurrent misses may build twice) and keeps its value, of size
// bytes, under key with that copy: what is kept is derived from exactly the
// bytes kept, even if src changes meanwhile. A value that build reports
// with an error is neither kept nor returned; if build panics, nothing is
// kept and the panic goes on to Get's caller with the cache unlocked.
func (c *Cache[K, V]) Get(key K, src []byte, build func(src []byte) (V, int, error)) (V, error) {
	return c.GetParts(key, [][]byte{src}, build)
}

// GetParts is Get with src given as parts, compared with the bytes kept as
// their concatenation without building it (a weight's codes and its
// scales, say): only a miss joins them, once, for build and the copy kept.
func (c *Cache[K, V]) GetParts(key K, parts [][]byte, build func(src []byte) (V, int, error)) (V, error) {
	c.mu.Lock()
	e := c.m[key]
	c.mu.Unlock()
	if e != nil && equalParts(e.src, parts) { // e.src is never modified once kept
		c.mu.Lock()
		if e.kept { // not dropped meanwhile
			c.unlink(e)
			c.pushFront(e)
		}
		c.mu.Unlock()
		return e.val, nil
	}
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	if c.MaxBytes <= 0 || size > c.MaxBytes/2 { // would push out most of the rest: not kept
		src := parts[0]
		if len(parts) > 1 {
			src = bytes.Join(parts, nil)
		}
		v, _, err := build(src)
		return v, err
	}
	cp := bytes.Join(parts, nil) // a copy, even of one part
	v, n, err := build(cp)
	if err != nil {
		return v, err
	}
	if size += n; n >= 0 && size <= c.MaxBytes/2 {
		c.keep(&cached[K, V]{key: key, src: cp, val: v, size: size})
	}
	return v, nil
}

// GetKept returns the value kept under key, or calls build on src (not
// copied) and keeps its value, of size bytes, under key. It compares
// nothing and keeps no copy of src: for keys that the caller promises name
// one byte string for the life of the process, never changed (a key holding
// the unique number of an immutable array). Keys given to GetKept must
// never be given to Get or GetParts. Errors and panics of build are as for
// Get.
func (c *Cache[K, V]) GetKept(key K, src []byte, build func(src []byte) (V, int, error)) (V, error) {
	c.mu.Lock()
	if e := c.m[key]; e != nil {
		c.unlink(e)
		c.pushFront(e)
		c.mu.Unlock()
		return e.val, nil
	}
	c.mu.Unlock()
	v, n, err := build(src)
	if err != nil || c.MaxBytes <= 0 || n < 0 || n > c.MaxBytes/2 {
		return v, err
	}
	c.keep(&cached[K, V]{key: key, val: v, size: n})
	return v, nil
}

// keep puts e (not kept) in at the front, replacing the value under its
// key, and drops values from the back while more than MaxBytes are kept
// (never e itself: its size is at most MaxBytes/2).
func (c *Cache[K, V]) keep(e *cached[K, V]) {
	key, size := e.key, e.size
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[K]*cached[K, V]{}
	}
	if old := c.m[key]; old != nil {
		c.drop(old)
	}
	c.m[key] = e
	c.pushFront(e)
	c.size += size
	for c.size > c.MaxBytes { // never reaches e: size <= MaxBytes/2
		c.drop(c.back)
	}
}

// pushFront puts e, not on the list, at its front.
func (c *Cache[K, V]) pushFront(e *cached[K, V]) {
	e.prev, e.next, e.kept = nil, c.front, true
	if c.front != nil {
		c.front.prev = e
	} else {
		c.back = e
	}
	c.front = e
}

// unlink takes e off the list.
func (c *Cache[K, V]) unlink(e *cached[K, V]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.front = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.back = e.prev
	}
	e.prev, e.next, e.kept = nil, nil, false
}

// drop stops keeping e.
func (c *Cache[K, V]) drop(e *cached[K, V]) {
	c.unlink(e)
	delete(c.m, e.key)
	c.size -= e.size
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
	for c.front != nil {
		c.unlink(c.front)
	}
	c.m, c.size = nil, 0
}

// equalParts reports whether b is the concatenation of parts.
func equalParts(b []byte, parts [][]byte) bool {
	for _, p := range parts {
		if len(p) > len(b) || !equal(b[:len(p)], p) {
			return false
		}
		b = b[len(p):]
	}
	return len(b) == 0
}

// equalMinChunk is the fewest bytes one thread compares. A hit compares
// every byte kept (a 4096 x 4096 int8 weight: about 1 ms on one core, a
// seventh of a 64-row linear layer), so long strings are compared on par's
// threads.
const equalMinChunk = 1 << 20

// equal is bytes.Equal(a, b), split over par's threads where long.
func equal(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) < 2*equalMinChunk || par.Threads() == 1 {
		return bytes.Equal(a, b)
	}
	var differ atomic.Bool
	par.For(len(a), equalMinChunk, func(lo, hi int) {
		if !differ.Load() && !bytes.Equal(a[lo:hi], b[lo:hi]) {
			differ.Store(true)
		}
	})
	return !differ.Load()
}
