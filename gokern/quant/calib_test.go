package quant

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

func TestPercentile(t *testing.T) {
	for _, tc := range []struct {
		counts []int64
		p      float64
		want   float64 // in bins of width 0.5
	}{
		{[]int64{1, 1, 1, 1}, 50, 0.5},  // cdf .25 .5: first >= .5 is bin 1, its left edge
		{[]int64{1, 1, 1, 1}, 50.1, 1},  // bin 2
		{[]int64{1, 1, 1, 1}, 100, 1.5}, // cdf[3] == 1
		{[]int64{0, 0, 5, 0}, 0, 0},     // cdf[0] = 0 >= 0
		{[]int64{3, 0, 0, 0, 7}, 30, 0}, // cdf[0] = .3
		{[]int64{3, 0, 0, 0, 7}, 31, 2}, // bin 4
		{[]int64{1, 2, 3}, 99.99, 1},    // bin 2
	} {
		got, err := Calibrate(tc.counts, &CalibSpec{Method: CalibPercentile, Percentile: tc.p, BinWidth: 0.5})
		if err != nil || got != tc.want {
			t.Errorf("%v p=%v: %v (%v), want %v", tc.counts, tc.p, got, err, tc.want)
		}
	}
}

// entropyRef is the NVIDIA algorithm written the plain way: explicit edges
// and a binary search for the chunk of every bin, scipy's entropy with
// plain sums.
func entropyRef(counts []int64, bits int, unsigned bool, start int, w float64) float64 {
	bins := make([]float64, len(counts))
	for i, c := range counts {
		bins[i] = float64(c)
	}
	bins[0] = bins[1]
	nq := 1 << (bits - 1)
	if unsigned {
		nq *= 2
	}
	var divs []float64
	for i := start; i <= len(bins); i++ {
		space := make([]float64, nq+1)
		for k := range space {
			space[k] = float64(k) * (float64(i) / float64(nq))
		}
		space[nq] = float64(i)
		dig := make([]int, i)
		for j := range dig {
			dig[j] = sort.Search(len(space), func(k int) bool { return space[k] > float64(j) }) - 1
			if bins[j] == 0 {
				dig[j] = -1
			}
		}
		sums, cnt := make([]float64, nq), make([]float64, nq)
		for j, d := range dig {
			if d >= 0 {
				sums[d] += bins[j]
				cnt[d]++
			}
		}
		p, q := make([]float64, i), make([]float64, i)
		var tail float64
		for _, v := range bins[i:] {
			tail += v
		}
		for j, d := range dig {
			p[j] = bins[j]
			if d >= 0 {
				q[j] = sums[d] / cnt[d]
			}
		}
		p[i-1] += tail
		var sp, sq float64
		for j := range p {
			sp += p[j]
			sq += q[j]
		}
		var kl float64
		for j := range p {
			kl += relEntr(p[j]/sp, q[j]/sq)
		}
		divs = append(divs, kl)
	}
	best := len(divs) - 1
	for k := len(divs) - 1; k >= 0; k-- {
		if divs[k] < divs[best]-1e-12*math.Abs(divs[best]) {
			best = k
		}
	}
	return float64(start+best) * w
}

func TestEntropyAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for it := range 12 {
		nb := 160 + r.IntN(300)
		counts := make([]int64, nb)
		scale := 5 + r.Float64()*60
		for range 20000 {
			v := math.Abs(r.NormFloat64()) * scale
			if it%3 == 0 {
				v = r.ExpFloat64() * scale
			}
			if b := int(v); b < nb {
				counts[b]++
			}
		}
		unsigned := it%4 == 1
		bits := 8
		if it%4 == 2 {
			bits = 6
		}
		got, err := Calibrate(counts, &CalibSpec{Method: CalibEntropy, NumBits: bits, Unsigned: unsigned, StartBin: 128, BinWidth: 0.25})
		if err != nil {
			t.Fatal(err)
		}
		if want := entropyRef(counts, bits, unsigned, 128, 0.25); got != want {
			t.Errorf("case %d: amax %v, want %v", it, got, want)
		}
	}
}

func TestMSE(t *testing.T) {
	// All the mass in bin 3 (centre 3.5 w): the best amax makes 3.5w a
	// quantization level with the fewest clipping; with 2 bits (bound 1)
	// amax = centre 3 exactly gives zero error.
	counts := make([]int64, 10)
	counts[3] = 100
	got, err := Calibrate(counts, &CalibSpec{Method: CalibMSE, NumBits: 2, StartBin: 0, BinWidth: 2})
	if err != nil || got != 7 {
		t.Fatalf("mse amax %v (%v), want 7", got, err)
	}
	// Two masses: amax must cover the larger one's level.
	counts = make([]int64, 300)
	counts[10], counts[250] = 1000, 1000
	got, err = Calibrate(counts, &CalibSpec{Method: CalibMSE, NumBits: 8, StartBin: 128, BinWidth: 1})
	if err != nil || got < 250 {
		t.Fatalf("mse amax %v (%v)", got, err)
	}
}

func TestPairwiseSum(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 7, 8, 9, 127, 128, 129, 300, 1000} {
		a := make([]float64, n)
		var exact float64
		for i := range a {
			a[i] = float64(r.IntN(1000)) // exact in any order
			exact += a[i]
		}
		if got := pairwiseSum(a); got != exact {
			t.Errorf("n=%d: %v, want %v", n, got, exact)
		}
	}
}

func TestCalibrateErrors(t *testing.T) {
	ok := []int64{1, 2, 3}
	for _, tc := range []struct {
		counts []int64
		s      CalibSpec
		want   string
	}{
		{nil, CalibSpec{BinWidth: 1}, "at least one bin"},
		{[]int64{0, 0}, CalibSpec{BinWidth: 1}, "all zero"},
		{[]int64{1, -1}, CalibSpec{BinWidth: 1}, "counts[1] must be non-negative"},
		{ok, CalibSpec{BinWidth: 0}, "bin_width must be finite and > 0"},
		{ok, CalibSpec{BinWidth: math.Inf(1)}, "bin_width"},
		{ok, CalibSpec{BinWidth: 1, Percentile: 101}, "percentile must be in [0, 100]"},
		{ok, CalibSpec{BinWidth: 1, Percentile: math.NaN()}, "percentile must be in [0, 100]"},
		{ok, CalibSpec{BinWidth: 1, Method: CalibEntropy, NumBits: 8, StartBin: 4}, "start_bin must be in [1, 3]"},
		{ok, CalibSpec{BinWidth: 1, Method: CalibMSE, NumBits: 8, StartBin: 3}, "start_bin must be in [0, 3)"},
		{ok, CalibSpec{BinWidth: 1, Method: CalibMSE, NumBits: 1}, "num_bits must be in [2, 16]"},
		{ok, CalibSpec{BinWidth: 1, Method: 7}, "method must be"},
	} {
		if _, err := Calibrate(tc.counts, &tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %+v: %v, want %q", tc.counts, tc.s, err, tc.want)
		}
	}
}
