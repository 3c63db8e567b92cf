// Package buf keeps memory between calls: scratch buffers (List) and values
// derived from weights (Cache). Grown once, a kept buffer costs no
// allocation, page faults or garbage collection afterwards; a sync.Pool
// would not do, because the collections that fresh buffers cause empty it,
// and with the small Go heap of a library called from Python they come
// every few calls.
package buf

import "sync"

// List is a free list of buffers: Get hands out a kept one (or a new empty
// one), Put keeps one for later unless it holds more than MaxCap elements
// or MaxCount buffers are kept already. The zero value keeps nothing.
type List[T any] struct {
	MaxCap, MaxCount int
	mu               sync.Mutex
	free             []*[]T
}

// Get returns a kept buffer, or a new one of length and capacity 0.
func (l *List[T]) Get() *[]T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := len(l.free); k > 0 {
		b := l.free[k-1]
		l.free = l.free[:k-1]
		return b
	}
	return new([]T)
}

// Put keeps b (its contents stale) for a later Get; the caller no longer
// uses it.
func (l *List[T]) Put(b *[]T) {
	if cap(*b) > l.MaxCap {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) < l.MaxCount {
		l.free = append(l.free, b)
	}
}

// Sized returns a kept buffer resized to n elements (reallocated when its
// capacity is short; the contents are stale) and the handle to Put back.
func (l *List[T]) Sized(n int) ([]T, *[]T) {
	b := l.Get()
	if cap(*b) < n {
		*b = make([]T, n)
	}
	*b = (*b)[:n]
	return *b, b
}
