package qelem

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// BenchmarkAdd times every family's AddU8 kernel (one thread) and the
// planner's Add (the process's threads) on in-cache and in-memory sizes.
func BenchmarkAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1 << 14, 1 << 20, 1 << 24} {
		qa, qb, out := randBytes(r, n), randBytes(r, n), make([]byte, n)
		x := Operand{Name: "a", DType: qtensor.U8, Shape: []int{n}, Data: qa, Scale: 0.05, ZeroPoint: 128}
		y := Operand{Name: "b", DType: qtensor.U8, Shape: []int{n}, Data: qb, Scale: 0.03, ZeroPoint: 100}
		o := Operand{Name: "out", DType: qtensor.U8, Shape: []int{n}, Data: out, Scale: 0.07, ZeroPoint: 120}
		p := NewAddParams(&x, &y, &o, false)
		for _, f := range KernelOp.Families() {
			ks, _ := KernelOp.Impl(f)
			b.Run(fmt.Sprintf("kernel/%s/n=%d", f, n), func(b *testing.B) {
				b.SetBytes(int64(3 * n))
				for b.Loop() {
					ks.AddU8(qa, qb, &p, out)
				}
			})
			b.Run(fmt.Sprintf("requant/%s/n=%d", f, n), func(b *testing.B) {
				rp := requantParams(&o)
				b.SetBytes(int64(2 * n))
				for b.Loop() {
					ks.Requant[0][0](qa, x.Scale, x.ZeroPoint, &rp, out)
				}
			})
			b.Run(fmt.Sprintf("relu/%s/n=%d", f, n), func(b *testing.B) {
				b.SetBytes(int64(2 * n))
				for b.Loop() {
					ks.ReluU8(qa, 128, out)
				}
			})
		}
		b.Run(fmt.Sprintf("Add/n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(3 * n))
			ks := KernelOp.Get()
			for b.Loop() {
				if err := Add(ks, &x, &y, &o, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
