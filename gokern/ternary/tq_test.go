package ternary

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// The reference of the TQ quantizer: the rule of tq.go written the slow
// way, as the gguf package's numpy code computes it (q =
// sign(r)*(floor(|r|) + floor(2*(|r| - floor(|r|)))) with r = x*id in
// float32; a non-finite r gives 0), with no threshold.
func refTQ(x []float32) (codes []byte, scales []float32) {
	codes = make([]byte, len(x))
	for b := 0; b < len(x)/TQBlock; b++ {
		blk := x[b*TQBlock : (b+1)*TQBlock]
		var d float32
		for _, v := range blk {
			if a := float32(math.Abs(float64(v))); a > d {
				d = a
			}
		}
		var id float32
		if d != 0 {
			id = 1 / d
		}
		scales = append(scales, refF16(d))
		for i, v := range blk {
			r := float64(v * id)
			q := 0.0
			if !math.IsNaN(r) && !math.IsInf(r, 0) {
				a := math.Abs(r)
				fl := math.Floor(a)
				q = math.Copysign(fl+math.Floor(2*(a-fl)), r)
			}
			codes[b*TQBlock+i] = byte(int(q) + 1)
		}
	}
	return codes, scales
}

// refF16 rounds f to float16 by searching the ordered positive halves for
// the nearest in float64 (ties to the even bit pattern; 65520 and above to
// Inf): independent of F16Bits' bit manipulation.
func refF16(f float32) float32 {
	a := math.Abs(float64(f))
	if math.IsNaN(a) {
		return f
	}
	if a >= 65520 {
		return float32(math.Copysign(math.Inf(1), float64(f)))
	}
	val := func(h int) float64 { return float64(F16Value(uint16(h))) }
	h := sortSearch(0x7c00, func(h int) bool { return val(h) >= a }) // first half >= a
	if h > 0 {
		lo, hi := val(h-1), val(h)
		if a-lo < hi-a || (a-lo == hi-a && (h-1)%2 == 0) {
			h--
		}
	}
	return float32(math.Copysign(val(h), float64(f)))
}

func sortSearch(n int, ok func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := (lo + hi) / 2
		if ok(m) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

func TestF16Bits(t *testing.T) {
	// every half value round-trips; NaN stays NaN
	for h := 0; h < 1<<16; h++ {
		v := F16Value(uint16(h))
		got := F16Bits(v)
		if v != v {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x -> %v -> %#04x, not a NaN", h, v, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Fatalf("half %#04x = %v converts back to %#04x", h, v, got)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	cases := []float32{0, 65504, 65519.99, 65520, 65536, 1e6, 0x1p-24, 0x1p-25, 0x1.000002p-25, 0x1p-26,
		0x1.8p-24, 0x1.4p-24, 6.1e-5, 6.0e-5, 1e-45, 1.0009765625, 1.00048828125, 1.000732421875, 3.4e38}
	for i := 0; i < 200000; i++ {
		switch i % 3 {
		case 0: // anywhere in float16's range and a bit past it
			cases = append(cases, float32(math.Ldexp(r.Float64()+0.5, r.IntN(48)-30)))
		case 1: // exactly between two halves
			h := r.IntN(0x7bff)
			cases = append(cases, float32((float64(F16Value(uint16(h)))+float64(F16Value(uint16(h+1))))/2))
		default:
			cases = append(cases, math.Float32frombits(r.Uint32()&0x7fffffff))
		}
	}
	for _, f := range cases {
		for _, v := range []float32{f, -f} {
			got, want := F16Value(F16Bits(v)), refF16(v)
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Fatalf("F16(%v (%#08x)) = %v, want %v", v, math.Float32bits(v), got, want)
			}
		}
	}
}

func TestTQThreshold(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ids := []float32{1, 2, 0.5, 3, math.MaxFloat32, 1 / math.MaxFloat32, 0x1p-149, 7.7e37}
	for i := 0; i < 100000; i++ {
		ids = append(ids, math.Float32frombits(r.Uint32()&0x7f7fffff))
	}
	for _, id := range ids {
		if id == 0 {
			continue
		}
		th, ok := TQThreshold(id)
		if !ok || !(th*id >= 0.5) || th <= 0 {
			t.Fatalf("TQThreshold(%v) = %v, %v: th*id = %v", id, th, ok, th*id)
		}
		if p := math.Nextafter32(th, 0); p > 0 && p*id >= 0.5 {
			t.Fatalf("TQThreshold(%v) = %v, but %v*id = %v >= 0.5 too", id, th, p, p*id)
		}
	}
	for _, id := range []float32{0, float32(math.Inf(1)), float32(math.NaN()), -1} {
		if _, ok := TQThreshold(id); ok {
			t.Fatalf("TQThreshold(%v) ok", id)
		}
	}
}

// tqBlockKinds fills a block of 256 values of one kind.
var tqBlockKinds = []string{"normal", "zeros", "ties", "huge", "tiny", "subnormal", "ternary", "one", "uniform"}

func tqBlock(r *rand.Rand, kind string) []float32 {
	x := make([]float32, TQBlock)
	switch kind {
	case "normal":
		s := float32(math.Ldexp(1, r.IntN(20)-10))
		for i := range x {
			x[i] = float32(r.NormFloat64()) * s
		}
	case "zeros":
		for i := range x {
			if r.IntN(2) == 0 {
				x[i] = float32(math.Copysign(0, -1))
			}
		}
	case "ties": // multiples of d/2, d a power of two or not: x*id at or near 0.5
		d := float32(r.Float64()*3 + 0.1)
		if r.IntN(2) == 0 {
			d = float32(math.Ldexp(1, r.IntN(10)-5))
		}
		for i := range x {
			x[i] = d * float32(r.IntN(5)-2) / 2
			if r.IntN(4) == 0 {
				x[i] = math.Nextafter32(x[i], float32(r.IntN(3)-1))
			}
		}
		x[r.IntN(TQBlock)] = d
	case "huge": // below float16's limit, near it
		for i := range x {
			x[i] = float32(r.Float64()*2-1) * 65500
		}
	case "tiny": // scales in float16's subnormal range and below
		s := math.Ldexp(1, -r.IntN(20)-14)
		for i := range x {
			x[i] = float32((r.Float64()*2 - 1) * s)
		}
	case "subnormal": // float32 subnormals: 1/d overflows
		for i := range x {
			x[i] = math.Float32frombits(r.Uint32() & 0x807fffff >> uint(r.IntN(20)))
		}
	case "ternary":
		s := float32(r.Float64() + 0.01)
		for i := range x {
			x[i] = float32(r.IntN(3)-1) * s
		}
	case "one":
		x[r.IntN(TQBlock)] = float32(r.NormFloat64())
	case "uniform":
		for i := range x {
			x[i] = float32(r.Float64()*2 - 1)
		}
	}
	return x
}

func tqFamilies() []cpu.Family { return TQQuantizeOp.Families() }

func tqKernels(t *testing.T, f cpu.Family) *TQKernels {
	k, ok := TQQuantizeOp.Impl(f)
	if !ok {
		t.Fatalf("no %s TQ kernels", f)
	}
	return k
}

func TestQuantizeTQMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, q := range []QType{TQ2, TQ1} {
		f := tqFormatOf(q)
		for _, fam := range tqFamilies() {
			k := tqKernels(t, fam)
			for trial := 0; trial < 60; trial++ {
				rows := []int{1, 2, 3, 7, 1 + r.IntN(9)}[trial%5]
				kb := 1 + r.IntN(4)
				n := rows * kb * TQBlock
				x := make([]float32, 0, n)
				for len(x) < n {
					x = append(x, tqBlock(r, tqBlockKinds[r.IntN(len(tqBlockKinds))])...)
				}
				packed := make([]byte, n/TQBlock*f.payload)
				scales := make([]float32, n/TQBlock)
				if err := k.Quantize(q, x, rows, true, packed, scales); err != nil {
					t.Fatalf("%s %s: %v", q, fam, err)
				}
				codes, ws := refTQ(x)
				for b := range scales {
					if math.Float32bits(scales[b]) != math.Float32bits(ws[b]) {
						t.Fatalf("%s %s block %d: scale %v, want %v", q, fam, b, scales[b], ws[b])
					}
				}
				vals := make([]int8, n)
				if err := f.Unpack(packed, rows, vals); err != nil {
					t.Fatal(err)
				}
				for i, v := range vals {
					if byte(v+1) != codes[i] {
						t.Fatalf("%s %s: value %d = %d, want %d (x = %v, block max %v)", q, fam, i, v,
							int(codes[i])-1, x[i], ws[i/TQBlock])
					}
				}
				want := make([]byte, len(packed))
				if err := f.Pack(vals, rows, want); err != nil || !slices.Equal(want, packed) {
					t.Fatalf("%s %s: Pack(Unpack(packed)) differs (%v)", q, fam, err)
				}
			}
		}
	}
}

func TestTQPackLayout(t *testing.T) {
	// the layout as tq.go states it, value by value
	r := rand.New(rand.NewPCG(7, 8))
	vals := make([]int8, 2*TQBlock)
	for i := range vals {
		vals[i] = int8(r.IntN(3) - 1)
	}
	p2 := make([]byte, 2*TQ2Payload)
	if err := tq2Format.Pack(vals, 1, p2); err != nil {
		t.Fatal(err)
	}
	for p, v := range vals {
		b, i := p/TQBlock, p%TQBlock
		by := p2[b*TQ2Payload+i/128*32+i%32]
		if c := by >> (2 * uint(i%128/32)) & 3; c != Code(v) {
			t.Fatalf("TQ2_0 value %d: code %d, want %d", p, c, Code(v))
		}
	}
	p1 := make([]byte, 2*TQ1Payload)
	if err := tq1Format.Pack(vals, 2, p1); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 2; b++ {
		c := func(i int) int { return int(Code(vals[b*TQBlock+i])) }
		blk := p1[b*TQ1Payload:]
		for j := 0; j < 48; j++ {
			base, step := j, 32
			if j >= 32 {
				base, step = 160+j-32, 16
			}
			v := 0
			for k := 0; k < 5; k++ {
				v = 3*v + c(base+k*step)
			}
			if want := byte((v*256 + 242) / 243); blk[j] != want {
				t.Fatalf("TQ1_0 block %d qs byte %d = %#x, want %#x", b, j, blk[j], want)
			}
		}
		for j := 0; j < 4; j++ {
			v := 0
			for k := 0; k < 4; k++ {
				v = 3*v + c(240+j+4*k)
			}
			if want := byte((3*v*256 + 242) / 243); blk[48+j] != want {
				t.Fatalf("TQ1_0 block %d qh byte %d = %#x, want %#x", b, j, blk[48+j], want)
			}
		}
	}
}

func TestTQErrors(t *testing.T) {
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"K not a multiple of 256", func() error { _, err := tq2Format.PackedLen(512, 4); return err }, "multiple of 256"},
		{"K 255", func() error { _, err := tq1Format.PackedLen(255, 1); return err }, "got K = 255"},
		{"rows do not divide", func() error { _, err := tq1Format.PackedLen(512, 3); return err }, "divide"},
		{"pack length", func() error { return tq2Format.Pack(make([]int8, 256), 1, make([]byte, 63)) }, "64 bytes"},
		{"pack value", func() error {
			v := make([]int8, 256)
			v[9] = 2
			return tq1Format.Pack(v, 1, make([]byte, 52))
		}, "position 9"},
		{"pack value -2, second block", func() error {
			v := make([]int8, 512)
			v[300] = -2
			return tq2Format.Pack(v, 1, make([]byte, 128))
		}, "position 300"},
		{"TQ2 code 3", func() error {
			p := make([]byte, 128)
			for i := range p {
				p[i] = 0x55
			}
			p[64+33] = 0x5d // block 1, value 128+33+32 = 193
			return tq2Format.Unpack(p, 1, make([]int8, 512))
		}, "block 1 (bytes 64..127): invalid TQ2_0 code 3 at value 161"},
		{"TQ1 non-canonical", func() error {
			p := make([]byte, 52)
			p[3] = 1
			return tq1Format.Unpack(p, 1, make([]int8, 256))
		}, "invalid TQ1_0 byte 0x01 at byte 3"},
		{"TQ1 qh fifth digit", func() error {
			p := make([]byte, 52)
			p[50] = tq1Byte(1)
			return tq1Format.Dequantize(p, 1, 256, []float32{1}, make([]float32, 256))
		}, "at byte 50"},
		{"dequantize scales", func() error {
			return tq2Format.Dequantize(make([]byte, 128), 1, 256, []float32{1}, make([]float32, 512))
		}, "2 entries"},
		{"NaN", func() error {
			x := make([]float32, 512)
			x[300] = float32(math.NaN())
			return QuantizeTQ(TQ2, x, 1, true, make([]byte, 128), make([]float32, 2))
		}, "flat index 300"},
		{"Inf", func() error {
			x := make([]float32, 512)
			x[3] = float32(math.Inf(-1))
			return QuantizeTQ(TQ1, x, 2, true, make([]byte, 104), make([]float32, 2))
		}, "flat index 3"},
		{"float16 overflow", func() error {
			x := make([]float32, 512)
			x[400] = 65520
			return QuantizeTQ(TQ1, x, 2, true, make([]byte, 104), make([]float32, 2))
		}, "block 1 (flat indices 256..511) has max|x| = 65520"},
		{"wrong qtype", func() error { return QuantizeTQ(I2S, make([]float32, 256), 1, true, nil, nil) }, "tq2_0 or tq1_0"},
		{"scales length", func() error {
			return QuantizeTQ(TQ2, make([]float32, 256), 1, true, make([]byte, 64), make([]float32, 2))
		}, "1 entries"},
	}
	for _, c := range cases {
		err := c.run()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestQuantizeTQNonFinite(t *testing.T) {
	// without the check: NaN out of the maximum and 0; Inf: scale Inf, values 0;
	// overflow: scale Inf
	x := make([]float32, 768)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	x[5] = float32(math.NaN())
	x[300] = float32(math.Inf(1))
	x[600] = 1e6
	for _, q := range []QType{TQ2, TQ1} {
		f := tqFormatOf(q)
		for _, fam := range tqFamilies() {
			packed := make([]byte, 3*f.payload)
			scales := make([]float32, 3)
			if err := tqKernels(t, fam).Quantize(q, x, 1, false, packed, scales); err != nil {
				t.Fatal(err)
			}
			vals := make([]int8, 768)
			if err := f.Unpack(packed, 1, vals); err != nil {
				t.Fatal(err)
			}
			if scales[0] != 3 || vals[5] != 0 || vals[0] != -1 || vals[3] != 0 || vals[6] != 1 {
				t.Fatalf("%s %s NaN block: scale %v, values %v", q, fam, scales[0], vals[:8])
			}
			if !math.IsInf(float64(scales[1]), 1) || slices.ContainsFunc(vals[256:512], func(v int8) bool { return v != 0 }) {
				t.Fatalf("%s %s Inf block: scale %v", q, fam, scales[1])
			}
			if !math.IsInf(float64(scales[2]), 1) || vals[600] != 1 || vals[601] != 0 {
				t.Fatalf("%s %s overflow block: scale %v, values %v", q, fam, scales[2], vals[600:602])
			}
		}
	}
}

func TestTQDequantize(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, f := range []*tqFormat{tq2Format, tq1Format} {
		for _, nb := range []int{1, 2, 5, 33} {
			vals := make([]int8, nb*TQBlock)
			for i := range vals {
				vals[i] = int8(r.IntN(3) - 1)
			}
			packed := make([]byte, nb*f.payload)
			if err := f.Pack(vals, 1, packed); err != nil {
				t.Fatal(err)
			}
			for _, bs := range []int{256, 0, 100, 512} {
				scales := make([]float32, NumBlocks(len(vals), bs))
				for i := range scales {
					scales[i] = RoundF16(float32(r.Float64()))
				}
				out := make([]float32, len(vals))
				if err := f.Dequantize(packed, 1, bs, scales, out); err != nil {
					t.Fatal(err)
				}
				per := bs
				if len(scales) == 1 {
					per = len(vals)
				}
				for i, v := range vals {
					if want := float32(v) * scales[i/per]; out[i] != want {
						t.Fatalf("%s block_size %d: out[%d] = %v, want %v", f.name, bs, i, out[i], want)
					}
				}
			}
		}
	}
}

func BenchmarkQuantizeTQ(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, 4096*4096)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, q := range []QType{TQ2, TQ1} {
		f := tqFormatOf(q)
		packed := make([]byte, len(x)/TQBlock*f.payload)
		scales := make([]float32, len(x)/TQBlock)
		for _, fam := range tqFamilies() {
			k, _ := TQQuantizeOp.Impl(fam)
			b.Run(f.name+"/"+string(fam), func(b *testing.B) {
				b.SetBytes(int64(4 * len(x)))
				for b.Loop() {
					if err := k.Quantize(q, x, 4096, true, packed, scales); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestTQSeams compares each family's tq2 / tq1 seams with the generic ones
// on runs of blocks of every kind, thresholds from the blocks or random
// (values on them included), and Quantize on runs longer than a batch with
// special blocks (zero, subnormal, NaN) between.
func TestTQSeams(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, nb := range []int{1, 2, 3, 7, tqBatch - 1, tqBatch, tqBatch + 1, 2*tqBatch + 3} {
		x := make([]float32, 0, nb*TQBlock)
		ts := make([]float32, nb)
		for b := range nb {
			blk := tqBlock(r, tqBlockKinds[r.IntN(len(tqBlockKinds))])
			d, _ := absMaxGeneric(blk)
			th, ok := TQThreshold(tqInverse(d))
			if !ok || r.IntN(3) == 0 {
				th = float32(r.Float64()*2 + 1e-3)
				blk[r.IntN(TQBlock)] = th // a value on the threshold and one on -t
				blk[r.IntN(TQBlock)] = -th
			}
			ts[b] = th
			x = append(x, blk...)
		}
		for _, f := range []*tqFormat{tq2Format, tq1Format} {
			want := make([]byte, nb*f.payload)
			seamOf := func(k *TQKernels) func(x, ts []float32, dst []byte) {
				if f == tq1Format {
					return k.tq1
				}
				return k.tq2
			}
			seamOf(tqGeneric)(x, ts, want)
			for _, fam := range tqFamilies() {
				got := make([]byte, nb*f.payload+1)
				got[len(got)-1] = 0xa5
				seamOf(tqKernels(t, fam))(x, ts, got[:nb*f.payload])
				if i := firstDiff(got[:len(want)], want); i >= 0 {
					t.Fatalf("%s %s, %d blocks: byte %d (block %d) = %#x, want %#x", f.name, fam, nb, i, i/f.payload, got[i], want[i])
				}
				if got[len(got)-1] != 0xa5 {
					t.Fatalf("%s %s, %d blocks: wrote past its payloads", f.name, fam, nb)
				}
			}
			// Quantize: specials between normal blocks.
			y := slices.Clone(x)
			for b := range nb {
				switch r.IntN(6) {
				case 0:
					clear(y[b*TQBlock : (b+1)*TQBlock])
				case 1:
					y[b*TQBlock+r.IntN(TQBlock)] = float32(math.NaN())
				case 2:
					copy(y[b*TQBlock:], tqBlock(r, "subnormal"))
				}
			}
			q := QType(TQ2)
			if f == tq1Format {
				q = TQ1
			}
			wantP, wantS := make([]byte, nb*f.payload), make([]float32, nb)
			if err := tqGeneric.Quantize(q, y, 1, false, wantP, wantS); err != nil {
				t.Fatal(err)
			}
			for _, fam := range tqFamilies() {
				gotP, gotS := make([]byte, nb*f.payload), make([]float32, nb)
				if err := tqKernels(t, fam).Quantize(q, y, 1, false, gotP, gotS); err != nil {
					t.Fatal(err)
				}
				if i := firstDiff(gotP, wantP); i >= 0 {
					t.Fatalf("Quantize %s %s, %d blocks: byte %d (block %d) = %#x, want %#x", f.name, fam, nb, i, i/f.payload, gotP[i], wantP[i])
				}
				for b := range gotS {
					if math.Float32bits(gotS[b]) != math.Float32bits(wantS[b]) {
						t.Fatalf("Quantize %s %s, %d blocks: scale %d = %v, want %v", f.name, fam, nb, b, gotS[b], wantS[b])
					}
				}
			}
		}
	}
}
