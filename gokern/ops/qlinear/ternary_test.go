package qlinear

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	mk "github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// TestLinearTernaryMatchesLinear runs LinearTernary, for every family of
// qlinear_dot's Quant and of linear_gemv, against Linear on the weight's
// int8 values: random shapes (odd M and N, K = 128*j), uint8 and int8
// activations, zero points 0, 128 (or -128) and random, per-tensor and
// per-row scales, with and without given column sums and bias.
func TestLinearTernaryMatchesLinear(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1))
	r := rand.New(rand.NewPCG(17, 3))
	id := uint64(1 << 41) // numbers no other test gives
	for _, gk := range mk.GemvFamilies() {
		for _, k := range families(t) {
			for c := range 48 {
				M, N, K := 1+r.IntN(40), 1+r.IntN(150), mk.GroupValues*(1+r.IntN(5))
				if c%8 == 0 {
					M = 64 + r.IntN(9)
				}
				signed := c%2 == 1
				x := Act{Data: randCodes(r, M*K), Signed: signed, Scale: 0.01 + r.Float32()}
				switch c % 3 {
				case 0:
					x.Zero = 0
				case 1:
					x.Zero = 128
				default:
					x.Zero = int32(r.IntN(256))
				}
				if signed {
					x.Zero -= 128
				}
				vals := make([]int8, N*K)
				for i := range vals {
					vals[i] = int8(r.IntN(3) - 1)
				}
				packed := make([]byte, ternary.PackedLen(N*K))
				if err := ternary.Pack(vals, packed); err != nil {
					t.Fatal(err)
				}
				nq := 1
				if c%4 >= 2 {
					nq = N
				}
				scales := make([]float32, nq)
				for i := range scales {
					scales[i] = 0.001 + r.Float32()*0.1
				}
				var bias []float32
				if c%5 != 4 {
					bias = make([]float32, N)
					for i := range bias {
						bias[i] = float32(r.NormFloat64() * 3)
					}
				}
				o := Output{Scale: 0.05 + r.Float32(), Zero: int32(r.IntN(256)), Signed: signed, Relu: c%7 == 0}
				if signed {
					o.Zero -= 128
				}
				want := make([]byte, M*N)
				wb := make([]byte, N*K)
				for i, v := range vals {
					wb[i] = byte(v)
				}
				wq := Weight{Data: wb, Scales: scales, Zeros: make([]int32, nq)}
				if _, err := Linear(k, M, N, K, x, wq, bias, o, want); err != nil {
					t.Fatal(err)
				}
				w := Ternary{Packed: packed, Scales: scales}
				if c%2 == 0 {
					cs, err := TernaryColSums(packed, N, K)
					if err != nil {
						t.Fatal(err)
					}
					w.ColSums = cs
				}
				if c%3 == 0 { // a number: the first call checks the codes, the second runs unchecked
					id++
					w.ID = id
				}
				calls := 1
				if w.ID != 0 {
					calls = 2
				}
				for call := range calls {
					got := make([]byte, M*N)
					info, err := linearTernary(k, gk, M, N, K, x, w, bias, o, got)
					if err != nil {
						t.Fatal(err)
					}
					if info.Kernel != fmt.Sprintf("linear_gemv/%s", gk.Family) {
						t.Fatalf("kernel %q", info.Kernel)
					}
					if w.ID != 0 && !mk.CodesValid(w.ID) {
						t.Fatalf("case %d: the codes not recorded as valid", c)
					}
					if !bytes.Equal(got, want) {
						for i := range got {
							if got[i] != want[i] {
								t.Fatalf("gemv %s, quant %s, case %d call %d (M=%d N=%d K=%d signed=%v zero=%d): out[%d,%d] = %d, Linear %d",
									gk.Family, k.Family, c, call, M, N, K, signed, x.Zero, i/N, i%N, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestLinearTernaryErrors checks the errors of bad weights.
func TestLinearTernaryErrors(t *testing.T) {
	k := KernelOp.Get()
	M, N, K := 3, 5, 256
	x := Act{Data: make([]byte, M*K), Scale: 1}
	o := Output{Scale: 1}
	packed := make([]byte, N*K/4)
	for i := range packed {
		packed[i] = 0x55 // all zeros
	}
	packed[N*K/4-1] = 0x57 // a code 3 at the last element
	out := make([]byte, M*N)
	for _, cs := range [][]int32{nil, make([]int32, N)} {
		for call := range 2 { // with a number: reported on every call, never recorded as valid
			_, err := LinearTernary(k, M, N, K, x, Ternary{Packed: packed, Scales: []float32{1}, ColSums: cs, ID: 1<<42 + 1}, nil, o, out)
			if err == nil || mk.CodesValid(1<<42+1) {
				t.Fatalf("code 3 (colsums %v) call %d: error %v, recorded valid %v", cs, call, err, mk.CodesValid(1<<42+1))
			}
		}
	}
	good := bytes.Repeat([]byte{0x55}, N*K/4)
	if _, err := LinearTernary(k, M, N, 100, x, Ternary{Packed: good, Scales: []float32{1}}, nil, o, out); err == nil {
		t.Fatal("K = 100: no error")
	}
	if _, err := LinearTernary(k, M, N, K, x, Ternary{Packed: good[:10], Scales: []float32{1}}, nil, o, out); err == nil {
		t.Fatal("short weight: no error")
	}
	if _, err := LinearTernary(k, M, N, K, x, Ternary{Packed: good, Scales: []float32{1, 2}}, nil, o, out); err == nil {
		t.Fatal("2 scales for 5 rows: no error")
	}
}

// BenchmarkLinearTernary times LinearTernary and Linear on the same ternary
// weight (as int8 values, with their column sums, as bindings pass them)
// on the LLM shapes of `bench qops`, per-row scales, one thread.
func BenchmarkLinearTernary(b *testing.B) {
	defer par.SetThreads(par.Threads())
	if err := par.SetThreads(1); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	k := KernelOp.Get()
	for _, sh := range [][2]int{{4096, 4096}, {11008, 4096}, {4096, 11008}} {
		N, K := sh[0], sh[1]
		vals := make([]int8, N*K)
		wb := make([]byte, N*K)
		for i := range vals {
			vals[i] = int8(r.IntN(3) - 1)
			wb[i] = byte(vals[i])
		}
		packed := make([]byte, ternary.PackedLen(N*K))
		if err := ternary.Pack(vals, packed); err != nil {
			b.Fatal(err)
		}
		cs, err := TernaryColSums(packed, N, K)
		if err != nil {
			b.Fatal(err)
		}
		scales := make([]float32, N)
		for i := range scales {
			scales[i] = 0.01
		}
		w := Ternary{Packed: packed, Scales: scales, ColSums: cs}
		wq := Weight{Data: wb, Scales: scales, Zeros: make([]int32, N), ColSums: cs}
		for _, M := range []int{1, 8, 64, 256} {
			x := Act{Data: randCodes(r, M*K), Scale: 0.02, Zero: 128}
			o := Output{Scale: 0.5, Zero: 128}
			out := make([]byte, M*N)
			b.Run(fmt.Sprintf("ternary/%dx%d/M=%d", N, K, M), func(b *testing.B) {
				for b.Loop() {
					if _, err := LinearTernary(k, M, N, K, x, w, nil, o, out); err != nil {
						b.Fatal(err)
					}
				}
			})
			wid := w // with a number, as bitnet_go.functional passes: checked once, then not
			wid.ID = 1<<43 + uint64(N)
			b.Run(fmt.Sprintf("ternary-id/%dx%d/M=%d", N, K, M), func(b *testing.B) {
				for b.Loop() {
					if _, err := LinearTernary(k, M, N, K, x, wid, nil, o, out); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("int8/%dx%d/M=%d", N, K, M), func(b *testing.B) {
				for b.Loop() {
					if _, err := Linear(k, M, N, K, x, wq, nil, o, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestFlipSum: flipSum against the byte-at-a-time flip and int8 sum, for
// lengths around its 8-byte steps and 128-step rounds, both flips, random
// bytes and the extremes (every byte 0 or 255).
func TestFlipSum(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{0, 1, 7, 8, 9, 63, 128, 1023, 1024, 1025, 4096, 11008, 8*128*3 + 5} {
		for _, fill := range []int{-1, 0, 255} {
			src := make([]byte, n+1)[1:] // misaligned
			for i := range src {
				if fill < 0 {
					src[i] = byte(r.IntN(256))
				} else {
					src[i] = byte(fill)
				}
			}
			for _, flip := range []byte{0, 0x80} {
				dst := make([]byte, n)
				got := flipSum(dst, src, flip)
				var want int32
				for i, v := range src {
					if dst[i] != v^flip {
						t.Fatalf("n %d fill %d flip %#x: dst[%d] = %d, want %d", n, fill, flip, i, dst[i], v^flip)
					}
					want += int32(int8(v ^ flip))
				}
				if got != want {
					t.Errorf("n %d fill %d flip %#x: sum %d, want %d", n, fill, flip, got, want)
				}
			}
		}
	}
}
