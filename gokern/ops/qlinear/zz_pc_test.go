package qlinear

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func BenchmarkZZ(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, sh := range [][3]int{{1, 16, 128}, {1, 4096, 128}, {1, 1024, 4096}} {
		M, N, K := sh[0], sh[1], sh[2]
		x := Act{Data: randCodes(r, M*K), Scale: 0.02, Zero: 128}
		sc := make([]float32, N)
		for i := range sc {
			sc[i] = 0.01 + float32(i)*1e-6
		}
		w := Weight{Data: randCodes(r, N*K), Scales: sc, Zeros: make([]int32, N), ID: uint64(N + M + K)}
		w.ColSums = make([]int32, N)
		for n := range w.ColSums {
			for _, v := range w.Data[n*K : (n+1)*K] {
				w.ColSums[n] += int32(int8(v))
			}
		}
		out := make([]byte, M*N)
		k := KernelOp.Get()
		b.Run(fmt.Sprintf("M%d_N%d_K%d", M, N, K), func(b *testing.B) {
			b.ReportAllocs()
			loop(b, func() error {
				_, err := Linear(k, M, N, K, x, w, nil, Output{Scale: 0.5, Zero: 128}, out)
				return err
			})
		})
	}
}
