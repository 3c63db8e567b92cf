package conv

import (
	"encoding/binary"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// gemvMaxP is the most output positions per sample for which a pointwise
// convolution runs as dot products straight on the I2_S weight (gemv)
// rather than through the A panels and 16-column micro-kernels: at a few
// columns the micro-panels are mostly padding, and packing the panels
// (PackA) costs as much as the whole product.
const gemvMaxP = 4

// useGEMV reports whether the pointwise shape d with scale blocks sc runs as
// gemv: one group, few positions, and every scale block (hence every row)
// made of whole I2_S groups, so each (row, block) is one Dot call.
func useGEMV(d *Dims, sc *scaler) bool {
	return d.Groups == 1 && d.P <= gemvMaxP && d.K%gemm.GroupValues == 0 && sc.bl%gemm.GroupValues == 0
}

// checkCodes returns PackA's error for the first code 3 of an I2_S tensor of
// n values (n a multiple of 128: no padded group), or nil.
func checkCodes(packed []byte, n int) error {
	nb := n / 4
	chunks := par.Chunks(nb/32, 1024)
	bad := make([]int, len(chunks)-1)
	par.Run(chunks, func(c, lo, hi int) {
		bad[c] = -1
		for g := lo; g < hi; g++ {
			grp := packed[32*g : 32*g+32]
			var three uint64 // a code 3 sets both bits of its pair
			for i := 0; i < 32; i += 8 {
				v := binary.LittleEndian.Uint64(grp[i:])
				three |= v & (v >> 1)
			}
			if three&0x5555555555555555 == 0 {
				continue
			}
			for j := range gemm.GroupValues {
				if packed[32*g+j%32]>>(6-2*(j/32))&3 == 3 {
					bad[c] = g*gemm.GroupValues + j
					return
				}
			}
		}
	})
	for _, p := range bad {
		if p >= 0 {
			return errs.Value("weight: invalid I2_S code 3 at element %d", p)
		}
	}
	return nil
}

// gemv computes a pointwise convolution (useGEMV) as one Dot per (sample,
// position, output channel, scale block) on the I2_S codes, folded into out
// as the GEMM algorithms do. Rows are split over par's threads; a position
// of a sample with P > 1 is first gathered into a contiguous column.
func gemv[T elem, A accum](d *Dims, packed []byte, src []T, acts *activations, sc *scaler, out []float32,
	dot func(w []byte, x []T) A, fold foldFn[A]) error {
	if err := checkCodes(packed, d.WLen); err != nil {
		return err
	}
	k, per := d.K, d.C*d.P
	par.Run(par.Chunks(d.O, 32), func(_, lo, hi int) {
		one := make([]A, 1)
		var col []T
		if d.P > 1 {
			col = make([]T, k)
		}
		for n := range d.N {
			var a float32
			if acts != nil {
				a = acts.a[n]
			}
			xs := src[n*per : (n+1)*per]
			for p := range d.P {
				x := xs
				if d.P > 1 {
					for c := range col {
						col[c] = xs[c*d.P+p]
					}
					x = col
				}
				for o := lo; o < hi; o++ {
					for b := range sc.nb {
						k0 := o*k + b*sc.bl
						one[0] = dot(packed[k0/4:(k0+sc.bl)/4], x[b*sc.bl:(b+1)*sc.bl])
						fold(sc, out[(n*d.O+o)*d.P+p:][:1], one, o, b, a)
					}
				}
			}
		}
	})
	return nil
}
