//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
)

// The casts' AVX2 kernel (gokern/cast, cast_amd64.go registers it; the
// generic Go bf16ToF32 is its oracle).

// castAVX2 emits gokern/cast/cast_avx2_amd64.s.
var castAVX2 = kernels(bf16WidenAVX2)

// bf16WidenAVX2 widens 32 bfloat16 values per iteration: VPMOVZXWD zero
// extends 8 of them to dwords, VPSLLD 16 moves the bits to the top half.
func bf16WidenAVX2(c *build.Context) {
	declareNoescape(c, "bf16WidenAVX2", "func(dst []float32, src []uint16)",
		"bf16WidenAVX2 writes the float32 values of the first len(src)/32*32 bfloat16",
		"bits of src into dst (len(dst) >= that): each value's bits shifted up 16.",
	)
	args := loadArgs(c, "dst.base", "src.base", "src.len")
	d, s, n := args[0], args[1], args[2]
	c.SHRQ(operand.Imm(5), n)
	whileAtLeast(c, "loop", "done", n, 1, func() {
		for k := 0; k < 4; k++ {
			r := c.YMM()
			c.VPMOVZXWD(mem(s, 16*k), r)
			c.VPSLLD(operand.Imm(16), r, r)
			c.VMOVDQU(r, mem(d, 32*k))
		}
		c.ADDQ(operand.Imm(64), s)
		c.ADDQ(operand.Imm(128), d)
	})
	c.Label("done")
	vzeroRet(c)
}
