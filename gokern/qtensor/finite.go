package qtensor

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// Finite reports whether v is neither NaN nor ±Inf.
func Finite(v float32) bool { return math.Float32bits(v)&0x7F800000 != 0x7F800000 }

// FirstNonFinite returns the index of the first NaN or ±Inf in x, or -1.
func FirstNonFinite(x []float32) int {
	for i, v := range x {
		if !Finite(v) {
			return i
		}
	}
	return -1
}

// NonFinite is the check_finite error of every quantizer for x[i], the
// first NaN or ±Inf of x.
func NonFinite(x []float32, i int) error {
	return errs.Value("x contains a non-finite value (%v) at flat index %d; pass check_finite=False to quantize anyway", x[i], i)
}
