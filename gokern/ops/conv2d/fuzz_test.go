package conv2d

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// validBig is an independent statement of Shape.Check's acceptance rule, in
// arbitrary precision, and the output size it implies.
func validBig(s Shape) (ok bool, ho, wo int64) {
	vals := []int{s.N, s.C, s.H, s.W, s.O, s.WC, s.KH, s.KW, s.Groups, s.StrideH, s.StrideW,
		s.PadT, s.PadL, s.PadB, s.PadR, s.DilH, s.DilW}
	mins := []int{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1}
	for i, v := range vals {
		if v < mins[i] || v > MaxDim {
			return false, 0, 0
		}
	}
	if s.C%s.Groups != 0 || s.O%s.Groups != 0 || s.WC*s.Groups != s.C {
		return false, 0, 0
	}
	b := func(v int) *big.Int { return big.NewInt(int64(v)) }
	prod := func(vs ...int) *big.Int {
		p := big.NewInt(1)
		for _, v := range vs {
			p.Mul(p, b(v))
		}
		return p
	}
	if prod(s.WC, s.KH, s.KW).Cmp(b(MaxK)) > 0 {
		return false, 0, 0
	}
	// Output size: the number of o >= 0 with o*stride + dil*(k-1) <= in+pads-1.
	out := func(in, lo, hi, k, stride, dil int) int64 {
		last := new(big.Int).Sub(prod(1, in+lo+hi), b(1))
		last.Sub(last, new(big.Int).Mul(b(dil), b(k-1)))
		if last.Sign() < 0 {
			return 0
		}
		return new(big.Int).Add(new(big.Int).Quo(last, b(stride)), big.NewInt(1)).Int64()
	}
	ho = out(s.H, s.PadT, s.PadB, s.KH, s.StrideH, s.DilH)
	wo = out(s.W, s.PadL, s.PadR, s.KW, s.StrideW, s.DilW)
	if ho < 1 || wo < 1 {
		return false, ho, wo
	}
	lim := b(ternary.MaxElements)
	k := int(prod(s.WC, s.KH, s.KW).Int64())
	if prod(s.N, s.C, s.H, s.W).Cmp(lim) > 0 || prod(s.O, k).Cmp(lim) > 0 ||
		new(big.Int).Mul(prod(s.N, s.O), prod(int(ho), int(wo))).Cmp(lim) > 0 {
		return false, ho, wo
	}
	return true, ho, wo
}

// FuzzConvShape fuzzes the shape arithmetic: Shape.Check never panics,
// accepts exactly the shapes validBig accepts, with the same output size and
// lengths; and on small accepted shapes every kernel runs and agrees with
// naive (the int8 path bit for bit).
func FuzzConvShape(f *testing.F) {
	f.Add(int64(1), int64(3), int64(8), int64(8), int64(4), int64(3), int64(3), int64(1),
		int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), uint64(1))
	f.Add(int64(2), int64(4), int64(5), int64(9), int64(8), int64(2), int64(4), int64(4),
		int64(2), int64(3), int64(0), int64(2), int64(1), int64(0), int64(2), int64(1), uint64(2))
	f.Add(int64(1), int64(6), int64(1), int64(1), int64(6), int64(1), int64(1), int64(2),
		int64(1), int64(1), int64(0), int64(0), int64(0), int64(0), int64(1), int64(1), uint64(3))
	f.Add(int64(0), int64(1), int64(3), int64(3), int64(1), int64(5), int64(5), int64(1),
		int64(1), int64(1), int64(0), int64(0), int64(0), int64(0), int64(1), int64(1), uint64(4))
	f.Add(int64(1), int64(1)<<31, int64(1)<<31, int64(1)<<31, int64(1), int64(1), int64(1), int64(1),
		int64(1), int64(1), int64(0), int64(0), int64(0), int64(0), int64(1), int64(1), uint64(5))
	f.Fuzz(func(t *testing.T, n, c, h, w, o, kh, kw, groups, sh, sw, pt, pl, pb, pr, dh, dw int64, seed uint64) {
		s := Shape{N: int(n), C: int(c), H: int(h), W: int(w), O: int(o), KH: int(kh), KW: int(kw),
			Groups: int(groups), StrideH: int(sh), StrideW: int(sw), PadT: int(pt), PadL: int(pl),
			PadB: int(pb), PadR: int(pr), DilH: int(dh), DilW: int(dw)}
		if groups > 0 {
			s.WC = int(c / groups)
		}
		d, err := s.Check()
		ok, ho, wo := validBig(s)
		if (err == nil) != ok {
			t.Fatalf("%+v: Check err %v, independent rule says valid=%v", s, err, ok)
		}
		if err != nil {
			if errs.KindOf(err) != errs.KindValue || err.Error() == "" {
				t.Fatalf("%+v: error %v is not a ValueError with a message", s, err)
			}
			return
		}
		if int64(d.Ho) != ho || int64(d.Wo) != wo || d.P != d.Ho*d.Wo ||
			d.XLen != d.N*d.C*d.H*d.W || d.WLen != d.O*d.K || d.OutLen != d.N*d.O*d.P || d.K != d.Cg*d.KH*d.KW {
			t.Fatalf("%+v: dims %+v, want Ho=%d Wo=%d", s, d, ho, wo)
		}
		// Small shapes: run every kernel.
		if d.XLen > 1<<12 || d.WLen > 1<<12 || d.OutLen*d.K > 1<<16 || d.N == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		tc := newCase(t, rng, s, 0, seed%2 == 0)
		if seed%3 == 0 {
			tc = newCase(t, rng, s, d.K, seed%2 == 0)
		}
		want := runKind(t, tc, Naive, false, gemm.Generic())
		want8 := runKind(t, tc, Naive, true, gemm.Generic())
		ref, mag := ref64(tc)
		checkF32(t, "fuzz naive", want, ref, mag)
		for _, kind := range kindsFor(&d)[1:] {
			checkF32(t, "fuzz "+kind.String(), runKind(t, tc, kind, false, gemm.KernelOp.Get()), ref, mag)
			checkExact(t, "fuzz "+kind.String()+" int8", runKind(t, tc, kind, true, gemm.KernelOp.Get()), want8)
		}
	})
}
