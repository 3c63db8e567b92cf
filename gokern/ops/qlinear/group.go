package qlinear

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
)

// LinearGrouped computes out = the quantized x·wᵀ + bias for weights with
// one scale and zero point per group of K/G consecutive values of each
// channel (int4 per-group weights, ternary weights with blocks shorter than
// a row): per group g an exact int32 raw_g (Linear's raw over the group's
// values), then in float32, groups in order,
//
//	y = sum_g float32(float32(raw_g) * float32(sa*sw(n,g)))   (each product rounded, no FMA)
//	y = y + bias(n)
//	out = clamp(lrintf(y / so) + zo, lo, hi)
//
// scales and zeros hold N*G values (channel-major: n*G+g).
func LinearGrouped(k *Kernels, M, N, K, G int, x Act, w []byte, scales []float32, zeros []int32, bias []float32, o Output, out []byte) (Info, error) {
	if G < 1 || K%G != 0 {
		return Info{}, errs.Value("the groups (%d) must divide K = %d", G, K)
	}
	if len(scales) != N*G || len(zeros) != N*G {
		return Info{}, errs.Value("weight: want %d scales and zero points (%d channels x %d groups), got %d and %d", N*G, N, G, len(scales), len(zeros))
	}
	if err := checkParams(x, Weight{Scales: scales[:1], Zeros: zeros[:1]}, &o, N); err != nil {
		return Info{}, err
	}
	for _, s := range scales {
		if err := quant.CheckScale("weight scales", "", s); err != nil {
			return Info{}, err
		}
	}
	bs := K / G
	kp := roundUp(bs, KB)
	y := make([]float32, M*N)
	xg := make([]byte, M*bs)
	wg := make([]byte, N*bs)
	sw := make([]float32, N)
	zw := make([]int32, N)
	for g := 0; g < G; g++ {
		for m := 0; m < M; m++ {
			copy(xg[m*bs:(m+1)*bs], x.Data[m*K+g*bs:])
		}
		for n := 0; n < N; n++ {
			copy(wg[n*bs:(n+1)*bs], w[n*K+g*bs:])
			sw[n], zw[n] = scales[n*G+g], zeros[n*G+g]
		}
		xa := x
		xa.Data = xg
		a, rs, za := packAct(xa, M, bs, kp, kp)
		wgt := Weight{Data: wg, Scales: sw, Zeros: zw}
		rows, ldw, cs := packWeight(wgt, N, bs, kp)
		zws := zeroPointsInto(nil, wgt, N)
		r := requant(N, bs, za, zws, cs, x.Scale, sw, nil, nil)
		r.Bias = nil
		gm := &gemm{M: M, N: N, K: bs, kp: kp, A: a, lda: kp, W: rows, ldw: ldw, RowSum: rs, R: r,
			OutF: y, rs: N, cs: 1, accumulate: g > 0}
		gm.run(k)
	}
	lo, hi := outRange(o)
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			v := y[m*N+n]
			if bias != nil {
				v += bias[n]
			}
			out[m*N+n] = byte(clampRound(v/o.Scale, o.Zero, lo, hi))
		}
	}
	return Info{Kernel: kernelName("grouped_gemm", k)}, nil
}
