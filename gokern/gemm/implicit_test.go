package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// TestImplicitSegs: runs that continue one another merge, flushes come at
// least every ImplicitMaxQuads quads and on the last segment.
func TestImplicitSegs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taps  []int
		quads int
		want  []int32
	}{
		{"one tap", []int{0}, 5, []int32{0, 5, 1}},
		{"contiguous taps merge", []int{0, 20, 40}, 5, []int32{0, 15, 1}},
		{"gaps split", []int{0, 100, 120}, 5, []int32{0, 5, 0, 100, 10, 1}},
		{"flush at 64 inside a run", []int{0, 64, 128}, 16, []int32{0, 48, 1}},
		{"flush splits a tap", []int{0, 1000}, 40, []int32{0, 40, 0, 1000, 24, 1, 1096, 16, 1}},
		{"long tap", []int{8}, 130, []int32{8, 64, 1, 264, 64, 1, 520, 2, 1}},
		{"flush then contiguous", []int{0, 256}, 64, []int32{0, 64, 1, 256, 64, 1}},
	} {
		if got := ImplicitSegs(tc.taps, tc.quads); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ImplicitSegs(%v, %d) = %v, want %v", tc.name, tc.taps, tc.quads, got, tc.want)
		}
	}
}

// TestPackImplicit packs random weights of odd sizes through PackA and
// PackImplicit and checks every byte and correction against the values.
func TestPackImplicit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct{ og, cg, taps int }{
		{1, 1, 1}, {4, 4, 9}, {16, 64, 9}, {13, 7, 3}, {40, 5, 1}, {33, 130, 2}, {16, 3, 49},
	} {
		k := tc.cg * tc.taps
		q := make([]int8, tc.og*k)
		for i := range q {
			q[i] = int8(rng.IntN(3) - 1)
		}
		packed := make([]byte, ternary.PackedLen(len(q)))
		if err := ternary.Pack(q, packed); err != nil {
			t.Fatal(err)
		}
		apan := make([]byte, ALen(tc.og, 1, k))
		if err := KernelOp.Get().PackA(apan, packed, tc.og, 1, k); err != nil {
			t.Fatal(err)
		}
		quads := (tc.cg + 3) / 4
		for ob := range (tc.og + ImplicitOC - 1) / ImplicitOC {
			dst := make([]int8, ImplicitBlockLen(tc.taps, quads)+1)[1:]
			var corr [ImplicitOC]int32
			PackImplicit(dst, &corr, apan, tc.cg, tc.taps, ob)
			for o := range ImplicitOC {
				row := ob*ImplicitOC + o
				sum := 0
				for tap := range tc.taps {
					for c := range 4 * quads {
						var want int8
						if row < tc.og && c < tc.cg {
							want = q[row*k+c*tc.taps+tap]
						}
						if got := dst[(tap*quads+c/4)*64+4*o+c%4]; got != want {
							t.Fatalf("%+v: block %d, channel %d, tap %d, input %d: %d, want %d", tc, ob, o, tap, c, got, want)
						}
						sum += int(want)
					}
				}
				if corr[o] != int32(128*sum) {
					t.Fatalf("%+v: block %d, channel %d: corr %d, want %d", tc, ob, o, corr[o], 128*sum)
				}
			}
		}
	}
}

// TestImplicitMatchesGeneric checks every family's implicit kernel against
// the generic one, and the generic one against plain sums, on random
// segments, pixel offsets and tile counts, and on the extremes of the int16
// partial sums (every activation 255 or 0, every weight +1 or -1).
func TestImplicitMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, tc := range []struct {
		name        string
		taps, quads int
		tiles       int
		fill        int // 0 random, 1 all 255 and w +1, 2 all 255 and w -1
	}{
		{"1 quad", 1, 1, 1, 0}, {"3x3 c16", 9, 4, 2, 0}, {"3x3 c64", 9, 16, 3, 0},
		{"c512 1x1", 1, 128, 1, 0}, {"stem", 49, 1, 4, 0}, {"odd", 5, 67, 5, 0},
		{"max +", 3, 100, 1, 1}, {"max -", 3, 100, 1, 2}, {"17 tiles", 9, 4, 17, 0},
	} {
		stride := 4*tc.quads + 4*rng.IntN(3) // gaps between taps (or none)
		taps := make([]int, tc.taps)
		for i := range taps {
			taps[i] = i * stride
		}
		segs := ImplicitSegs(taps, tc.quads)
		span := (tc.taps-1)*stride + 4*tc.quads
		x := make([]byte, span+64+1)[1:]
		w := make([]int8, ImplicitBlockLen(tc.taps, tc.quads)+3)[3:]
		for i := range x {
			switch tc.fill {
			case 0:
				x[i] = byte(rng.IntN(256))
			default:
				x[i] = 255
			}
		}
		for i := range w {
			switch tc.fill {
			case 0:
				w[i] = int8(rng.IntN(3) - 1)
			case 1:
				w[i] = 1
			case 2:
				w[i] = -1
			}
		}
		px := make([]int, tc.tiles*ImplicitPix)
		for i := range px {
			px[i] = rng.IntN(65)
		}
		want := make([]int32, ImplicitOC*len(px))
		for i, p := range px {
			wq := 0
			for _, off := range taps {
				for q := range tc.quads {
					for o := range ImplicitOC {
						for c := range 4 {
							want[i*ImplicitOC+o] += int32(w[(wq+q)*64+4*o+c]) * int32(x[p+off+4*q+c])
						}
					}
				}
				wq += tc.quads
			}
		}
		got := stale(len(want) + 5) // a longer t: nothing past the tiles is written
		implicitI8Generic(w, x, px, segs, got)
		if i := firstDiff(got[:len(want)], want); i >= 0 {
			t.Fatalf("%s: generic [%d] = %d, want %d", tc.name, i, got[i], want[i])
		}
		// The pair kernels: w's block and a second one (random, or the
		// negated first for the extreme fills), its sums from the generic
		// kernel, which the first block's formula check has vouched for.
		blen := ImplicitBlockLen(tc.taps, tc.quads)
		w2 := make([]int8, 2*blen+5)[5:]
		copy(w2, w[:blen])
		for i := range blen {
			w2[blen+i] = -w[i]
			if tc.fill == 0 {
				w2[blen+i] = int8(rng.IntN(3) - 1)
			}
		}
		want1 := make([]int32, len(want))
		implicitI8Generic(w2[blen:], x, px, segs, want1)
		got0, got1 := make([]int32, len(want)), make([]int32, len(want))
		implicitI8PairGeneric(w2, blen, x, px, segs, got0, got1)
		if i := firstDiff(got0, want); i >= 0 {
			t.Fatalf("%s: generic pair, block 0 [%d] = %d, want %d", tc.name, i, got0[i], want[i])
		}
		if i := firstDiff(got1, want1); i >= 0 {
			t.Fatalf("%s: generic pair, block 1 [%d] = %d, want %d", tc.name, i, got1[i], want1[i])
		}
		for _, ks := range ConvI8Families() {
			if ks.Implicit != nil {
				got := stale(len(want) + 5)
				ks.Implicit(w, x, px, segs, got)
				if i := firstDiff(got[:len(want)], want); i >= 0 {
					t.Fatalf("%s: %s [%d] = %d, want %d", tc.name, ks.Family, i, got[i], want[i])
				}
				if i := firstDiff(got[len(want):], stale(len(want) + 5)[len(want):]); i >= 0 {
					t.Fatalf("%s: %s wrote past the tiles", tc.name, ks.Family)
				}
			}
			if ks.ImplicitPair != nil {
				got0, got1 := stale(len(want)), stale(len(want))
				ks.ImplicitPair(w2, blen, x, px, segs, got0, got1)
				if i := firstDiff(got0, want); i >= 0 {
					t.Fatalf("%s: %s pair, block 0 [%d] = %d, want %d", tc.name, ks.Family, i, got0[i], want[i])
				}
				if i := firstDiff(got1, want1); i >= 0 {
					t.Fatalf("%s: %s pair, block 1 [%d] = %d, want %d", tc.name, ks.Family, i, got1[i], want1[i])
				}
			}
		}
	}
}

// TestImplicitBadArgsPanic: the wrappers refuse reads outside x and
// malformed segments.
func TestImplicitBadArgsPanic(t *testing.T) {
	segs := ImplicitSegs([]int{0}, 2)
	w := make([]int8, ImplicitBlockLen(1, 2))
	x := make([]byte, 16)
	tt := make([]int32, ImplicitPix*ImplicitOC)
	tile := func(last int) []int { // a tile of pixels at 0 but the last
		px := make([]int, ImplicitPix)
		px[ImplicitPix-1] = last
		return px
	}
	kernels := []ImplicitI8{implicitI8Generic}
	pairs := []ImplicitI8Pair{implicitI8PairGeneric}
	for _, ks := range ConvI8Families() {
		if ks.Implicit != nil {
			kernels = append(kernels, ks.Implicit)
		}
		if ks.ImplicitPair != nil {
			pairs = append(pairs, ks.ImplicitPair)
		}
	}
	for _, tc := range []struct {
		name string
		px   []int
		segs []int32
		w    []int8
	}{
		{"pixel past the end", tile(9), segs, w},
		{"negative pixel", tile(-1), segs, w},
		{"pixels not in whole tiles", tile(0)[1:], segs, w},
		{"no flush at the end", tile(0), []int32{0, 2, 0}, w},
		{"flush too rare", tile(0), []int32{0, 65, 1}, make([]int8, ImplicitBlockLen(1, 65))},
		{"weights short", tile(0), segs, w[:100]},
		{"two tiles, sums for one", append(tile(0), tile(0)...), segs, w},
	} {
		for _, k := range kernels {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: no panic", tc.name)
					}
				}()
				k(tc.w, x, tc.px, tc.segs, tt)
			}()
		}
		// the pair kernels on two copies of the case's block
		w2 := append(append([]int8(nil), tc.w...), tc.w...)
		for _, k := range pairs {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: pair: no panic", tc.name)
					}
				}()
				k(w2, len(tc.w), x, tc.px, tc.segs, tt, tt)
			}()
		}
	}
	// pair arguments of their own: blen 0, weights for one block, sums for
	// one block in either output
	okPx := tile(0)
	w2 := append(append([]int8(nil), w...), w...)
	for _, tc := range []struct {
		name   string
		w      []int8
		blen   int
		t0, t1 []int32
	}{
		{"blen 0", w2, 0, tt, tt}, {"one block of weights", w, len(w), tt, tt},
		{"block 0 short", w2, len(w), tt[1:], tt}, {"block 1 short", w2, len(w), tt, tt[1:]},
	} {
		for _, k := range pairs {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("pair %s: no panic", tc.name)
					}
				}()
				k(tc.w, tc.blen, x, okPx, segs, tc.t0, tc.t1)
			}()
		}
	}
}

// TestQuantU8BadArgsPanic: the quantizers refuse writes or reads outside
// their slices and channel counts out of range.
func TestQuantU8BadArgsPanic(t *testing.T) {
	src := make([]float32, 7*10+10)
	dst := make([]byte, 9*12+8)
	src16 := make([]float32, 15*10+10)
	dst16 := make([]byte, 9*20+16)
	for _, tc := range []struct {
		name          string
		dst           []byte
		src           []float32
		hw, w, cp, nc int
	}{
		{"dst short", dst[:9*12+7], src, 10, 10, 12, 8},
		{"src short", dst, src[:7*10+9], 10, 10, 12, 8},
		{"row past its plane", dst, src, 9, 10, 12, 8},
		{"pixels overlap", dst, src, 10, 10, 7, 8},
		{"no pixels", dst, src, 10, 0, 12, 8},
		{"no channels", dst, src, 10, 10, 12, 0},
		{"five channels", dst, src, 10, 10, 12, 5},
		{"16: dst short", dst16[:9*20+15], src16, 10, 10, 20, 16},
		{"16: src short", dst16, src16[:15*10+9], 10, 10, 20, 16},
		{"16: pixels overlap", dst16, src16, 10, 10, 15, 16},
		{"16: row past its plane", dst16, src16, 9, 10, 20, 16},
	} {
		for _, ks := range ConvI8Families() {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: %s: no panic", ks.Family, tc.name)
					}
				}()
				switch tc.nc {
				case 16:
					ks.QuantU8x16(tc.dst, tc.src, tc.hw, tc.w, tc.cp, 1)
				case 8:
					ks.QuantU8x8(tc.dst, tc.src, tc.hw, tc.w, tc.cp, 1)
				default:
					ks.QuantU8x4(tc.dst, tc.src, tc.hw, tc.w, tc.cp, tc.nc, 1)
				}
			}()
		}
	}
}

// BenchmarkImplicit times every family's implicit kernel on 16 tiles of a
// 3x3 convolution over 64 and over 512 channels (one thread); GMAC/s counts
// the multiply-adds of the tiles.
func BenchmarkImplicit(b *testing.B) {
	for _, ks := range ConvI8Families() {
		if ks.Implicit != nil {
			benchImplicit(b, ks)
		}
	}
}

func benchImplicit(b *testing.B, ks *ConvI8) {
	for _, c := range []int{64, 512} {
		quads, wp := c/4, 58
		taps := make([]int, 0, 9)
		for i := range 3 {
			for j := range 3 {
				taps = append(taps, (i*wp+j)*c)
			}
		}
		segs := ImplicitSegs(taps, quads)
		x := make([]byte, 20*wp*c)
		w := make([]int8, ImplicitBlockLen(9, quads))
		px := make([]int, 16*ImplicitPix)
		for i := range px {
			px[i] = i * c
		}
		t := make([]int32, ImplicitOC*len(px))
		b.Run(fmt.Sprintf("3x3_c%d/%s", c, ks.Family), func(b *testing.B) {
			for b.Loop() {
				ks.Implicit(w, x, px, segs, t)
			}
			b.ReportMetric(float64(len(px)*ImplicitOC*9*c)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
		if ks.ImplicitPair == nil {
			continue
		}
		w2 := make([]int8, 2*len(w))
		t1 := make([]int32, len(t))
		b.Run(fmt.Sprintf("3x3_c%d/%s/pair", c, ks.Family), func(b *testing.B) {
			for b.Loop() {
				ks.ImplicitPair(w2, len(w), x, px, segs, t, t1)
			}
			b.ReportMetric(float64(2*len(px)*ImplicitOC*9*c)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

// stale returns n int32 of garbage: what a kernel writes must not be read
// before it is written, and what it does not write must stay as it was.
func stale(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(i*2654435761) ^ 0x5a5a5a5a
	}
	return s
}

// TestFoldTiles checks every family's FoldTiles against the generic one,
// and the generic one against FoldI32's arithmetic on each channel's row
// (the fold the implicit path had before its tiles were folded directly),
// bit for bit: random sums (wrapping with the corrections), scales of both
// signs and a zero, pixel counts around the 8-pixel blocks and the 96-pixel
// passes, partial blocks of channels, row strides, bias or none, and
// streaming stores at every alignment of dst (head pixels before the
// 32-byte boundary), with a stale buffer. What lies around the rows must
// stay as it was.
func TestFoldTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, tc := range []struct {
		name   string
		ns     []int
		noc    int
		extra  int // ldd - n
		bias   bool
		stream bool
		offs   []int // dst offsets in floats (alignments)
	}{
		{"full", []int{1, 7, 8, 9, 16, 24, 31, 96}, 16, 0, false, false, []int{0, 1}},
		{"full, wider stride", []int{8, 15, 96}, 16, 2, false, false, []int{0, 3}},
		{"full bias", []int{8, 13, 96}, 16, 3, true, false, []int{0, 5}},
		{"partial channels", []int{1, 8, 50, 96, 97, 200}, 5, 2, true, false, []int{0}},
		{"one channel", []int{8, 17}, 1, 0, false, false, []int{0}},
		{"15 channels", []int{16, 96}, 15, 1, true, false, []int{3}},
		{"stream aligned rows", []int{8, 23, 96}, 16, 8, true, true, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"stream unaligned stride", []int{8, 96}, 16, 1, false, true, []int{0, 3}},
		{"stream partial channels", []int{9, 96, 100}, 11, 5, true, true, []int{0, 2}},
	} {
		for _, n := range tc.ns {
			for _, off := range tc.offs {
				tiles := make([]int32, ImplicitOC*n+3)
				for i := range tiles {
					tiles[i] = int32(rng.Uint32())
					if i%3 == 0 {
						tiles[i] = int32(rng.IntN(1<<16) - 1<<15)
					}
				}
				var corr [ImplicitOC]int32
				var sc, bias [ImplicitOC]float32
				for o := range ImplicitOC {
					corr[o] = int32(rng.IntN(1<<20) - 1<<19)
					sc[o] = float32(rng.NormFloat64())
					bias[o] = float32(rng.NormFloat64())
				}
				sc[2] = 0 // a zero scale: signed zeros
				a := float32(rng.Float64()*100 + 0.01)
				var pb *[ImplicitOC]float32
				if tc.bias {
					pb = &bias
				}
				ldd := n + tc.extra
				size := (tc.noc-1)*ldd + n
				// want: each channel's row through the generic FoldI32
				want := make([]float32, off+size+16)
				for i := range want {
					want[i] = float32(i) + 0.5 // the surroundings, unchanged
				}
				init := append([]float32(nil), want...)
				for o := range tc.noc {
					row := make([]int32, n)
					for i := range row {
						row[i] = tiles[i*ImplicitOC+o] - corr[o]
					}
					foldI32Generic(want[off+o*ldd:][:n], row, a, sc[o], bias[o], false, tc.bias)
				}
				kernels := []FoldTiles{foldTilesGeneric}
				names := []string{"generic"}
				for _, ks := range ConvI8Families() {
					kernels = append(kernels, ks.FoldTiles)
					names = append(names, string(ks.Family))
				}
				for ki, k := range kernels {
					// a 64-byte aligned buffer, so that off sets the alignment
					raw := make([]float32, len(want)+16)
					base := int(-uintptr(unsafe.Pointer(&raw[0])) % 64 / 4)
					got := raw[base:][:len(want)]
					copy(got, init)
					k(got[off:][:size], ldd, tiles, n, tc.noc, &corr, a, &sc, pb, tc.stream, stale(FoldTilesScratch))
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s n=%d off=%d: %s [%d] = %v, want %v", tc.name, n, off, names[ki], i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestFoldTilesBadArgsPanic: the folds refuse rows past dst, tiles short of
// n pixels, strides below n, channel counts out of range and a short
// buffer.
func TestFoldTilesBadArgsPanic(t *testing.T) {
	var corr [ImplicitOC]int32
	var sc [ImplicitOC]float32
	tiles := make([]int32, ImplicitOC*8)
	buf := make([]int32, FoldTilesScratch)
	for _, tc := range []struct {
		name        string
		dst         int
		ldd, n, noc int
		tiles       []int32
		buf         []int32
	}{
		{"dst short", 15*8 + 7, 8, 8, 16, tiles, buf},
		{"tiles short", 15*8 + 8, 8, 8, 16, tiles[1:], buf},
		{"stride below n", 15*8 + 8, 7, 8, 16, tiles, buf},
		{"no pixels", 100, 8, 0, 16, tiles, buf},
		{"no channels", 100, 8, 8, 0, tiles, buf},
		{"17 channels", 1000, 8, 8, 17, tiles, buf},
		{"stride wraps", 100, math.MaxInt/2 + 1, 8, 16, tiles, buf},
		{"buffer short", 15*8 + 8, 8, 8, 16, tiles, buf[1:]},
	} {
		kernels := []FoldTiles{foldTilesGeneric}
		for _, ks := range ConvI8Families() {
			kernels = append(kernels, ks.FoldTiles)
		}
		for _, k := range kernels {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: no panic", tc.name)
					}
				}()
				k(make([]float32, tc.dst), tc.ldd, tc.tiles, tc.n, tc.noc, &corr, 1, &sc, nil, false, tc.buf)
			}()
		}
	}
}
