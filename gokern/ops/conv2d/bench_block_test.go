package conv2d

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// benchBlocks are BenchmarkConvBlocks' block sizes (0: one scale).
var benchBlocks = &blockList{0, 96, 128, 192}

// BenchmarkConvBlocks times conv2d on 1 thread with per-block scales (block
// sizes that do and do not divide the 128-value groups) and with TL1/TL2
// weights on the non-LUT algorithms (converted to I2_S, then cached).
func BenchmarkConvBlocks(b *testing.B) {
	keepThreads(b)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, l := range []benchLayer{
		{"3x3_64@56", 1, 64, 64, 3, 1, 1, 56},
		{"1x1_768-256@14", 1, 768, 256, 1, 1, 0, 14},
		{"gemv_1536@1", 1, 1536, 1536, 1, 1, 0, 1},
	} {
		s, d := l.shape()
		out := make([]float32, d.OutLen)
		flops := 2 * float64(d.OutLen) * float64(d.K)
		for _, bs := range *benchBlocks {
			if bs > 0 && d.K%bs != 0 {
				continue
			}
			tc := newCase(b, rng, s, bs, false)
			for _, qt := range []ternary.QType{ternary.I2S, ternary.TL1, ternary.TL2} {
				w := tc.w
				if qt != ternary.I2S {
					n, _ := ternary.PackedLenQ(qt, d.WLen, d.O)
					w.Packed = make([]byte, n)
					if err := ternary.PackQ(qt, tc.q, d.O, w.Packed); err != nil {
						b.Fatal(err)
					}
					w.QType = qt
				}
				for _, bits := range []int{0, 8} {
					algo := Auto // TL with int8 activations: Auto may pick LUT, which reads TL as it is
					if qt != ternary.I2S && bits == 8 {
						algo = Im2col
					}
					b.Run(fmt.Sprintf("%s/bs%d/%s/act%d", l.name, bs, qt, bits), func(b *testing.B) {
						_ = par.SetThreads(1)
						var info Info
						for b.Loop() {
							var err error
							if info, err = Conv2DInfo(d, tc.x, w, nil, out, Options{ActBits: bits, Algo: algo}); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
						b.Logf("%s", info.Kernel)
					})
				}
			}
		}
	}
}

// blockList is a -blocks flag: comma-separated block sizes.
type blockList []int

func (l *blockList) String() string { return fmt.Sprint(*l) }

func (l *blockList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		*l = append(*l, n)
	}
	return nil
}

func init() { flag.Var(benchBlocks, "blocks", "block sizes of BenchmarkConvBlocks (0: one scale)") }
