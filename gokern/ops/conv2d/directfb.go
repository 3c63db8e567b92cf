package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// The channels-in-lanes variant of the implicit float32 kernel
// (gemm.DirectF32Kernels.Blocked), for small planes, where the flat
// positions of directf.go waste lanes on the padded columns: output
// channels in the vector lanes (the family's BOC per tile), positions of one
// output row broadcast. The input is rewritten once per call into
// zero-padded planes of gemm.BlockC-channel blocks, (N, groups, C/16,
// Hp, Wp, 16) (channels past Cg zero), so that a tile reads, per (block,
// tap) offset, 16 channels of up to BNP consecutive positions;
// the weights are expanded with their scales as (groups, O/32, C/16,
// kH, kW, 16, 32) (zeros past Og and Cg), kept in the weight cache.
// Stride 1 only.

// useBlockedF32 is the planner's choice between the two layouts of the
// implicit float32 kernel: the blocked one where the family has it, the
// stride is 1 and the output rows are short: up to 28 wide for kernels
// wider than 1x1 (the 7, 14 and 28 wide ResNet planes: blocked 1.03-1.6x
// faster than flat, whose padded columns take 2/9 and 2/16 of the lanes
// at 7 and 14; flat 1.05-1.1x faster at 56), up to 7 wide for 1x1 (no
// padded columns: flat 1.04-1.4x faster at 14 and 28, blocked 1.1-1.7x at
// 7); min of 15 calls, one thread, both families.
func useBlockedF32(d *Dims, k *gemm.DirectF32Kernels) bool {
	wmax := 28
	if d.KH*d.KW == 1 {
		wmax = 7
	}
	return k.Blocked != nil && d.Wo <= wmax && d.StrideH == 1 && d.StrideW == 1
}

// blockedWeights returns the weight in the blocked tiles' order, cached
// like directWeights (codes and scales compared).
func blockedWeights(d *Dims, w Weights, sc *scaler, boc int) ([]float32, error) {
	const bc = gemm.BlockC
	nob, ncb, khw := ceilDivPos(d.Og, boc), ceilDivPos(d.Cg, bc), d.KH*d.KW
	per := ncb * khw * bc * boc // per group and block of output channels
	n, ok := mul(ternary.MaxElements, d.Groups, nob, per)
	if !ok {
		return nil, errs.Memory("expanded weight would take more than %d values", ternary.MaxElements)
	}
	return expandedF32(d, w, layoutBlockedF32, boc, n, func(vals []int8, out []float32) {
		par.Run(par.ChunksWork(d.Groups*nob, per), func(_, lo, hi int) {
			for bi := lo; bi < hi; bi++ {
				g, ob := bi/nob, bi%nob
				dst := out[bi*per:][:per]
				for j := range min(boc, d.Og-ob*boc) {
					o := g*d.Og + ob*boc + j
					row := vals[o*d.K:][:d.K]
					for kk, v := range row {
						c, tap := kk/khw, kk%khw
						dst[((c/bc*khw+tap)*bc+c%bc)*boc+j] = float32(v) * sc.scale(o, kk/sc.bl)
					}
				}
			}
		})
	})
}

// blockInput writes x into dst as (N, groups, ncb, Hp, Wp, 16), zero
// padded (rows, columns, channels past Cg), each row's channels
// transposed by k.Transpose.
func blockInput(d *Dims, g directGeom, ncb int, x, dst []float32, k *gemm.DirectF32Kernels) {
	const bc = gemm.BlockC
	blocks := d.N * d.Groups * ncb
	par.Run(par.ChunksWork(blocks, bc*g.plane*passWork), func(_, lo, hi int) {
		for bi := lo; bi < hi && !par.Stopped(); bi++ {
			cb := bi % ncb
			ng := bi / ncb // n*groups + group
			c0 := ng*d.Cg + cb*bc
			nc := min(bc, d.Cg-cb*bc)
			p := dst[bi*g.plane*bc:][:g.plane*bc]
			clear(p[:d.PadT*g.wp*bc])
			for ih := range d.H {
				row := p[(d.PadT+ih)*g.wp*bc:][:g.wp*bc]
				clear(row[:d.PadL*bc])
				clear(row[(d.PadL+d.W)*bc:])
				mid := row[d.PadL*bc:][:d.W*bc]
				if nc < bc {
					clear(mid)
				}
				k.Transpose(mid, bc, x[(c0*d.H+ih)*d.W:], d.H*d.W, nc, d.W)
			}
			clear(p[(d.PadT+d.H)*g.wp*bc:])
		}
	})
}

// blockedConvF32 runs the implicit float32 convolution in the blocked
// layout with k.Blocked.
func blockedConvF32(d *Dims, w Weights, x []float32, sc *scaler, out []float32, k *gemm.DirectF32Kernels) error {
	const bc = gemm.BlockC
	boc := k.BOC
	wb, err := blockedWeights(d, w, sc, boc)
	if err != nil {
		return err
	}
	g := newDirectGeom(d)
	nob, ncb, khw := ceilDivPos(d.Og, boc), ceilDivPos(d.Cg, bc), d.KH*d.KW
	xlen, ok := mul(ternary.MaxElements, d.N, d.Groups, ncb, g.plane, bc)
	if !ok {
		return errs.Memory("blocked input would take more than %d values", ternary.MaxElements)
	}
	xb, h := directScratch.Sized(xlen)
	defer directScratch.Put(h)
	blockInput(d, g, ncb, x, xb, k)

	offs := make([]int, ncb*khw)
	for i := range offs {
		cb, tap := i/khw, i%khw
		offs[i] = ((cb*g.hp+tap/d.KW*d.DilH)*g.wp + tap%d.KW*d.DilW) * bc
	}
	bias := make([]float32, d.Groups*nob*boc)
	if sc.bias != nil {
		for gi := range d.Groups {
			copy(bias[gi*nob*boc:], sc.bias[gi*d.Og:][:d.Og])
		}
	}
	per := ncb * khw * bc * boc
	// Units: (group, block of output channels, sample, output row, piece
	// of the row), the row's pieces fastest: a worker's run of units
	// reuses one block's weights, and reads every sample's input once per
	// block; or, where that reads more (sampleOuter: the inputs of all
	// samples times the blocks exceed the weights times the samples, as
	// in 128@28 N=8), sample before block: every sample's input stays in
	// cache while the blocks' weights pass once per sample.
	npc := ceilDivPos(d.Wo, k.BNP) // pieces per row, of even size
	wpc := ceilDivPos(d.Wo, npc)
	units := d.Groups * nob * d.N * d.Ho * npc
	xs1, w1 := ncb*g.plane*bc, nob*per // one sample's input, one group's weights
	sampleOuter := w1*(d.N-1) < xs1*d.N*(nob-1)
	par.Run(par.ChunksWork(units, wpc*boc*d.K), func(_, lo, hi int) {
		t := make([]float32, k.BNP*boc)
		for u := lo; u < hi && !par.Stopped(); u++ {
			pc, oh := u%npc, u/npc%d.Ho
			n, ob, gi := u/(npc*d.Ho)%d.N, u/(npc*d.Ho*d.N)%nob, u/(npc*d.Ho*d.N*nob)
			if sampleOuter {
				ob, n = u/(npc*d.Ho)%nob, u/(npc*d.Ho*nob)%d.N
			}
			ow0 := pc * wpc
			np := min(wpc, d.Wo-ow0)
			xs := xb[((n*d.Groups+gi)*ncb*g.plane+oh*g.wp+ow0)*bc:]
			bi := gi*nob + ob
			k.Blocked(len(offs), wb[bi*per:][:per], xs, offs, bias[bi*boc:][:boc], t, np)
			// the tile's np x boc values, position-major, into the
			// channels' rows of out
			k.Transpose(out[((n*d.O+gi*d.Og+ob*boc)*d.Ho+oh)*d.Wo+ow0:], d.Ho*d.Wo, t, boc, np, min(boc, d.Og-ob*boc))
		}
	})
	return nil
}
