//go:build !noasm && linux && amd64

package gemm

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// beforeGuard returns n bytes that end where an inaccessible page begins
// (a read past them faults), and the unmap to defer.
func beforeGuard(t *testing.T, n int) ([]byte, func()) {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n+page-1)/page*page + page
	m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	if err := syscall.Mprotect(m[size-page:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	return m[size-page-n : size-page], func() { _ = syscall.Munmap(m) }
}

// TestGemvPairsGuardPage runs the VNNI one-column GEMV (the pair tiles,
// checking and unchecked) with the weight's last row and the activations
// ending right before an inaccessible page: an odd last group's step must
// read 32 bytes of codes and 128 activations, not 64 and 160 (a read past
// them crashes the test; guarded in TestGemvPairs cannot see activations
// read past x, which meet zero codes). Skipped, saying so, without AVX-512
// VNNI.
func TestGemvPairsGuardPage(t *testing.T) {
	if !cpu.Usable(cpu.AVX512VNNI) {
		t.Skipf("family %s is not usable on this CPU", cpu.AVX512VNNI)
	}
	rng := rand.New(rand.NewPCG(15, 6))
	for _, ng := range []int{1, 2, 3, 5} {
		for _, rows := range []int{1, 2, 3, 4, 7} {
			c := newGemvCase(t, ng*GroupValues, rows, 1, 0, 0,
				func(int, int) int8 { return int8(rng.IntN(3) - 1) }, func(int, int) int8 { return int8(rng.IntN(256) - 128) })
			wb, wfree := beforeGuard(t, len(c.w))
			defer wfree()
			xb, xfree := beforeGuard(t, len(c.x))
			defer xfree()
			copy(wb, c.w)
			for i, v := range c.x {
				xb[i] = byte(v)
			}
			g := *c
			g.w, g.x = wb, unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(xb))), len(xb))
			for _, tiles := range []*gemvVNNITiles{&gemvVNNIChecked, &gemvVNNIValid} {
				g.check(t, fmt.Sprintf("pairs before a guard page, %d groups", ng), func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
					return gemvChunked(w, ldw, x, k, ldx, xsum, out, ng, tiles.runPairs)
				})
			}
		}
	}
}
