package gemm

import (
	"math/rand/v2"
	"testing"
)

// TestLUTPrimitives checks the table builders and dot functions against
// direct sums on random int8 columns and random indices (odd lengths).
func TestLUTPrimitives(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for trial := range 300 {
		kc := 1 + rng.IntN(300)
		b := make([]int8, kc*LUTCols)
		for i := range b {
			b[i] = int8(rng.IntN(256) - 128)
		}
		if trial%7 == 0 { // extremes
			for i := range b {
				b[i] = -128
			}
		}
		w := make([]int64, kc+4)
		for i := range kc {
			w[i] = int64(rng.IntN(3) - 1)
			if trial%7 == 0 {
				w[i] = -1
			}
		}
		want := func() (int32, int32) {
			var s0, s1 int64
			for k := range kc {
				s0 += w[k] * int64(b[k*2])
				s1 += w[k] * int64(b[k*2+1])
			}
			return int32(s0), int32(s1)
		}
		w0, w1 := want()
		// pairs
		np := (kc + 1) / 2
		idx := make([]byte, (np+1)/2)
		for i := range np {
			idx[i/2] |= byte(3*w[2*i]+w[2*i+1]+4) << (4 * uint(i&1))
		}
		tab := make([]uint64, LUTEntries*2*len(idx))
		BuildPairTables(tab, b, kc, 2*len(idx))
		if g0, g1 := LUTLanes(PairDot(tab, idx)); g0 != w0 || g1 != w1 {
			t.Fatalf("pairs kc=%d: got %d, %d want %d, %d", kc, g0, g1, w0, w1)
		}
		// triples + remainder pair
		nt := kc / 3
		mag := make([]byte, (nt+1)/2)
		sign := make([]byte, (nt+7)/8)
		for i := range nt {
			v := 9*w[3*i] + 3*w[3*i+1] + w[3*i+2]
			if v < 0 {
				sign[i/8] |= 1 << uint(i%8)
				v = -v
			}
			mag[i/2] |= byte(v) << (4 * uint(i&1))
		}
		ttab := make([]uint64, TripleEntries*max(nt, 1))
		BuildTripleTables(ttab, b, kc, nt)
		s := TripleDot(ttab, mag, sign, nt)
		if kc%3 != 0 {
			s += PairDirect(byte(3*w[3*nt]+w[3*nt+1]+4), b, kc, 3*nt)
		}
		if g0, g1 := LUTLanes(s); g0 != w0 || g1 != w1 {
			t.Fatalf("triples kc=%d: got %d, %d want %d, %d", kc, g0, g1, w0, w1)
		}
	}
}
