package qlinear

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user+system CPU time (a measure that the
// other processes of a loaded machine do not inflate as they do wall time).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports its CPU time per call too.
func loop(b *testing.B, f func() error) {
	t0 := cpuTime()
	n := 0
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(cpuTime()-t0)/float64(max(n, 1)), "cpu-ns/op")
}

// BenchmarkLinear times Linear on LLM shapes with the dispatched kernels.
func BenchmarkLinear(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for i, sh := range [][3]int{{1, 4096, 4096}, {1, 4096, 11008}, {8, 4096, 11008}, {4, 4096, 4096}, {8, 11008, 4096}, {8, 4096, 4096}, {16, 4096, 4096}, {32, 4096, 4096},
		{64, 4096, 4096}, {64, 11008, 4096}, {64, 4096, 11008}, {128, 4096, 4096}, {256, 4096, 4096}} {
		M, N, K := sh[0], sh[1], sh[2]
		x := Act{Data: randCodes(r, M*K), Scale: 0.02, Zero: 128}
		// an ID as bitnet_go.functional passes for a quantized tensor's weight
		w := Weight{Data: randCodes(r, N*K), Scales: []float32{0.01}, Zeros: []int32{0}, ID: uint64(i + 1)}
		w.ColSums = make([]int32, N) // as bindings pass them
		for n := range w.ColSums {
			for _, v := range w.Data[n*K : (n+1)*K] {
				w.ColSums[n] += int32(int8(v))
			}
		}
		out := make([]byte, M*N)
		k := KernelOp.Get()
		b.Run(fmt.Sprintf("%s/M%d_N%d_K%d", k.Family, M, N, K), func(b *testing.B) {
			loop(b, func() error {
				_, err := Linear(k, M, N, K, x, w, nil, Output{Scale: 0.5, Zero: 128}, out)
				return err
			})
		})
	}
}

// BenchmarkConv times Conv2D on ResNet layers with the dispatched kernels.
func BenchmarkConv(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range []ConvShape{
		{N: 1, C: 64, H: 56, W: 56, O: 64, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
		{N: 1, C: 3, H: 224, W: 224, O: 64, KH: 7, KW: 7, Groups: 1, StrideH: 2, StrideW: 2, PadT: 3, PadL: 3, PadB: 3, PadR: 3, DilH: 1, DilW: 1},
		{N: 1, C: 256, H: 56, W: 56, O: 64, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{N: 1, C: 64, H: 56, W: 56, O: 256, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{N: 1, C: 512, H: 7, W: 7, O: 512, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
	} {
		ho, wo, _ := s.Out()
		x := Act{Data: randCodes(r, s.C*s.H*s.W), Scale: 0.02, Zero: 128}
		w := Weight{Data: randCodes(r, s.O*s.C*s.KH*s.KW), Scales: []float32{0.01}, Zeros: []int32{0}}
		out := make([]byte, s.O*ho*wo)
		k := KernelOp.Get()
		b.Run(fmt.Sprintf("%s/C%d_O%d_K%d_H%d", k.Family, s.C, s.O, s.KH, s.H), func(b *testing.B) {
			loop(b, func() error {
				_, err := Conv2D(k, s, x, w, nil, Output{Scale: 0.5, Zero: 128}, out)
				return err
			})
		})
	}
}
