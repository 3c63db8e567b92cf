package conv2d

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Weights is a ternary weight as the C ABI passes it: the packed codes of the
// flattened (O, C/groups, kH, kW) tensor and one float32 scale per BlockSize
// consecutive elements (BlockSize 0, or at least the tensor's size: one
// scale for the tensor).
type Weights struct {
	Packed    []byte
	Scales    []float32
	BlockSize int
	QType     ternary.QType // I2S, TL1, TL2, TQ2 or TQ1 (TL/TQ rows are the O output channels)
	converted bool          // Packed converted to I2_S for this call (asI2S) and not kept: layouts not cached
	// ID, where not 0, names an I2_S weight's codes for the life of the
	// process (bng_conv2d_params' weight_id: the caller promises they never
	// change and that no other codes are passed with it). Once a GEMV has
	// read them all and found no code 3 (gemm.MarkCodesValid), later GEMVs
	// skip the check (GemvKernels.I8Valid). The layouts derived from the
	// codes are still found by comparing them (wcache.go). asI2S gives a
	// converted weight the kept conversion's own ID (derivedID; 0 where it
	// is not kept), under which its layouts are found without a compare.
	ID uint64
}

// asI2S returns w with its codes in I2_S, the layout the kernels' panel
// packing reads: TL1, TL2, TQ2_0 and TQ1_0 weights are converted (the same
// values, so every result is bit-identical to the I2_S weight's with the
// same scales; a TQ weight's scales are per 256 values, which divides K by
// its format's rule, so they are block scales the kernels take as they
// are) and the conversion is
// kept in the weight cache (wcache.go) like the other layouts: a later call
// with the same TL bytes at the same address reuses it, and the layouts
// derived from it (its address stays the same while it is kept). Where the
// cache does not keep it (BITNET_GO_WEIGHT_CACHE_MB=0, or too large), the
// conversion is marked converted and nothing derived from it is kept.
func asI2S(d *Dims, w Weights) (Weights, error) {
	if w.QType == ternary.I2S {
		return w, nil
	}
	if _, err := checkPacked(d, w); err != nil {
		return w, err
	}
	kept := true // a hit: kept when it was built
	key := layoutKey{addr: uintptr(unsafe.Pointer(unsafe.SliceData(w.Packed))), n: len(w.Packed),
		og: d.Og, groups: d.Groups, k: d.K, kind: layoutI2S, qtype: w.QType}
	l, err := layoutCache.Get(key, w.Packed, func(codes []byte) (*weightLayout, int, error) {
		i2s, err := toI2S(d, w.QType, codes)
		// buf.Cache's rule: kept when the copy and the value take at most
		// half the budget
		kept = layoutCache.MaxBytes > 0 && len(codes)+len(i2s) <= layoutCache.MaxBytes/2
		var id uint64
		if kept {
			id = derivedID()
		}
		return &weightLayout{i2s: i2s, id: id}, len(i2s), err
	})
	if err != nil {
		return w, err
	}
	w.Packed, w.QType, w.converted, w.ID = l.i2s, ternary.I2S, !kept, l.id
	return w, nil
}

// toI2S converts the TL1, TL2, TQ2_0 or TQ1_0 codes of d's weight to I2_S.
func toI2S(d *Dims, q ternary.QType, codes []byte) ([]byte, error) {
	vals := make([]int8, d.WLen)
	if err := ternary.UnpackQ(q, codes, d.O, vals); err != nil {
		return nil, errs.Value("weight: %v", err)
	}
	i2s := make([]byte, ternary.PackedLen(d.WLen))
	if err := ternary.Pack(vals, i2s); err != nil {
		return nil, err
	}
	return i2s, nil
}

// checkPacked checks w's qtype and that Packed has the bytes its format
// takes for d's weight (O rows of K values), which it returns.
func checkPacked(d *Dims, w Weights) (int, error) {
	if w.QType != ternary.I2S && w.QType != ternary.TL1 && w.QType != ternary.TL2 && !ternary.IsTQ(w.QType) {
		return 0, errs.Value("weight: qtype must be 0 (i2_s), 1 (tl1), 2 (tl2), 3 (tq2_0) or 4 (tq1_0), got %d", int32(w.QType))
	}
	want, err := ternary.PackedLenQ(w.QType, d.WLen, d.O)
	if err != nil {
		return 0, err
	}
	if len(w.Packed) != want {
		return 0, errs.Value("weight: packed must have %d bytes for %d values in %s, got %d", want, d.WLen, w.QType, len(w.Packed))
	}
	return want, nil
}
