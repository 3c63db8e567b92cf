//go:build !noasm && amd64

package quant

import (
	"math/rand/v2"
	"testing"
)

// TestHistogramAVX2Flush: histogramAVX2Kernel flushing its uint32
// sub-histograms every few blocks (also mid-run of one bin, and with
// non-finite values in later chunks) matches the generic kernel.
func TestHistogramAVX2Flush(t *testing.T) {
	defer func(f int) { histFlush = f }(histFlush)
	r := rand.New(rand.NewPCG(11, 12))
	for _, flush := range []int{8, 16, 24, 64, 1 << 10} {
		histFlush = flush
		for _, n := range []int{64, 65, 1000, 4099} {
			x := randVec(r, n, 3, specialMode(r.IntN(int(numModes))))
			for i := range x[:n/2] {
				x[i] = 1.25 // one bin, many flushes
			}
			x[n-3] = nan
			for _, absolute := range []bool{false, true} {
				got, want := make([]int64, 37), make([]int64, 37)
				gb := histogramGeneric(x, -2, 3, absolute, want)
				if b := histogramAVX2Kernel(x, -2, 3, absolute, got); b != gb {
					t.Fatalf("flush %d n %d: bad %d, generic %d", flush, n, b, gb)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("flush %d n %d abs %v: bin %d: %d, generic %d", flush, n, absolute, i, got[i], want[i])
					}
				}
			}
		}
	}
}
