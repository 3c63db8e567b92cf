package qlinear

import "math"

// Requant is the epilogue of every integer path (see the package comment):
// from int32 products to quantized outputs, or to float32 (dynamic linear).
// Per-channel slices have one entry per output channel.
type Requant struct {
	ColTerm []int32   // za*(colsum(n) - K*zw(n))
	ZW      []int32   // zw(n)
	BiasQ   []float32 // the bias in accumulator units (nil: no bias)
	Mult    []float32 // float32(sa*sw(n)) / so
	ZO      int32
	Lo, Hi  int32 // the output range, Lo = max(zo, type's min) when ReLU is fused
	// ZWZero: every ZW is 0 (symmetric weights), so the kernels may leave
	// out zw*rowsum (false is always right).
	ZWZero bool
	// Float output (dynamic linear): out = float32(raw)*Scale(n) + Bias(n).
	Scale []float32 // float32(sa*sw(n))
	Bias  []float32
}

// Raw returns raw for a product acc of row sum rowsum and channel n.
func (r *Requant) Raw(acc, rowsum int32, n int) int32 {
	return acc - r.ColTerm[n] - r.ZW[n]*rowsum
}

// Quant returns the output code of channel n for raw (int32; uint8 codes
// 0..255 or int8 codes -128..127 as int32).
func (r *Requant) Quant(raw int32, n int) int32 {
	rf := float32(raw)
	if r.BiasQ != nil {
		rf += r.BiasQ[n]
	}
	ab := rf * r.Mult[n]
	return clampRound(ab, r.ZO, r.Lo, r.Hi)
}

// clampRound returns clamp(lrintf(v) + zo, lo, hi) (NaN: lo).
func clampRound(v float32, zo, lo, hi int32) int32 {
	f := math.RoundToEven(float64(v)) + float64(zo)
	switch {
	case f >= float64(hi):
		return hi
	case f >= float64(lo):
		return int32(f)
	default:
		return lo
	}
}

// RowFloat writes float32(raw)*Scale(n) (+ Bias(n)) for channels
// n0..n0+len(acc)-1 to out[j*stride], or adds it there when add is set.
func (r *Requant) RowFloat(acc []int32, rowsum int32, n0 int, out []float32, stride int, add bool) {
	for j, a := range acc {
		n := n0 + j
		v := float32(float32(r.Raw(a, rowsum, n)) * r.Scale[n]) // explicit rounding: never fused with the add
		if r.Bias != nil {
			v += r.Bias[n]
		}
		if add {
			v += out[j*stride]
		}
		out[j*stride] = v
	}
}

// ChannelParams fills Mult, BiasQ (from bias; nil: none) and Scale for
// activation scale sa, weight scales sw (one: per tensor, or one per
// channel) and output scale so, over n channels, as torch computes them
// (into r's slices where long enough).
func (r *Requant) ChannelParams(n int, sa float32, sw []float32, so float32, bias []float32) {
	r.Mult = resize(r.Mult, n)
	r.Scale = resize(r.Scale, n)
	if bias != nil {
		r.BiasQ = resize(r.BiasQ, n)
	} else {
		r.BiasQ = nil
	}
	channelParams(r.Scale, r.Mult, r.BiasQ, sa, sw, so, bias)
}

// channelParams is ChannelParams' arithmetic over len(scale) channels
// (biasq nil: no bias): per tensor one product and one division for all
// of them, per channel a loop each without branches (4096 channels, per
// tensor: 4.2 us -> under 1; the divisions of the per-channel loop stay).
func channelParams(scale, mult, biasq []float32, sa float32, sw []float32, so float32, bias []float32) {
	n := len(scale)
	mult = mult[:n]
	if len(sw) == 1 {
		atw := sa * sw[0]
		m := atw / so
		for i := range scale {
			scale[i], mult[i] = atw, m
		}
		if biasq != nil {
			rcp := float32(1.0 / float64(sa*sw[0]))
			bias = bias[:len(biasq)]
			for i, b := range bias {
				biasq[i] = b * rcp
			}
		}
		return
	}
	sw = sw[:n]
	for i, s := range sw {
		atw := sa * s
		scale[i] = atw
		mult[i] = atw / so
	}
	if biasq != nil {
		bias = bias[:len(biasq)]
		scale = scale[:len(biasq)]
		for i, b := range bias {
			biasq[i] = b / scale[i]
		}
	}
}
