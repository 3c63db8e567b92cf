package gemm

import (
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// BenchmarkPackA times the panel packing of a 512 x 4608 weight (one thread).
func BenchmarkPackA(b *testing.B) {
	old := par.Threads()
	defer func() { _ = par.SetThreads(old) }()
	_ = par.SetThreads(1)
	og, k := 512, 4608
	q := make([]int8, og*k)
	for i := range q {
		q[i] = int8(i*7%3 - 1)
	}
	packed := make([]byte, ternary.PackedLen(len(q)))
	if err := ternary.Pack(q, packed); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, ALen(og, 1, k))
	for b.Loop() {
		if err := KernelOp.Get().PackA(dst, packed, og, 1, k); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(q))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gvalues/s")
}
