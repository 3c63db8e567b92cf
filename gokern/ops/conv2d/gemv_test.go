package conv2d

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// TestGEMV runs pointwise shapes that take the gemv path (K a multiple of
// 128, at most gemvMaxP positions; up to 40 columns, several column
// blocks) and some just outside it, with every
// gemm family and thread count, against the references; a code 3 gives
// PackA's error.
func TestGEMV(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	rng := rand.New(rand.NewPCG(11, 11))
	for ci, c := range []struct{ n, c, o, h, w, bs int }{
		{1, 128, 5, 1, 1, 0}, {2, 256, 9, 1, 1, 128}, {1, 256, 7, 1, 3, 256}, {2, 384, 13, 2, 2, 128},
		{1, 512, 33, 1, 1, 512}, {1, 256, 6, 1, 5, 0}, {1, 200, 6, 1, 1, 0}, {3, 128, 4, 1, 2, 64},
		{4, 256, 9, 2, 2, 0}, {17, 128, 5, 1, 1, 128}, {3, 128, 6, 1, 5, 0}, {9, 256, 4, 1, 1, 256},
		{16, 128, 3, 1, 1, 0}, {2, 640, 21, 3, 3, 128}, {5, 128, 6, 2, 4, 0}, {40, 256, 3, 1, 1, 128},
	} {
		_ = par.SetThreads(1 + ci%2)
		tc := newCase(t, rng, pointwise(c.n, c.c, c.o, c.h, c.w), c.bs, ci%2 == 0)
		checkFamilies(t, tc, fmt.Sprintf("gemv=%v", useGEMV(&tc.d)))
	}
	// A code 3: the same error as the panel packing's.
	tc := newCase(t, rng, pointwise(1, 256, 8, 1, 1), 0, false)
	for _, p := range []int{5*256 + 77, 1000, 3*256 + 127} {
		w := withCode3(withCode3(tc.w, p), p+300) // and a later one
		out := make([]float32, tc.d.OutLen)
		for _, kind := range []Algo{Pointwise, Im2col} {
			_, err := Conv2D(tc.d, tc.x, w, nil, out, Options{Algo: kind})
			if want := fmt.Sprintf("code 3 at element %d", p); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: err %v, want %q", kind, err, want)
			}
		}
	}
}

// TestGEMVRowsPastOneCall: one thread and the drivers' own split, so that
// a task covers more rows than one kernel call (gemvRows) and the results
// are folded call by call at row offsets past the task's first; per-row and
// per-block scales, with and without bias, against the references.
func TestGEMVRowsPastOneCall(t *testing.T) {
	keepThreads(t)
	_ = par.SetThreads(1)
	rng := rand.New(rand.NewPCG(11, 12))
	for ci, c := range []struct{ n, c, o, bs int }{{6, 128, 130, 128}, {3, 256, 257, 128}, {2, 384, 200, 0}, {1, 256, 129, 256}} {
		tc := newCase(t, rng, pointwise(c.n, c.c, c.o, 1, 1), c.bs, ci%2 == 0)
		if !useGEMV(&tc.d) {
			t.Fatalf("%+v: not on the gemv path", c)
		}
		checkFamilies(t, tc, fmt.Sprintf("rows=%d", c.o))
	}
}

// TestGEMVOddBlocks runs the gemv path on scale blocks that are not whole
// I2_S groups (96, 100, 36, ...) and K not a whole number of groups: the
// padded layout (gemvLayout), against the references (int8 bit-exact,
// float32 within rounding) with every gemm family, the kernel named gemv;
// then the cache keeps one padded layout per block size, and a code 3 gives
// the panels' error.
func TestGEMVOddBlocks(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	rng := rand.New(rand.NewPCG(12, 12))
	for ci, c := range []struct{ n, c, o, h, w, bs int }{
		{1, 192, 7, 1, 1, 96}, {3, 288, 9, 1, 1, 96}, {1, 200, 5, 1, 1, 100}, {2, 300, 17, 1, 2, 100},
		{1, 100, 6, 1, 1, 0}, {5, 72, 3, 1, 1, 36}, {1, 130, 4, 1, 1, 130}, {2, 520, 11, 2, 2, 260},
		{20, 96, 5, 1, 1, 96}, {1, 1536, 33, 1, 1, 96}, {1, 250, 3, 1, 1, 50}, {3, 7, 4, 1, 1, 0},
	} {
		_ = par.SetThreads(1 + ci%2)
		tc := newCase(t, rng, pointwise(c.n, c.c, c.o, c.h, c.w), c.bs, ci%2 == 0)
		checkFamilies(t, tc, fmt.Sprintf("bs=%d", c.bs))
		for _, bits := range []int{0, 8} {
			out := make([]float32, tc.d.OutLen)
			info, err := Conv2DInfo(tc.d, tc.x, tc.w, tc.bias, out, Options{ActBits: bits, Algo: Pointwise})
			if err != nil || !strings.HasPrefix(info.Kernel, "gemv/") {
				t.Errorf("%v act%d: kernel %q, err %v; want gemv", tc, bits, info.Kernel, err)
			}
		}
	}
	// kept once, reused; a weight changed in place is laid out again
	layoutCache.Clear()
	tc := newCase(t, rng, pointwise(1, 300, 8, 1, 1), 100, false)
	out := make([]float32, tc.d.OutLen)
	for range 3 {
		if _, err := Conv2D(tc.d, tc.x, tc.w, nil, out, Options{ActBits: 8}); err != nil {
			t.Fatal(err)
		}
		checkExact(t, "cached", out, ref8(tc))
	}
	if n, _ := layoutCache.Len(); n != 1 {
		t.Errorf("%d layouts kept, want 1", n)
	}
	for i := range tc.q {
		tc.q[i] = -tc.q[i]
	}
	if err := ternary.Pack(tc.q, tc.w.Packed); err != nil {
		t.Fatal(err)
	}
	if _, err := Conv2D(tc.d, tc.x, tc.w, nil, out, Options{ActBits: 8}); err != nil {
		t.Fatal(err)
	}
	checkExact(t, "changed in place", out, ref8(tc))
	// a code 3: the panels' error
	for _, p := range []int{5*300 + 77, 1000} {
		w := withCode3(tc.w, p)
		for _, bits := range []int{0, 8} {
			_, err := Conv2D(tc.d, tc.x, w, nil, out, Options{ActBits: bits, Algo: Pointwise})
			if want := fmt.Sprintf("code 3 at element %d", p); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("act%d: err %v, want %q", bits, err, want)
			}
		}
	}
}

// pointwise is the shape of a 1x1 convolution: batch n, c -> o channels on
// h x w pixels.
func pointwise(n, c, o, h, w int) Shape {
	return Shape{N: n, C: c, H: h, W: w, O: o, WC: c, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
}

// checkFamilies runs tc's pointwise convolution with every gemm family,
// float32 (within rounding) and int8 (bit-exact) against the references.
func checkFamilies(t *testing.T, tc *testCase, what string) {
	t.Helper()
	want, mag := ref64(tc)
	want8 := ref8(tc)
	for _, ks := range gemm.Families() {
		w := fmt.Sprintf("%v %s/%s", tc, what, ks.Family)
		checkF32(t, w+" float", runKind(t, tc, Pointwise, false, ks), want, mag)
		checkExact(t, w+" int8", runKind(t, tc, Pointwise, true, ks), want8)
	}
}

// withCode3 is a copy of w with the invalid I2_S code 3 at element p.
func withCode3(w Weights, p int) Weights {
	w.Packed = append([]byte(nil), w.Packed...)
	w.Packed[p/128*32+p%32] |= 3 << (6 - 2*(p%128/32))
	return w
}

// TestGEMVWeightIDs: an I2_S weight with an ID runs its first int8 GEMV
// with the code-3 check and, found valid, the later ones without it (with
// scale blocks: in one call for every block where the family has it)
// (gemm.CodesValid; on a family with unchecked kernels a code 3 slipped in
// under the number then goes unseen), every call bit-exact with the
// reference; a weight
// with a code 3 is reported on every call and never marked valid; a TL1
// weight's ID is not taken for its I2_S conversion's.
func TestGEMVWeightIDs(t *testing.T) {
	keepThreads(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const base = 1 << 40 // numbers no other test gives
	// bs < c: blocks, whose later calls run the family's BlocksFunc (4x4
	// and 4x1 tiles, the last rows a block at a time; 20 samples: a second
	// block of columns; 96: blocks padded to whole groups)
	for i, c := range []struct{ n, c, o, bs int }{{1, 256, 9, 0}, {2, 384, 13, 128}, {1, 200, 6, 0}, {3, 512, 33, 512},
		{8, 256, 70, 128}, {5, 768, 9, 256}, {1, 512, 131, 128}, {20, 384, 9, 128}, {6, 384, 9, 96},
		{2, 70 * 128, 5, 128}} { // 70 blocks: two blocks calls (gemvMaxBlocks)
		tc := newCase(t, rng, pointwise(c.n, c.c, c.o, 1, 1), c.bs, i%2 == 0)
		want8 := ref8(tc)
		w := tc.w
		w.ID = base + uint64(i)
		for call := range 3 {
			out := make([]float32, tc.d.OutLen)
			info, err := Conv2DInfo(tc.d, tc.x, w, tc.bias, out, Options{ActBits: 8})
			if err != nil || !strings.HasPrefix(info.Kernel, "gemv/") {
				t.Fatalf("%v call %d: kernel %q, %v", tc, call, info.Kernel, err)
			}
			checkExact(t, fmt.Sprintf("%v call %d", tc, call), out, want8)
			if !gemm.CodesValid(w.ID) {
				t.Fatalf("%v call %d: the codes not recorded as valid", tc, call)
			}
		}
		// the later calls ran unchecked: other codes under the number (which
		// callers promise never to pass), with a code 3, go unreported
		// (read as they are: K and the scale blocks whole groups; padded
		// layouts unpack them)
		if c.c%128 == 0 && c.bs%128 == 0 && gemm.GemvOp.Get().Family == cpu.AVX512VNNI {
			broken := withCode3(w, c.c/2)
			if _, err := Conv2D(tc.d, tc.x, broken, tc.bias, make([]float32, tc.d.OutLen), Options{ActBits: 8}); err != nil {
				t.Errorf("%v: a weight recorded as valid was checked: %v", tc, err)
			}
		}
		bad := withCode3(tc.w, c.c/2)
		bad.ID = base + 100 + uint64(i)
		for call := range 2 {
			_, err := Conv2D(tc.d, tc.x, bad, tc.bias, make([]float32, tc.d.OutLen), Options{ActBits: 8})
			if want := fmt.Sprintf("code 3 at element %d", c.c/2); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v call %d: err %v, want %q", tc, call, err, want)
			}
			if gemm.CodesValid(bad.ID) {
				t.Errorf("%v call %d: codes with a code 3 recorded as valid", tc, call)
			}
		}
	}
	tc := newCase(t, rng, pointwise(1, 256, 8, 1, 1), 0, false)
	tl := tc.w
	tl.QType, tl.ID = ternary.TL1, base+200
	tl.Packed = make([]byte, mustLen(t, ternary.TL1, tc.d.WLen, tc.d.O))
	if err := ternary.PackQ(ternary.TL1, tc.q, tc.d.O, tl.Packed); err != nil {
		t.Fatal(err)
	}
	if _, err := Conv2D(tc.d, tc.x, tl, nil, make([]float32, tc.d.OutLen), Options{ActBits: 8}); err != nil {
		t.Fatal(err)
	}
	if gemm.CodesValid(tl.ID) {
		t.Error("a TL1 weight's ID recorded as valid I2_S codes")
	}
}

// TestGEMVFamilies runs the int8 GEMV path with every family of the op
// linear_gemv, not only the one dispatched: one scale for the tensor, one
// a channel and blocks, on 1 to 20 samples (one and two blocks of
// columns), with the codes checked and known valid (BlocksFunc's own
// tiles, avx2's I8Valid and transposition for one block), each result bit
// for bit the reference's.
func TestGEMVFamilies(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const base = 1 << 39 // numbers no other test gives
	id := uint64(base)
	for _, c := range []struct{ n, c, o, bs int }{{2, 256, 9, 0}, {4, 384, 13, 384}, {17, 256, 21, 0}, {20, 512, 7, 512},
		{1, 256, 10, 0}, {3, 512, 11, 128}, {5, 384, 6, 96}} {
		tc := newCase(t, rng, pointwise(c.n, c.c, c.o, 1, 1), c.bs, c.n%2 == 0)
		want := ref8(tc)
		for _, g := range gemm.GemvFamilies() {
			for _, valid := range []bool{false, true} {
				w := tc.w
				id++
				w.ID = id
				if valid {
					gemm.MarkCodesValid(id)
				}
				sc, err := newScaler(&tc.d, w, tc.bias)
				if err != nil {
					t.Fatal(err)
				}
				k := selected()
				k.gemv = g
				acts := actScales(&tc.d, tc.x, k.scan, nil)
				acts.quantize(&tc.d, tc.x, k.gemm.QuantI8)
				out := make([]float32, tc.d.OutLen)
				ran, err := run(Pointwise, &tc.d, tc.x, acts, w, sc, out, k, unknownMax)
				acts.release()
				if err != nil || !strings.HasPrefix(ran, "gemv/") {
					t.Fatalf("%v %s valid=%v: ran %q, %v", tc, g.Family, valid, ran, err)
				}
				checkExact(t, fmt.Sprintf("%v %s valid=%v", tc, g.Family, valid), out, want)
			}
		}
	}
}
