package conv2d

import (
	"sync/atomic"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Weight layouts kept from call to call: the A panels (PackA) and the
// implicit GEMM's blocks (gemm.PackImplicit) of a weight are derived from
// its I2_S codes on the first call and reused while later calls pass the
// same codes at the same address with the same geometry (buf.Cache
// compares the codes byte for byte, so codes changed in place are
// repacked). A layer called again, as a model's layers are, then skips the
// packing: for a 3x3 512->512 layer on 7x7 pixels, about a third of an
// int8 call. A TL1/TL2 weight's conversion to I2_S is kept the same way
// (asI2S), and with it the layouts derived from the conversion.
//
// The caller's codes are compared on every call even where it numbers them
// (Weights.ID): a user may make a tensor's read-only array writable and
// change it, and conv2d has always given the new codes' result then
// (tests_py test_weights_changed_in_place_are_repacked). A kept conversion
// to I2_S is the library's own and never changes: it gets an ID of its own
// (derivedID), under which the layouts derived from it are found without
// comparing it again (buf.Cache.GetKept), and the GEMV's code-3 check
// (gemm.CodesValid) is skipped once it has passed.

// layoutCache keeps up to buf.WeightCacheBytes (BITNET_GO_WEIGHT_CACHE_MB).
var layoutCache = &buf.Cache[layoutKey, *weightLayout]{MaxBytes: buf.WeightCacheBytes}

// layoutKey identifies a weight's layout: the codes' address and length,
// the geometry the layout depends on (the kernel's height and width apart:
// a rows-mode implicit layout differs for a 4x5 and a 5x4 kernel on the
// same codes), which layout, and the codes' format (qtype: the TL format a
// layoutI2S conversion reads; I2S otherwise).
type layoutKey struct {
	addr                      uintptr
	n                         int
	og, groups, k, cg, kh, kw int
	kind                      layoutKind
	qtype                     ternary.QType
	bl                        int    // layoutGEMV: the scale block
	id                        uint64 // a derived ID (derivedID): the codes are not compared
}

// derivedIDs counts the IDs derivedID has given out.
var derivedIDs atomic.Uint64

// derivedID returns a new ID for codes derived from a weight and kept
// unchanged while they live (a kept conversion to I2_S). They have the top
// bit set: callers number their weights from 1 up (Python's weight_id) and
// never reach it.
func derivedID() uint64 { return 1<<63 | derivedIDs.Add(1) }

// isDerived reports whether id is one derivedID gave out.
func isDerived(id uint64) bool { return id>>63 == 1 }

// layoutKind names the layouts kept.
type layoutKind uint8

const (
	layoutPanels       layoutKind = iota // the A panels
	layoutImplicit                       // the implicit GEMM's blocks
	layoutImplicitRows                   // ... in rows mode (implicitRowsMode)
	layoutI2S                            // a TL1/TL2 weight's codes converted to I2_S (asI2S)
	layoutGEMV                           // the GEMV weight, scale blocks padded to whole groups (gemvLayout)
	layoutDirectF32                      // the implicit float32 kernel's weight, scales folded in (directf.go; bl: its MR)
	layoutBlockedF32                     // its channels-in-lanes variant's weight (directfb.go)
	layoutWinogradF32                    // the Winograd transform of the weight (winograd.go)
)

// weightLayout is a derived layout: the A panels, or the implicit GEMM's
// blocks (per group, ceil(Og/ImplicitOC) blocks of blen values) and their
// corrections, or a TL weight's I2_S codes, or the GEMV rows.
type weightLayout struct {
	i2s    []byte
	apan   []byte
	blocks []int8
	corr   [][gemm.ImplicitOC]int32
	blen   int
	nob    int
	f32    []float32 // layoutDirectF32, layoutBlockedF32, layoutWinogradF32
	id     uint64    // layoutI2S kept: the conversion's ID (derivedID)
}

// keyOf returns the key of w's layout of kind (n: the bytes it is kept
// for), and whether w is a kept conversion (a derived ID, in the key), whose
// codes are then not compared.
func keyOf(d *Dims, w Weights, kind layoutKind, bl, n int) (layoutKey, bool) {
	key := layoutKey{uintptr(unsafe.Pointer(unsafe.SliceData(w.Packed))), n,
		d.Og, d.Groups, d.K, d.Cg, d.KH, d.KW, kind, ternary.I2S, bl, 0}
	own := isDerived(w.ID)
	if own {
		key.id = w.ID
	}
	return key, own
}

// cachedLayout returns w's layout from the cache or from build, which packs
// the codes it is given (a copy of w.Packed when the layout is kept).
func cachedLayout(d *Dims, w Weights, kind layoutKind, bl int, build func(Weights) (*weightLayout, int, error)) (*weightLayout, error) {
	if w.converted {
		l, _, err := build(w)
		return l, err
	}
	key, own := keyOf(d, w, kind, bl, len(w.Packed))
	get := layoutCache.Get
	if own {
		get = layoutCache.GetKept
	}
	return get(key, w.Packed, func(codes []byte) (*weightLayout, int, error) {
		w.Packed = codes
		return build(w)
	})
}

// cachedScaled is cachedLayout for a layout with w's scales folded in: kept
// under the same kind of key, and compared with the codes and the scales
// (buf.Cache.GetParts: no joined copy on a hit). build reads the scales
// through its own scaler, as the layout's users do.
func cachedScaled(d *Dims, w Weights, kind layoutKind, bl int, build func(Weights) (*weightLayout, int, error)) (*weightLayout, error) {
	if w.converted {
		l, _, err := build(w)
		return l, err
	}
	scales := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w.Scales))), 4*len(w.Scales))
	n := len(w.Packed)
	key, own := keyOf(d, w, kind, bl, n+len(scales))
	parts := [][]byte{w.Packed, scales}
	if own { // a kept conversion: only the caller's scales are compared
		parts = parts[1:]
	}
	return layoutCache.GetParts(key, parts, func(src []byte) (*weightLayout, int, error) {
		if !own {
			w.Packed = src[:n]
		}
		return build(w)
	})
}

// panels returns w's A panels (ks.PackA; every set packs the same panels).
func panels(d *Dims, w Weights, ks *gemm.Kernels) ([]byte, error) {
	l, err := cachedLayout(d, w, layoutPanels, 0, func(w Weights) (*weightLayout, int, error) {
		a, err := packPanels(d, w, ks)
		return &weightLayout{apan: a}, len(a), err
	})
	if err != nil {
		return nil, err
	}
	return l.apan, nil
}

// packPanels packs w's A panels into a new buffer.
func packPanels(d *Dims, w Weights, ks *gemm.Kernels) ([]byte, error) {
	alen, ok := mul(ternary.MaxElements, d.Groups, gemm.Panels(d.Og), d.K)
	if !ok {
		return nil, errs.Memory("weight panels would take more than %d bytes", ternary.MaxElements)
	}
	a := make([]byte, alen)
	if err := ks.PackA(a, w.Packed, d.Og, d.Groups, d.K); err != nil {
		return nil, err
	}
	return a, nil
}

// implicitWeights returns w's implicit-GEMM blocks, packed from its A
// panels: per group and block of gemm.ImplicitOC output channels, the
// weights in the kernel's order for taps kernel taps of g.cg4/4 channel
// quads each, and the corrections.
//
// In rows mode (g.rowQuads > 0) the weight is packed as that of a KH x 1
// convolution over KW*C channels (channel kw*C + c: tap kw of channel c),
// whose quads run along a kernel row as the layout's bytes do.
func implicitWeights(d *Dims, w Weights, g implicitGeom, ks *gemm.Kernels) (*weightLayout, error) {
	kind, cg, taps := layoutImplicit, d.Cg, d.KH*d.KW
	if g.rowQuads > 0 {
		kind, cg, taps = layoutImplicitRows, d.KW*d.Cg, d.KH
	}
	return cachedLayout(d, w, kind, 0, func(w Weights) (*weightLayout, int, error) {
		if g.rowQuads > 0 {
			var err error
			if w, err = rowsWeights(d, w); err != nil {
				return nil, 0, err
			}
		}
		apan, err := packPanels(d, w, ks)
		if err != nil {
			return nil, 0, err
		}
		l := &weightLayout{blen: gemm.ImplicitBlockLen(taps, ceilDivPos(cg, 4)), nob: ceilDivPos(d.Og, gemm.ImplicitOC)}
		nb := d.Groups * l.nob
		l.blocks = make([]int8, nb*l.blen)
		l.corr = make([][gemm.ImplicitOC]int32, nb)
		gpan := gemm.Panels(d.Og) * d.K
		par.Run(par.ChunksWork(nb, l.blen), func(_, lo, hi int) {
			for b := lo; b < hi && !par.Stopped(); b++ {
				gemm.PackImplicit(l.blocks[b*l.blen:][:l.blen], &l.corr[b], apan[b/l.nob*gpan:][:gpan], cg, taps, b%l.nob)
			}
		})
		return l, len(l.blocks) + 4*gemm.ImplicitOC*nb, nil
	})
}

// rowsWeights returns w (one group, d's K order c, kh, kw) with each output
// channel's values in the rows-mode order of implicitWeights: value
// (kw*C + c)*KH + kh, a KH x 1 convolution over KW*C channels. Code 3 is
// reported as packPanels reports it.
func rowsWeights(d *Dims, w Weights) (Weights, error) {
	vals := make([]int8, d.WLen)
	if err := unpackI2S(w.Packed, vals); err != nil {
		return w, err
	}
	perm := make([]int8, d.WLen)
	for o := range d.O {
		src, dst := vals[o*d.K:][:d.K], perm[o*d.K:][:d.K]
		for c := range d.Cg {
			for kh := range d.KH {
				for kw := range d.KW {
					dst[(kw*d.Cg+c)*d.KH+kh] = src[(c*d.KH+kh)*d.KW+kw]
				}
			}
		}
	}
	packed := make([]byte, ternary.PackedLen(d.WLen))
	if err := ternary.Pack(perm, packed); err != nil {
		return w, err
	}
	w.Packed = packed
	return w, nil
}
