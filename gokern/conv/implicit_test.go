package conv

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// TestImplicitAgrees runs the implicit-GEMM driver with the generic kernel
// and with the kernel set's (where it has one) on random shapes (groups,
// strides, dilations, uneven padding, channel counts off the quad, pixel
// counts off the tile, 1 to 3 threads) and checks it bit for bit against
// the int8 reference, whatever the planner would choose.
func TestImplicitAgrees(t *testing.T) {
	old := par.Threads()
	defer func() { _ = par.SetThreads(old) }()
	splitSmall(t)
	rng := rand.New(rand.NewPCG(11, 11))
	kernels := map[string]gemm.ImplicitI8{"generic": gemm.ImplicitGeneric()}
	if k := gemm.Current().Implicit; k != nil {
		kernels[fmt.Sprint(gemm.Current().Family)] = k
	}
	for ci := range 60 {
		_ = par.SetThreads(1 + ci%3)
		s := randShape(rng)
		if ci%4 == 0 { // many channels: quads past a flush, several blocks
			s.C, s.WC, s.O = 70*s.Groups, 70, s.Groups*(17+rng.IntN(20))
		}
		d, err := s.Check()
		if err != nil || d.Depthwise() {
			continue
		}
		bs := 0
		if rng.IntN(2) == 0 {
			bs = d.K // one scale per output channel
		}
		tc := newCase(t, rng, s, bs, rng.IntN(2) == 0)
		want := ref8(tc)
		sc, err := newScaler(&tc.d, tc.w, tc.bias)
		if err != nil {
			t.Fatal(err)
		}
		a := make([]byte, gemm.ALen(d.Og, d.Groups, d.K))
		if err := gemm.PackA(a, tc.w.Packed, d.Og, d.Groups, d.K); err != nil {
			t.Fatal(err)
		}
		for name, kern := range kernels {
			acts := quantizeActs(&tc.d, tc.x)
			out := make([]float32, d.OutLen)
			implicitConv(&tc.d, a, acts, sc, out, kern)
			acts.release()
			checkExact(t, fmt.Sprintf("case %d %v implicit/%s", ci, tc, name), out, want)
		}
	}
}

// TestNHWCU8 checks the implicit layout byte by byte on shapes whose
// channel and width counts hit the 8x8 transposes, the quads and the single
// channels, with stale bytes in the scratch buffer.
func TestNHWCU8(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	for _, s := range []Shape{
		{N: 2, C: 19, H: 3, W: 21, Groups: 1, PadT: 1, PadL: 2, PadB: 0, PadR: 3},
		{N: 1, C: 12, H: 2, W: 8, Groups: 3, PadT: 0, PadL: 0, PadB: 2, PadR: 1},
		{N: 1, C: 16, H: 5, W: 7, Groups: 2},
	} {
		s.O, s.WC, s.KH, s.KW, s.StrideH, s.StrideW, s.DilH, s.DilW = s.Groups, s.C/s.Groups, 1, 1, 1, 1, 1, 1
		d, err := s.Check()
		if err != nil {
			t.Fatal(err)
		}
		q := make([]int8, d.XLen)
		for i := range q {
			q[i] = int8(rng.IntN(256) - 128)
		}
		g := newImplicitGeom(&d)
		stale, sh := layoutScratch.Sized(d.N * g.per)
		for i := range stale {
			stale[i] = 0x5a
		}
		layoutScratch.Put(sh)
		xp, xh := nhwcU8(&d, q, g)
		for n := range d.N {
			for hp := range g.hp {
				for wp := range g.wp {
					for gi := range d.Groups {
						for c := range d.Cg {
							want := byte(actZero)
							h, w := hp-d.PadT, wp-d.PadL
							if h >= 0 && h < d.H && w >= 0 && w < d.W {
								want = byte(q[((n*d.C+gi*d.Cg+c)*d.H+h)*d.W+w]) ^ actZero
							}
							at := n*g.per + (hp*g.wp+wp)*g.cp + gi*g.cg4 + c
							if xp[at] != want {
								t.Fatalf("%+v: sample %d pixel (%d, %d) group %d channel %d: %#x, want %#x",
									s, n, hp, wp, gi, c, xp[at], want)
							}
						}
					}
				}
			}
		}
		layoutScratch.Put(xh)
	}
}
