package conv2d

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// TestImplicitAgrees runs the implicit-GEMM driver with the generic kernel
// and with every conv_i8 family's (where it has one) on random shapes (groups,
// strides, dilations, uneven padding, channel counts off the quad, pixel
// counts off the tile, 1 to 3 threads; every third case with the output
// written by streaming stores) and checks it bit for bit against the int8
// reference, whatever the planner would choose.
func TestImplicitAgrees(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	rng := rand.New(rand.NewPCG(11, 11))
	generic := implicitOf(gemm.ConvI8Families()[0])
	generic.gemm = gemm.ImplicitGeneric()
	genericPair := generic
	genericPair.pair = gemm.ImplicitPairGeneric()
	kernels := map[string]implicitKernels{"generic": generic, "generic pairs": genericPair}
	for _, i8 := range gemm.ConvI8Families() {
		if i8.Implicit != nil {
			k := implicitOf(i8)
			kernels[fmt.Sprint(i8.Family)] = k
			if k.pair != nil { // the single-block kernel on every block too
				k.pair = nil
				kernels[fmt.Sprint(i8.Family)+" single"] = k
			}
		}
	}
	oldStream := streamOutBytes
	defer func() { streamOutBytes = oldStream }()
	for ci := range 60 {
		_ = par.SetThreads(1 + ci%3)
		streamOutBytes = oldStream
		if ci%3 == 1 {
			streamOutBytes = 0
		}
		s := randShape(rng)
		if ci%4 == 0 { // many channels: quads past a flush, several blocks
			s.C, s.WC, s.O = 70*s.Groups, 70, s.Groups*(17+rng.IntN(20))
		}
		d, err := s.Check()
		if err != nil || d.Depthwise() {
			continue
		}
		bs := 0
		if rng.IntN(2) == 0 {
			bs = d.K // one scale per output channel
		}
		tc := newCase(t, rng, s, bs, rng.IntN(2) == 0)
		want := ref8(tc)
		sc, err := newScaler(&tc.d, tc.w, tc.bias)
		if err != nil {
			t.Fatal(err)
		}
		wl, err := implicitWeights(&tc.d, tc.w, newImplicitGeom(&tc.d), gemm.KernelOp.Get())
		if err != nil {
			t.Fatal(err)
		}
		for name, k := range kernels {
			acts := actScales(&tc.d, tc.x, ternary.QuantizeOp.Get(), nil)
			out := make([]float32, d.OutLen)
			implicitConv(&tc.d, wl, tc.x, acts, sc, out, k)
			acts.release()
			checkExact(t, fmt.Sprintf("case %d %v implicit/%s", ci, tc, name), out, want)
		}
	}
}

// TestImplicitRowsMode runs layers of 1 to 3 channels in rows mode (a
// pixel's C bytes, a kernel row read as whole quads; implicitRowsMode) on
// every conv_i8 family with an implicit kernel and the generic oracles, 1 to
// 3 threads, and checks them bit for bit against the int8 reference: an RGB
// stem (7x7/2, padding 3), no right padding (the 4-byte pixel stores spill
// into the slack pixels), one channel, dilated rows, several samples.
func TestImplicitRowsMode(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	rng := rand.New(rand.NewPCG(15, 15))
	gen := implicitOf(gemm.ConvI8Families()[0])
	gen.gemm, gen.pair = gemm.ImplicitGeneric(), gemm.ImplicitPairGeneric()
	kernels := map[string]implicitKernels{"generic": gen}
	for _, i8 := range gemm.ConvI8Families() {
		if i8.Implicit != nil {
			kernels[fmt.Sprint(i8.Family)] = implicitOf(i8)
		}
	}
	sh := func(n, c, h, w, o, k, s, pt, pl, pb, pr, dh int) Shape {
		return Shape{N: n, C: c, H: h, W: w, O: o, WC: c, KH: k, KW: k, Groups: 1, StrideH: s, StrideW: s,
			PadT: pt, PadL: pl, PadB: pb, PadR: pr, DilH: dh, DilW: 1}
	}
	for ci, s := range []Shape{
		sh(2, 3, 23, 27, 20, 7, 2, 3, 3, 3, 3, 1),
		sh(1, 3, 9, 13, 33, 5, 1, 0, 0, 0, 0, 1),
		sh(1, 1, 12, 17, 16, 3, 1, 1, 0, 1, 0, 1),
		sh(3, 2, 11, 10, 7, 4, 2, 1, 2, 0, 0, 2),
		sh(1, 3, 5, 40, 48, 7, 3, 0, 1, 2, 0, 1),
		sh(2, 1, 8, 8, 5, 2, 1, 0, 0, 0, 0, 1),
	} {
		d, err := s.Check()
		if err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		g := newImplicitGeom(&d)
		if g.rowQuads == 0 || g.cp != d.C {
			t.Fatalf("case %d: not in rows mode: %+v", ci, g)
		}
		tc := newCase(t, rng, s, 0, ci%2 == 0)
		want := ref8(tc)
		sc, err := newScaler(&tc.d, tc.w, tc.bias)
		if err != nil {
			t.Fatal(err)
		}
		wl, err := implicitWeights(&tc.d, tc.w, g, gemm.KernelOp.Get())
		if err != nil {
			t.Fatal(err)
		}
		for name, k := range kernels {
			for th := 1; th <= 3; th++ {
				_ = par.SetThreads(th)
				acts := actScales(&tc.d, tc.x, ternary.QuantizeOp.Get(), nil)
				out := make([]float32, d.OutLen)
				implicitConv(&tc.d, wl, tc.x, acts, sc, out, k)
				acts.release()
				checkExact(t, fmt.Sprintf("case %d %v rows/%s thr %d", ci, tc, name, th), out, want)
			}
		}
		out := make([]float32, d.OutLen) // and as the planner runs it (a 1-channel layer: depthwise)
		if _, err := Conv2D(d, tc.x, tc.w, tc.bias, out, Options{ActBits: 8}); err != nil {
			t.Fatal(err)
		}
		checkExact(t, fmt.Sprintf("case %d %v Conv2D", ci, tc), out, want)
	}
	// The same codes at the same address as a 4x5 and as a 5x4 kernel:
	// two rows-mode layouts, which the weight cache must keep apart.
	s45 := Shape{N: 1, C: 3, H: 9, W: 11, O: 6, WC: 3, KH: 4, KW: 5, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	tc := newCase(t, rng, s45, 0, false)
	s54 := s45
	s54.KH, s54.KW = 5, 4
	d54, err := s54.Check()
	if err != nil {
		t.Fatal(err)
	}
	tc54 := &testCase{d: d54, x: tc.x, q: tc.q, w: tc.w}
	for range 2 {
		for _, c := range []*testCase{tc, tc54} {
			out := make([]float32, c.d.OutLen)
			if _, err := Conv2D(c.d, c.x, c.w, nil, out, Options{ActBits: 8}); err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			checkExact(t, fmt.Sprintf("%v, codes shared with a %dx%d kernel", c, c.d.KW, c.d.KH), out, ref8(c))
		}
	}
}

// TestScalesWriteLayoutInChunks checks actScales writing the implicit
// layout by chunks of samples (passChunk lowered to one sample and to two)
// against the scales taken alone and layoutU8 after them: the same scales,
// first bad index and layout bytes; and whole int8 convolutions so
// planned against the reference.
func TestScalesWriteLayoutInChunks(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	old := passChunk
	t.Cleanup(func() { passChunk = old })
	rng := rand.New(rand.NewPCG(13, 13))
	scan := ternary.QuantizeOp.Get()
	for ci := range 40 {
		_ = par.SetThreads(1 + ci%3)
		s := randShape(rng)
		s.N = 1 + rng.IntN(5)
		d, err := s.Check()
		if err != nil || d.Depthwise() {
			continue
		}
		tc := newCase(t, rng, s, 0, rng.IntN(2) == 0)
		if ci%3 == 0 { // a NaN in a later sample (the first bad index must survive the chunks)
			tc.x[rng.IntN(d.XLen/d.N)+(d.N-1)*(d.XLen/d.N)] = float32(math.NaN())
		}
		g := newImplicitGeom(&d)
		k := implicitOf(gemm.ConvI8Op.Get())
		passChunk = old
		want := actScales(&d, tc.x, scan, nil)
		wantXp := append([]byte(nil), want.implicitLayout(&d, tc.x, g, k)...)
		for _, chunk := range []int{1, 2 * 4 * d.C * d.H * d.W, old} {
			passChunk = chunk
			stop := ci%2 == 0 // with a NaN: the layout is not written past it
			got := actScales(&d, tc.x, scan, &implicitLayoutOf{g, k, stop})
			what := fmt.Sprintf("case %d %v chunk %d stop %v", ci, tc, chunk, stop)
			if got.bad != want.bad || !slices.Equal(got.a, want.a) {
				t.Fatalf("%s: scales %v bad %d, want %v bad %d", what, got.a, got.bad, want.a, want.bad)
			}
			if stop && want.bad >= 0 {
				got.release()
				continue
			}
			if i := firstDiff(got.xp, wantXp); i >= 0 {
				t.Fatalf("%s: layout byte %d of %d is %#x, want %#x", what, i, len(wantXp), got.xp[i], wantXp[i])
			}
			got.release()
			if want.bad < 0 {
				out := make([]float32, d.OutLen)
				if _, err := Conv2D(d, tc.x, tc.w, tc.bias, out, Options{ActBits: 8}); err != nil {
					t.Fatal(err)
				}
				checkExact(t, what, out, ref8(tc))
			}
		}
		want.release()
	}
}

// firstDiff returns the first index where a and b differ (or where one
// ends), -1 where they are equal.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestLayoutU8 checks the implicit layout byte by byte, with the generic
// and the kernel set's quantizers, on shapes whose channel and width counts
// hit the 8-channel runs and the quads (whole or partial; rows narrower than
// 8 pixels too), with NaN among the values and stale bytes in the scratch
// buffer: the channels that complete a quad repeat its last one.
func TestLayoutU8(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	for _, s := range []Shape{
		{N: 2, C: 19, H: 3, W: 21, Groups: 1, PadT: 1, PadL: 2, PadB: 0, PadR: 3},
		{N: 1, C: 12, H: 2, W: 8, Groups: 3, PadT: 0, PadL: 0, PadB: 2, PadR: 1},
		{N: 1, C: 16, H: 5, W: 7, Groups: 2},
		{N: 2, C: 24, H: 2, W: 13, Groups: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1},
		{N: 1, C: 3, H: 4, W: 11, Groups: 1, PadT: 3, PadL: 3, PadB: 3, PadR: 3},
		{N: 2, C: 26, H: 2, W: 5, Groups: 2, PadL: 1},
	} {
		s.O, s.WC, s.KH, s.KW, s.StrideH, s.StrideW, s.DilH, s.DilW = s.Groups, s.C/s.Groups, 1, 1, 1, 1, 1, 1
		d, err := s.Check()
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, d.XLen)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			if rng.IntN(50) == 0 {
				x[i] = float32(math.NaN())
			}
		}
		a := []float32{37.5, 90}[:d.N]
		g := newImplicitGeom(&d)
		for _, i8 := range gemm.ConvI8Families() {
			k := implicitOf(i8)
			stale, sh := layoutScratch.Sized(d.N * g.per)
			for i := range stale {
				stale[i] = 0x5a
			}
			layoutScratch.Put(sh)
			xp, xh := layoutU8(&d, x, a, g, k)
			for n := range d.N {
				for hp := range g.hp {
					for wp := range g.wp {
						for gi := range d.Groups {
							for c := range g.cg4 {
								want := byte(actZero)
								h, w := hp-d.PadT, wp-d.PadL
								if h >= 0 && h < d.H && w >= 0 && w < d.W {
									cs := min(c, d.Cg-1)
									want = byte(gemm.Quant8(x[((n*d.C+gi*d.Cg+cs)*d.H+h)*d.W+w], a[n])) ^ actZero
								}
								at := n*g.per + (hp*g.wp+wp)*g.cp + gi*g.cg4 + c
								if xp[at] != want {
									t.Fatalf("%+v: sample %d pixel (%d, %d) group %d channel %d: %#x, want %#x",
										s, n, hp, wp, gi, c, xp[at], want)
								}
							}
						}
					}
				}
			}
			layoutScratch.Put(xh)
		}
	}
}

// TestConvI8Families runs whole int8 convolutions (Auto, conv2d) with each
// conv_i8 family on random shapes (groups, strides, dilations, uneven
// padding, channel counts off the quad, N up to 3, per-tensor and
// per-channel scales, with and without bias, 1 to 3 threads) and checks
// each bit for bit against the int8 reference and against the generic
// family, which leaves them to conv_gemm's im2col path: the implicit GEMM
// must run (Info.Kernel) wherever the planner gives it the shape.
func TestConvI8Families(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	rng := rand.New(rand.NewPCG(15, 15))
	fams := gemm.ConvI8Families()
	ran := map[string]int{}
	for ci := range 80 {
		_ = par.SetThreads(1 + ci%3)
		s := randShape(rng)
		s.N = 1 + ci%3
		if ci%5 == 0 { // many channels: several weight blocks, K past 64 quads
			s.C, s.WC, s.O = 70*s.Groups, 70, s.Groups*(17+rng.IntN(20))
		}
		d, err := s.Check()
		if err != nil {
			continue
		}
		bs := 0
		if rng.IntN(2) == 0 {
			bs = d.K // one scale per output channel
		}
		tc := newCase(t, rng, s, bs, rng.IntN(2) == 0)
		want := ref8(tc)
		var generic []float32
		for _, i8 := range fams {
			ks := selected()
			ks.i8 = i8
			out := make([]float32, d.OutLen)
			info, err := conv2d(&d, tc.x, tc.w, tc.bias, out, Options{ActBits: 8}, ks)
			if err != nil {
				t.Fatalf("case %d %+v %s: %v", ci, s, i8.Family, err)
			}
			what := fmt.Sprintf("case %d %+v conv_i8 %s ran %s", ci, s, i8.Family, info.Kernel)
			checkExact(t, what, out, want)
			if generic == nil {
				generic = out
			} else {
				checkExact(t, what+" vs generic", out, generic)
			}
			if info.Kernel == kernelName("implicit_gemm", i8.Family) {
				ran[string(i8.Family)]++
			}
		}
	}
	for _, i8 := range fams[1:] {
		if ran[string(i8.Family)] < 10 {
			t.Errorf("conv_i8 %s ran its implicit GEMM on %d shapes, want 10 or more", i8.Family, ran[string(i8.Family)])
		}
	}
}
