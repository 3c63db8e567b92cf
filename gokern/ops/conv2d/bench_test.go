package conv2d

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// benchThreads is the thread count of BenchmarkConv (-threads N).
var benchThreads = flag.Int("threads", 1, "threads for BenchmarkConv")

// benchLayer is one benchmarked layer: batch n, c -> o channels, a k x k
// kernel with stride s and padding p on hw x hw pixels.
type benchLayer struct {
	name                 string
	n, c, o, k, s, p, hw int
}

// shape is the layer's conv2d shape and its checked dimensions.
func (l benchLayer) shape() (Shape, Dims) {
	s := Shape{N: l.n, C: l.c, H: l.hw, W: l.hw, O: l.o, WC: l.c, KH: l.k, KW: l.k, Groups: 1,
		StrideH: l.s, StrideW: l.s, PadT: l.p, PadL: l.p, PadB: l.p, PadR: l.p, DilH: 1, DilW: 1}
	d, _ := s.Check()
	return s, d
}

// BenchmarkConv times the kernels on ResNet layers (batch 1 unless the name
// says xN) with the gemm family dispatch picked, on -threads threads (1 by
// default); GFLOP/s counts 2*N*O*C/groups*kH*kW*Ho*Wo.
func BenchmarkConv(b *testing.B) {
	keepThreads(b)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, l := range []benchLayer{
		{"3x3_64@56", 1, 64, 64, 3, 1, 1, 56},
		{"3x3_64@56x8", 8, 64, 64, 3, 1, 1, 56},
		{"3x3_128@28x8", 8, 128, 128, 3, 1, 1, 28},
		{"3x3_512@7", 1, 512, 512, 3, 1, 1, 7},
		{"3x3_512@7x8", 8, 512, 512, 3, 1, 1, 7},
		{"1x1_256-64@56", 1, 256, 64, 1, 1, 0, 56},
		{"1x1_256-64@56x8", 8, 256, 64, 1, 1, 0, 56},
		{"1x1_64-256@56", 1, 64, 256, 1, 1, 0, 56},
		{"1x1_64-256@56x8", 8, 64, 256, 1, 1, 0, 56},
		{"stem7x7", 1, 3, 64, 7, 2, 3, 224},
		{"stem7x7x8", 8, 3, 64, 7, 2, 3, 224},
		{"gemv_4096@1", 1, 4096, 4096, 1, 1, 0, 1},
		{"gemv_4096@1x8", 8, 4096, 4096, 1, 1, 0, 1},
		{"gemv_1024@1x8", 8, 1024, 1024, 1, 1, 0, 1},
		{"gemv_4096@4x4", 1, 4096, 4096, 1, 1, 0, 4},
		{"gemv_4096@4x4x8", 8, 4096, 4096, 1, 1, 0, 4},
	} {
		s, d := l.shape()
		tc := newCase(b, rng, s, d.K, false)
		out := make([]float32, d.OutLen)
		flops := 2 * float64(d.OutLen) * float64(d.K)
		for _, kind := range []Algo{Auto, Direct} {
			for _, bits := range []int{0, 8} {
				b.Run(fmt.Sprintf("%s/%s/act%d/%s", l.name, kind, bits, gemm.KernelOp.Get().Family), func(b *testing.B) {
					if err := par.SetThreads(*benchThreads); err != nil {
						b.Fatal(err)
					}
					for b.Loop() {
						if _, err := Conv2D(d, tc.x, tc.w, nil, out, Options{ActBits: bits, Algo: kind}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkDepthwise times the depthwise kernel on MobileNet-like layers
// (batch 1, one thread).
func BenchmarkDepthwise(b *testing.B) {
	keepThreads(b)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, l := range []struct{ c, hw, s int }{{256, 28, 1}, {64, 112, 2}} {
		s := Shape{N: 1, C: l.c, H: l.hw, W: l.hw, O: l.c, WC: 1, KH: 3, KW: 3, Groups: l.c,
			StrideH: l.s, StrideW: l.s, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}
		d, _ := s.Check()
		tc := newCase(b, rng, s, d.K, false)
		out := make([]float32, d.OutLen)
		for _, bits := range []int{0, 8} {
			b.Run(fmt.Sprintf("c%d@%d/s%d/act%d", l.c, l.hw, l.s, bits), func(b *testing.B) {
				_ = par.SetThreads(1)
				for b.Loop() {
					if _, err := Conv2D(d, tc.x, tc.w, nil, out, Options{ActBits: bits}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(d.OutLen*d.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkConvI8 times the int8 convolution (Auto) of the suite's layers
// with each conv_i8 family that has an implicit kernel, the other ops as
// dispatched, on -threads threads: the families run in turn on one layer.
func BenchmarkConvI8(b *testing.B) {
	keepThreads(b)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, l := range []benchLayer{
		{"3x3_64@56", 1, 64, 64, 3, 1, 1, 56},
		{"3x3_64@56x8", 8, 64, 64, 3, 1, 1, 56},
		{"3x3_128@28x8", 8, 128, 128, 3, 1, 1, 28},
		{"3x3_256@14x8", 8, 256, 256, 3, 1, 1, 14},
		{"3x3_512@7", 1, 512, 512, 3, 1, 1, 7},
		{"3x3_512@7x8", 8, 512, 512, 3, 1, 1, 7},
		{"1x1_256-64@56", 1, 256, 64, 1, 1, 0, 56},
		{"1x1_256-64@56x8", 8, 256, 64, 1, 1, 0, 56},
		{"1x1_64-256@56", 1, 64, 256, 1, 1, 0, 56},
		{"1x1_64-256@56x8", 8, 64, 256, 1, 1, 0, 56},
		{"stem7x7", 1, 3, 64, 7, 2, 3, 224},
		{"stem7x7x8", 8, 3, 64, 7, 2, 3, 224},
	} {
		s, d := l.shape()
		tc := newCase(b, rng, s, d.K, false)
		out := make([]float32, d.OutLen)
		for _, i8 := range gemm.ConvI8Families() {
			if i8.Implicit == nil {
				continue
			}
			ks := selected()
			ks.i8 = i8
			b.Run(fmt.Sprintf("%s/%s", l.name, i8.Family), func(b *testing.B) {
				if err := par.SetThreads(*benchThreads); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := conv2d(&d, tc.x, tc.w, nil, out, Options{ActBits: 8}, ks); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(d.OutLen)*float64(d.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGEMVBlocks times 4096-channel linear layers over 4096 and
// 11008 inputs (int8 activations, codes known valid: a weight ID, as
// Python's calls pass) with one scale, and with a scale per block of 256
// (TQ2_0's) and 128 values per output channel, at 1, 8 and 64 samples, on
// -threads threads.
func BenchmarkGEMVBlocks(b *testing.B) {
	keepThreads(b)
	rng := rand.New(rand.NewPCG(1, 2))
	id := uint64(1 << 41) // numbers no test gives
	for _, k := range []int{4096, 11008} {
		for _, bs := range []int{0, 256, 128} {
			for _, n := range []int{1, 8, 64} {
				tc := newCase(b, rng, pointwise(n, k, 4096, 1, 1), bs, false)
				id++
				tc.w.ID = id // found valid by the first call
				out := make([]float32, tc.d.OutLen)
				b.Run(fmt.Sprintf("k=%d/bs=%d/N=%d", k, bs, n), func(b *testing.B) {
					if err := par.SetThreads(*benchThreads); err != nil {
						b.Fatal(err)
					}
					for b.Loop() {
						if _, err := Conv2D(tc.d, tc.x, tc.w, nil, out, Options{ActBits: 8}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(tc.d.OutLen)*float64(tc.d.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
				})
			}
		}
	}
}
