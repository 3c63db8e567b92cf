package ternary

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// Benchmarks of the quantizer with whatever family dispatch picked; compare
// families with BITNET_GO_DISABLE. Bytes are float32 input read once.
func BenchmarkQuantize(b *testing.B) {
	old := par.Threads()
	defer par.SetThreads(old)
	const n = 1 << 24
	x := randTensor(rand.New(rand.NewPCG(1, 1)), n)
	packed := make([]byte, PackedLen(n))
	for _, th := range []int{1, 2} {
		for _, bs := range []int{0, 128} {
			b.Run(fmt.Sprintf("%s/threads=%d/bs=%d", family, th, bs), func(b *testing.B) {
				par.SetThreads(th)
				scales := make([]float32, NumBlocks(n, bs))
				b.SetBytes(4 * n)
				for b.Loop() {
					if err := Quantize(x, bs, AbsMean, true, packed, scales); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkKernels(b *testing.B) {
	x := randTensor(rand.New(rand.NewPCG(1, 1)), 1<<16)
	dst := make([]byte, PackedLen(len(x)))
	b.Run("absSum", func(b *testing.B) {
		b.SetBytes(4 << 16)
		for b.Loop() {
			absSum(x)
		}
	})
	b.Run("absMax", func(b *testing.B) {
		b.SetBytes(4 << 16)
		for b.Loop() {
			absMax(x)
		}
	})
	b.Run("quantRun", func(b *testing.B) {
		b.SetBytes(4 << 16)
		for b.Loop() {
			quantRun(x, 0.8, 0, dst, true)
		}
	})
}
