package conv2d

import (
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
	QType     ternary.QType // I2S, TL1 or TL2 (TL rows are the O output channels)
	converted bool          // Packed converted to I2_S for this call (asI2S): not cached
}

// asI2S returns w with its codes in I2_S, the layout the kernels' panel
// packing reads: TL1 and TL2 weights are converted once per call (the same
// values, so every result is bit-identical to the I2_S weight's).
func asI2S(d *Dims, w Weights) (Weights, error) {
	if w.QType == ternary.I2S {
		return w, nil
	}
	if _, err := checkPacked(d, w); err != nil {
		return w, err
	}
	vals := make([]int8, d.WLen)
	if err := ternary.UnpackQ(w.QType, w.Packed, d.O, vals); err != nil {
		return w, errs.Value("weight: %v", err)
	}
	i2s := make([]byte, ternary.PackedLen(d.WLen))
	if err := ternary.Pack(vals, i2s); err != nil {
		return w, err
	}
	w.Packed, w.QType, w.converted = i2s, ternary.I2S, true
	return w, nil
}

// checkPacked checks w's qtype and that Packed has the bytes its format
// takes for d's weight (O rows of K values), which it returns.
func checkPacked(d *Dims, w Weights) (int, error) {
	if w.QType != ternary.I2S && w.QType != ternary.TL1 && w.QType != ternary.TL2 {
		return 0, errs.Value("weight: qtype must be 0 (i2_s), 1 (tl1) or 2 (tl2), got %d", int32(w.QType))
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
