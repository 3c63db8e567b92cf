package gemm

import (
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// TestLUT16 checks every wide LUT kernel set against direct int64 sums on
// random 16-column panels (odd kc, padding nibbles up to 15, extremes at
// the int16 bound of 126 pairs), several rows with strides, added to
// random outputs; the SIMD kernels must equal the generic ones exactly.
func TestLUT16(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 5))
	for _, k := range LUT16Op.Impls() {
		t.Logf("family %s", k.Family)
		for trial := range 400 {
			kc := 1 + rng.IntN(2*LUT16MaxPairs)
			extreme := trial%9 == 0
			if extreme {
				kc = 2*LUT16MaxPairs - rng.IntN(2)
			}
			b := make([]int8, kc*LUT16Cols)
			for i := range b {
				b[i] = int8(rng.IntN(256) - 128)
				if extreme {
					b[i] = -128
				}
			}
			np := (kc + 1) / 2
			nb := (np + 1) / 2
			rows := 1 + rng.IntN(7)
			ldi := nb + rng.IntN(3)
			ldo := LUT16Cols + rng.IntN(5)
			idx := make([]byte, (rows-1)*ldi+nb)
			w := make([][]int64, rows)
			for r := range rows {
				w[r] = make([]int64, 4*nb)
				for i := range 2 * nb {
					e := rng.IntN(9)
					if extreme {
						e = 0 // (-1, -1): 256 per pair on -128
					}
					if i >= np {
						e = rng.IntN(16) // padding nibble: reads zeros
					} else {
						w[r][2*i], w[r][2*i+1] = int64(e/3-1), int64(e%3-1)
					}
					idx[r*ldi+i/2] |= byte(e) << (4 * uint(i&1))
				}
			}
			out := make([]int32, (rows-1)*ldo+LUT16Cols)
			for i := range out {
				out[i] = int32(rng.IntN(1 << 20))
			}
			want := append([]int32(nil), out...)
			for r := range rows {
				for j := range LUT16Cols {
					var s int64
					for kk := range kc {
						s += w[r][kk] * int64(b[kk*LUT16Cols+j])
					}
					want[r*ldo+j] += int32(s)
				}
			}
			tab := make([]int16, LUT16Cols*(LUT16Entries*2*nb+LUT16Pad))
			for i := range tab {
				tab[i] = int16(rng.IntN(1 << 16)) // stale garbage
			}
			k.Build(tab, b, kc, 2*nb)
			k.Dot(nb, tab, idx, ldi, rows, out, ldo)
			for i := range out {
				if out[i] != want[i] {
					t.Fatalf("%s: kc=%d rows=%d: out[%d] = %d, want %d", k.Family, kc, rows, i, out[i], want[i])
				}
			}
		}
	}
}

// TestLUT16Triples is TestLUT16 for the TL2 triple kernels: odd nt (the
// padding triple's nibble random), every sign, extremes at the int16 bound
// of 85 triples, rows past 3*nt in b ignored.
func TestLUT16Triples(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 6))
	for _, k := range LUT16Op.Impls() {
		t.Logf("family %s", k.Family)
		for trial := range 400 {
			nt := 1 + rng.IntN(LUT16MaxTriples)
			extreme := trial%9 == 0
			if extreme {
				nt = LUT16MaxTriples - rng.IntN(2)
			}
			kc := 3*nt + rng.IntN(3)
			b := make([]int8, kc*LUT16Cols)
			for i := range b {
				b[i] = int8(rng.IntN(256) - 128)
				if extreme {
					b[i] = -128
				}
			}
			rows := 1 + rng.IntN(7)
			magB, signB := (nt+1)/2, (nt+7)/8
			ldi := magB + signB + rng.IntN(3)
			buf := make([]byte, (rows-1)*ldi+magB+signB)
			w := make([][]int64, rows)
			for r := range rows {
				w[r] = make([]int64, 3*nt)
				for i := range nt + nt%2 {
					m := rng.IntN(14)
					neg := rng.IntN(2) == 1
					if extreme {
						m, neg = 13, true // (-1, -1, -1): 384 per triple on -128
					}
					if i >= nt {
						m = rng.IntN(16)
					} else {
						d := tripleDigits[m]
						for q := range 3 {
							w[r][3*i+q] = d[q]
							if neg {
								w[r][3*i+q] = -d[q]
							}
						}
						if neg {
							buf[r*ldi+magB+i/8] |= 1 << uint(i%8)
						}
					}
					buf[r*ldi+i/2] |= byte(m) << (4 * uint(i&1))
				}
			}
			out := make([]int32, (rows-1)*ldo16(rows)+LUT16Cols)
			ldo := ldo16(rows)
			for i := range out {
				out[i] = int32(rng.IntN(1<<20)) - 1<<19
			}
			want := append([]int32(nil), out...)
			for r := range rows {
				for j := range LUT16Cols {
					var s int64
					for kk := range 3 * nt {
						s += w[r][kk] * int64(b[kk*LUT16Cols+j])
					}
					want[r*ldo+j] += int32(s)
				}
			}
			tab := make([]int16, LUT16Cols*LUT16TripleEntries*(nt+1))
			for i := range tab {
				tab[i] = int16(rng.IntN(1 << 16))
			}
			k.BuildTriples(tab, b, nt, nt+nt%2)
			k.TripleDot(nt, tab, buf, buf[magB:], ldi, rows, out, ldo)
			for i := range out {
				if out[i] != want[i] {
					t.Fatalf("%s: nt=%d rows=%d: out[%d] = %d, want %d", k.Family, nt, rows, i, out[i], want[i])
				}
			}
		}
	}
}

func ldo16(rows int) int { return LUT16Cols + rows%3 }

// TestLUT16Select: the wide kernels follow the BITNET_GO_DISABLE setting
// they are selected under.
func TestLUT16Select(t *testing.T) {
	if k, f := LUT16Op.Select(cpu.ParseDisable("avx2")); f != cpu.Generic || k.Family != cpu.Generic {
		t.Fatalf("avx2 disabled: got %s kernels (%s)", k.Family, f)
	}
	_, hasAVX2 := LUT16Op.Impl(cpu.AVX2)
	if k, _ := LUT16Op.Select(cpu.ParseDisable("")); cpu.ParseDisable("").Usable(cpu.AVX2) && hasAVX2 && k.Family != cpu.AVX2 {
		t.Fatalf("avx2 usable: got %s", k.Family)
	}
	if got := cpu.Kernels()["conv_lut"]; got != LUT16Op.Family() {
		t.Fatalf("reported %s, selected %s", got, LUT16Op.Family())
	}
}
