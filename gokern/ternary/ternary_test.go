package ternary

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// refQuantize is the plain scalar statement of DESIGN.md's formulas, written
// independently of the kernels: one block at a time, math.RoundToEven.
func refQuantize(x []float32, blockSize int, m Method) ([]int8, []float32) {
	n := len(x)
	bs := blockSize
	if bs == 0 || bs > n {
		bs = n
	}
	q := make([]int8, n)
	var scales []float32
	for s := 0; s < n; s += bs {
		blk := x[s:min(s+bs, n)]
		var sc float32
		if m == AbsMean {
			var sum float64
			for _, v := range blk {
				sum += math.Abs(float64(v))
			}
			sc = float32(math.Max(float64(float32(sum/float64(len(blk)))), float64(float32(1e-5))))
		} else {
			var mx float32
			for _, v := range blk {
				mx = float32(math.Max(float64(mx), math.Abs(float64(v))))
			}
			sc = float32(math.Max(float64(mx), float64(float32(1e-8))))
		}
		scales = append(scales, sc)
		for i, v := range blk {
			r := v / sc
			var t float64
			if m == AbsMean {
				t = math.Max(-1, math.Min(1, math.RoundToEven(float64(r))))
			} else if r > 0.5 {
				t = 1
			} else if r < -0.5 {
				t = -1
			}
			q[s+i] = int8(t)
		}
	}
	return q, scales
}

// refPack packs group by group with the layout formula of DESIGN.md.
func refPack(q []int8) []byte {
	out := make([]byte, 0, PackedLen(len(q)))
	for g := 0; g < len(q); g += 128 {
		var grp [32]byte
		for j := 0; j < 128; j++ {
			code := byte(1)
			if g+j < len(q) {
				code = byte(q[g+j] + 1)
			}
			grp[j%32] |= code << (6 - 2*(j/32))
		}
		out = append(out, grp[:]...)
	}
	return out
}

func randTensor(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func quantize(t *testing.T, x []float32, bs int, m Method) ([]byte, []float32) {
	t.Helper()
	packed := make([]byte, PackedLen(len(x)))
	scales := make([]float32, NumBlocks(len(x), bs))
	if err := Quantize(x, bs, m, true, packed, scales); err != nil {
		t.Fatalf("Quantize(n=%d, bs=%d, %v): %v", len(x), bs, m, err)
	}
	return packed, scales
}

func TestQuantizeMatchesReference(t *testing.T) {
	old := par.Threads()
	defer par.SetThreads(old)
	sizes := []int{1, 2, 31, 32, 33, 127, 128, 129, 255, 1000, 4095, 4096, 70001}
	blocks := []int{0, 1, 3, 32, 64, 96, 100, 128, 256, 1000, 5000}
	r := rand.New(rand.NewPCG(1, 2))
	for _, threads := range []int{1, 3} {
		par.SetThreads(threads)
		for _, n := range sizes {
			for _, bs := range blocks {
				for _, m := range []Method{AbsMean, AbsMax} {
					t.Run(fmt.Sprintf("t%d/n%d/bs%d/%v", threads, n, bs, m), func(t *testing.T) {
						x := randTensor(r, n)
						packed, scales := quantize(t, x, bs, m)
						wantQ, wantS := refQuantize(x, bs, m)
						for i := range wantS {
							if math.Float32bits(scales[i]) != math.Float32bits(wantS[i]) {
								t.Fatalf("scale %d = %v, want %v", i, scales[i], wantS[i])
							}
						}
						wantP := refPack(wantQ)
						for i := range wantP {
							if packed[i] != wantP[i] {
								t.Fatalf("packed byte %d = %#x, want %#x", i, packed[i], wantP[i])
							}
						}
						got := make([]int8, n)
						if err := Unpack(packed, got); err != nil {
							t.Fatal(err)
						}
						for i := range got {
							if got[i] != wantQ[i] {
								t.Fatalf("value %d = %d, want %d", i, got[i], wantQ[i])
							}
						}
					})
				}
			}
		}
	}
}

func TestQuantizeEdgeValues(t *testing.T) {
	tests := []struct {
		name string
		x    []float32
		bs   int
		m    Method
		q    []int8
		s    []float32
	}{
		{"all zero absmean", []float32{0, 0, 0}, 0, AbsMean, []int8{0, 0, 0}, []float32{1e-5}},
		{"all zero absmax", []float32{0, 0}, 0, AbsMax, []int8{0, 0}, []float32{1e-8}},
		// absmax ties at exactly 0.5 stay 0; just above becomes ±1.
		{"absmax ties", []float32{2, 1, -1, 1.0000001, -1.0000001}, 0, AbsMax, []int8{1, 0, 0, 1, -1}, []float32{2}},
		// absmean: mean|x| = 1, so 0.5 -> 0 (half to even), 1.5 -> 2 -> clamped to 1.
		{"absmean half even", []float32{0.5, -0.5, 1.5, -1.5, 1, -1}, 0, AbsMean, []int8{0, 0, 1, -1, 1, -1}, []float32{1}},
		{"blocks", []float32{4, 0, 0, 1, 1, 1}, 3, AbsMax, []int8{1, 0, 0, 1, 1, 1}, []float32{4, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			packed, scales := quantize(t, tc.x, tc.bs, tc.m)
			got := make([]int8, len(tc.x))
			if err := Unpack(packed, got); err != nil {
				t.Fatal(err)
			}
			for i := range tc.q {
				if got[i] != tc.q[i] {
					t.Fatalf("values %v, want %v", got, tc.q)
				}
			}
			for i := range tc.s {
				if scales[i] != tc.s[i] {
					t.Fatalf("scales %v, want %v", scales, tc.s)
				}
			}
		})
	}
}

func TestPackUnpackRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 5, 127, 128, 129, 300, 1025} {
		q := make([]int8, n)
		for i := range q {
			q[i] = int8(r.IntN(3)) - 1
		}
		packed := make([]byte, PackedLen(n))
		if err := Pack(q, packed); err != nil {
			t.Fatal(err)
		}
		want := refPack(q)
		for i := range want {
			if packed[i] != want[i] {
				t.Fatalf("n=%d byte %d = %#x, want %#x", n, i, packed[i], want[i])
			}
		}
		back := make([]int8, n)
		if err := Unpack(packed, back); err != nil {
			t.Fatal(err)
		}
		for i := range q {
			if back[i] != q[i] {
				t.Fatalf("n=%d value %d: %d != %d", n, i, back[i], q[i])
			}
		}
	}
}

func TestDequantize(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ n, bs int }{{1, 0}, {129, 0}, {1000, 96}, {513, 512}} {
		x := randTensor(r, tc.n)
		packed, scales := quantize(t, x, tc.bs, AbsMean)
		q, _ := refQuantize(x, tc.bs, AbsMean)
		out := make([]float32, tc.n)
		if err := Dequantize(packed, tc.bs, scales, out); err != nil {
			t.Fatal(err)
		}
		bs := tc.bs
		if bs == 0 {
			bs = tc.n
		}
		for i := range out {
			if want := float32(q[i]) * scales[i/bs]; out[i] != want {
				t.Fatalf("n=%d bs=%d out[%d]=%v want %v", tc.n, tc.bs, i, out[i], want)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	x := []float32{1, 2, float32(math.NaN()), float32(math.Inf(1))}
	tests := []struct {
		name    string
		x       []float32
		bs      int
		m       Method
		packed  int
		scales  int
		wantSub string
	}{
		{"empty", nil, 0, AbsMean, 0, 1, "at least one element"},
		{"negative block", []float32{1}, -1, AbsMean, 32, 1, "block_size"},
		{"bad method", []float32{1}, 0, Method(7), 32, 1, "method"},
		{"short packed", []float32{1}, 0, AbsMean, 31, 1, "packed"},
		{"wrong scales", []float32{1, 2}, 1, AbsMean, 32, 1, "scales"},
		{"nan index", x, 0, AbsMean, 32, 1, "flat index 2"},
		{"nan index blocks", x, 1, AbsMax, 32, 4, "flat index 2"},
		{"inf index", x[3:], 0, AbsMax, 32, 1, "flat index 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Quantize(tc.x, tc.bs, tc.m, true, make([]byte, tc.packed), make([]float32, tc.scales))
			if err == nil || !strings.Contains(err.Error(), tc.wantSub) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantSub)
			}
		})
	}
	if err := Unpack([]byte{0xff}, make([]int8, 1)); err == nil {
		t.Fatal("short packed accepted by Unpack")
	}
	bad := bytes.Repeat([]byte{padByte}, 32) // code 1 everywhere: value 0 and valid padding
	bad[0] = 0xD5                            // code 3 at position 0 (top lane), padding code 1 below
	if err := Unpack(bad, make([]int8, 1)); err == nil || !strings.Contains(err.Error(), "code 3") {
		t.Fatalf("code 3: %v", err)
	}
	if err := Pack([]int8{2}, make([]byte, 32)); err == nil {
		t.Fatal("Pack accepted 2")
	}
}

// Non-finite input with checkFinite=false must not fail and must follow the
// documented rule: NaN elements -> 0; a block holding ±Inf gets scale Inf, so
// its finite values become 0 and ±Inf (Inf/Inf = NaN) become 0 as well.
func TestNonFiniteUnchecked(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	x := []float32{1, nan, -2, inf, 3, 4, -inf, 0}
	for _, m := range []Method{AbsMean, AbsMax} {
		for _, bs := range []int{0, 2, 3} {
			packed := make([]byte, 32)
			scales := make([]float32, NumBlocks(len(x), bs))
			if err := Quantize(x, bs, m, false, packed, scales); err != nil {
				t.Fatalf("%v bs=%d: %v", m, bs, err)
			}
			q := make([]int8, len(x))
			if err := Unpack(packed, q); err != nil {
				t.Fatal(err)
			}
			if q[1] != 0 {
				t.Fatalf("%v bs=%d: NaN element quantized to %d", m, bs, q[1])
			}
		}
	}
}

func FuzzQuantize(f *testing.F) {
	f.Add(uint16(7), uint16(0), int64(1), false)
	f.Add(uint16(300), uint16(96), int64(2), true)
	f.Add(uint16(129), uint16(1), int64(3), false)
	f.Fuzz(func(t *testing.T, n16, bs16 uint16, seed int64, absmax bool) {
		n := int(n16)%5000 + 1
		bs := int(bs16) % (n + 3)
		m := AbsMean
		if absmax {
			m = AbsMax
		}
		r := rand.New(rand.NewPCG(uint64(seed), 9))
		x := randTensor(r, n)
		for i := range x {
			x[i] *= float32(math.Exp2(float64(r.IntN(40) - 20)))
		}
		packed := make([]byte, PackedLen(n))
		scales := make([]float32, NumBlocks(n, bs))
		if err := Quantize(x, bs, m, true, packed, scales); err != nil {
			t.Fatal(err)
		}
		wantQ, wantS := refQuantize(x, bs, m)
		for i := range wantS {
			if scales[i] != wantS[i] {
				t.Fatalf("scale %d: %v != %v", i, scales[i], wantS[i])
			}
		}
		want := refPack(wantQ)
		for i := range want {
			if packed[i] != want[i] {
				t.Fatalf("byte %d: %#x != %#x", i, packed[i], want[i])
			}
		}
	})
}

// The threshold must agree with the float32 division for every scale and
// every x near it, including extremes.
func TestThresholdMatchesDivision(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	scales := []float32{1e-8, 1e-5, 0.1, 0.3, 1, 1.05, 3, 1e30, math.MaxFloat32, math.SmallestNonzeroFloat32, 1.1754944e-38}
	for i := 0; i < 2000; i++ {
		scales = append(scales, float32(math.Exp2(r.Float64()*120-60)))
	}
	for _, s := range scales {
		th, ok := Threshold(s)
		if !ok {
			t.Fatalf("Threshold(%v) not ok", s)
		}
		cands := []float32{th, -th, s * 0.5, -s * 0.5, s, 0, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
		v := th
		for k := 0; k < 4; k++ {
			v = math.Nextafter32(v, 0)
			cands = append(cands, v, -v)
		}
		v = th
		for k := 0; k < 4; k++ {
			v = math.Nextafter32(v, float32(math.Inf(1)))
			cands = append(cands, v, -v)
		}
		for _, x := range cands {
			if x != x {
				continue // NaN never reaches codeFinite
			}
			if got, want := codeFinite(math.Float32bits(x), int32(math.Float32bits(th)), math.Float32bits(-th)), codeOf(x, s); got != want {
				t.Fatalf("scale %v x %v: threshold code %d, division code %d", s, x, got, want)
			}
		}
	}
	for _, s := range []float32{0, -1, float32(math.Inf(1)), float32(math.NaN())} {
		if _, ok := Threshold(s); ok {
			t.Fatalf("Threshold(%v) ok", s)
		}
	}
}

// A NaN scale (absmean, unchecked) is always CanonicalNaN, whatever the input
// NaN's sign and payload, on every family and path (the GPU writes the same).
func TestNaNScaleIsCanonical(t *testing.T) {
	fams := append([]cpu.Family{cpu.Generic}, simdFamilies()...)
	payloads := []uint32{0x7FC00000, 0xFFC00000, 0x7FC00123, 0xFFFFFFFF, 0x7F800001}
	for _, fam := range fams {
		q, _ := QuantizeOp.Select(cpu.ParseDisable(disableAbove(fam)))
		if q.Family() != fam {
			t.Fatalf("family %s, want %s", q.Family(), fam)
		}
		for _, n := range []int{5, 300, 70_000} {
			for _, bs := range []int{0, 128, 1000} {
				for _, nb := range payloads {
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(i%7) - 3
					}
					x[n/2] = math.Float32frombits(nb)
					scales := make([]float32, NumBlocks(n, bs))
					if err := q.Quantize(x, bs, AbsMean, false, make([]byte, PackedLen(n)), scales); err != nil {
						t.Fatal(err)
					}
					blk := 0
					if bs > 0 {
						blk = (n / 2) / bs
					}
					if got := math.Float32bits(scales[blk]); got != CanonicalNaN {
						t.Errorf("%s n=%d bs=%d NaN %#08x: scale bits %#08x, want %#08x", fam, n, bs, nb, got, CanonicalNaN)
					}
				}
			}
		}
	}
}

// disableAbove is the BITNET_GO_DISABLE value that makes fam the best
// family: the families ranked above it ("all" for the generic code).
func disableAbove(fam cpu.Family) string {
	if fam == cpu.Generic {
		return "all"
	}
	var off []string
	for _, f := range cpu.Families {
		if f == fam {
			break
		}
		off = append(off, string(f))
	}
	return strings.Join(off, ",")
}

// The padding of a short last I2_S group must hold code 1: Unpack, Dequantize
// and their Q forms reject anything else, and Quantize and Pack write it
// whatever the buffer held.
func TestPadding(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		pos     int  // padding position to spoil; -1: none
		code    byte // code written there
		wantSub string
	}{
		{"n=1 code 0 right after", 1, 1, 0, "code 0 at position 1"},
		{"n=1 code 2 last", 1, 127, 2, "code 2 at position 127"},
		{"n=1 code 3 other lane", 1, 33, 3, "code 3 at position 33"},
		{"n=100 code 0", 100, 100, 0, "code 0 at position 100"},
		{"n=129 second group", 129, 200, 2, "code 2 at position 200"},
		{"n=127 only padding slot", 127, 127, 0, "code 0 at position 127"},
		{"n=100 valid", 100, -1, 0, ""},
		{"n=128 no padding", 128, -1, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals := make([]int8, tc.n)
			for i := range vals {
				vals[i] = int8(i%3) - 1
			}
			packed := bytes.Repeat([]byte{0xff}, PackedLen(tc.n)) // garbage Pack must overwrite
			if err := Pack(vals, packed); err != nil {
				t.Fatal(err)
			}
			if err := checkPadding(packed, tc.n); err != nil {
				t.Fatalf("Pack wrote bad padding: %v", err)
			}
			if tc.pos >= 0 {
				b, sh := slot(tc.pos)
				packed[b] = packed[b]&^(3<<sh) | tc.code<<sh
			}
			check := func(what string, err error) { t.Helper(); wantErr(t, what, err, tc.wantSub) }
			got := make([]int8, tc.n)
			check("Unpack", Unpack(packed, got))
			check("UnpackQ", UnpackQ(I2S, packed, 1, got))
			out := make([]float32, tc.n)
			check("Dequantize", Dequantize(packed, 0, []float32{1}, out))
			check("DequantizeQ", DequantizeQ(I2S, packed, 1, 0, []float32{1}, out))
			if tc.wantSub == "" && fmt.Sprint(got) != fmt.Sprint(vals) {
				t.Fatalf("values %v, want %v", got, vals)
			}
		})
	}
	// Quantize writes code 1 past n whatever the buffer held.
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 31, 33, 100, 127, 129, 1000} {
		for _, bs := range []int{0, 7, 64} {
			for _, m := range []Method{AbsMean, AbsMax} {
				packed := bytes.Repeat([]byte{0xff}, PackedLen(n))
				if err := Quantize(randTensor(r, n), bs, m, true, packed, make([]float32, NumBlocks(n, bs))); err != nil {
					t.Fatal(err)
				}
				if err := checkPadding(packed, n); err != nil {
					t.Fatalf("Quantize n=%d bs=%d %v: %v", n, bs, m, err)
				}
			}
		}
	}
}

// TestDecodeGroups checks Unpack and Dequantize (whole groups decoded 32
// bytes at a time) against a value-at-a-time reference on odd sizes, block
// sizes and thread counts, with and without a code 3 (the error names the
// first one).
func TestDecodeGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, n := range []int{1, 127, 128, 129, 255, 1000, 128 * 300, 128*257 + 77} {
		for _, bad := range []int{0, 1, 3} {
			packed := make([]byte, PackedLen(n))
			for p := 0; p < PackedLen(n)*4; p++ {
				b, sh := slot(p)
				c := byte(r.IntN(3))
				if p >= n {
					c = 1
				}
				packed[b] |= c << sh
			}
			first := -1
			for range bad {
				p := r.IntN(n)
				b, sh := slot(p)
				packed[b] |= 3 << sh
				if first < 0 || p < first {
					first = p
				}
			}
			bs := []int{0, 7, 128, 1000}[r.IntN(4)]
			scales := make([]float32, NumBlocks(n, bs))
			for i := range scales {
				scales[i] = float32(r.NormFloat64())
			}
			sb, _ := scaleBlock(n, bs, scales)
			vals, deq := make([]int8, n), make([]float32, n)
			e1, e2 := Unpack(packed, vals), Dequantize(packed, bs, scales, deq)
			if first >= 0 {
				b, _ := slot(first)
				want := fmt.Sprintf("invalid I2_S code 3 at position %d (byte %d)", first, b)
				for _, e := range []error{e1, e2} {
					if e == nil || e.Error() != want {
						t.Fatalf("n=%d: error %v, want %q", n, e, want)
					}
				}
				continue
			}
			if e1 != nil || e2 != nil {
				t.Fatalf("n=%d: %v, %v", n, e1, e2)
			}
			for p := range n {
				b, sh := slot(p)
				v := int8(packed[b]>>sh&3) - 1
				if vals[p] != v || math.Float32bits(deq[p]) != math.Float32bits(float32(v)*scales[p/sb]) {
					t.Fatalf("n=%d bs=%d position %d: %d, %v; want %d, %v", n, bs, p, vals[p], deq[p], v, float32(v)*scales[p/sb])
				}
			}
		}
	}
}
