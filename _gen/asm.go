//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Helpers shared by the kernel files. Constants are built in registers from
// immediates rather than in DATA sections, so generated files never clash on
// symbol names inside one package.

// gpImm returns a new general register of size 4 (MOVL) or 8 (MOVQ) bytes
// holding v.
func gpImm(c *build.Context, size int, v uint64) reg.GPVirtual {
	if size == 4 {
		r := c.GP32()
		c.MOVL(operand.U32(v), r)
		return r
	}
	r := c.GP64()
	c.MOVQ(operand.U64(v), r)
	return r
}

// xmmImm returns an XMM register whose low size (4 or 8) bytes are v, moved
// in through a new general register (gpImm); the rest is zero.
func xmmImm(c *build.Context, size int, v uint64) reg.VecVirtual {
	r := gpImm(c, size, v)
	x := c.XMM()
	if size == 4 {
		c.VMOVD(r, x)
	} else {
		c.VMOVQ(r, x)
	}
	return x
}

// ymmFrom returns a new YMM register written by op(x, y), for the
// broadcasts and extensions of an XMM source.
func ymmFrom(c *build.Context, x reg.VecVirtual, op func(...operand.Op)) reg.VecVirtual {
	y := c.YMM()
	op(x, y)
	return y
}

// bcst32 returns a YMM register holding v in each 32-bit lane.
func bcst32(c *build.Context, v uint32) reg.VecVirtual {
	return ymmFrom(c, xmmImm(c, 4, uint64(v)), c.VPBROADCASTD)
}

// bcst64 returns a YMM register holding v in each 64-bit lane.
func bcst64(c *build.Context, v uint64) reg.VecVirtual {
	return ymmFrom(c, xmmImm(c, 8, v), c.VPBROADCASTQ)
}

// dwordIndex returns a YMM register holding the eight 32-bit values idx
// (each < 256), for VPERMD.
func dwordIndex(c *build.Context, idx [8]byte) reg.VecVirtual {
	var v uint64
	for i, b := range idx {
		v |= uint64(b) << (8 * i)
	}
	return ymmFrom(c, xmmImm(c, 8, v), c.VPMOVZXBD)
}

// mem returns the memory operand base+disp.
func mem(base reg.Register, disp int) operand.Mem {
	return operand.Mem{Base: base, Disp: disp}
}

// zeroed returns n new registers from alloc, each cleared by clear.
func zeroed(n int, alloc func() reg.VecVirtual, clear func(v reg.VecVirtual)) []reg.VecVirtual {
	out := make([]reg.VecVirtual, n)
	for i := range out {
		out[i] = alloc()
		clear(out[i])
	}
	return out
}

// zeroY returns n zeroed YMM registers.
func zeroY(c *build.Context, n int) []reg.VecVirtual {
	return zeroed(n, c.YMM, func(v reg.VecVirtual) { c.VPXOR(v, v, v) })
}

// zeroZ returns n zeroed ZMM registers.
func zeroZ(c *build.Context, n int) []reg.VecVirtual {
	return zeroed(n, c.ZMM, func(v reg.VecVirtual) { c.VPXORD(v, v, v) }) // EVEX: any register
}

// times3 returns a new register holding 3*r (LEAQ), for the fourth row of
// rowAddrs.
func times3(c *build.Context, r reg.Register) reg.Register {
	r3 := c.GP64()
	c.LEAQ(operand.Mem{Base: r, Index: r, Scale: 2}, r3)
	return r3
}

// maskedShift sets dst = (src >> sh) & mask in 16-bit words (sh < 0: src
// << -sh; sh 0: the AND alone), with and(mask, x, dst) as the AND (VPAND;
// VPANDD on ZMM). For 2-bit codes and a mask of whole pairs the word shift
// leaks no bit into a kept position.
func maskedShift(c *build.Context, dst, src reg.Register, mask operand.Op, sh int, and func(mask, x, dst operand.Op)) {
	switch {
	case sh > 0:
		c.VPSRLW(operand.Imm(uint64(sh)), src, dst)
		and(mask, dst, dst)
	case sh < 0:
		c.VPSLLW(operand.Imm(uint64(-sh)), src, dst)
		and(mask, dst, dst)
	default:
		and(mask, src, dst)
	}
}

// bcstParams returns a new YMM register per scalar parameter of names (4
// bytes), holding it in each 32-bit lane (VBROADCASTSS).
func bcstParams(c *build.Context, names ...string) []reg.VecVirtual {
	out := make([]reg.VecVirtual, len(names))
	for i, name := range names {
		out[i] = c.YMM()
		c.VBROADCASTSS(paramAddr(c, name), out[i])
	}
	return out
}

// paramAddr returns the memory operand of a scalar parameter.
func paramAddr(c *build.Context, name string) operand.Mem {
	b, err := c.Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// vconsts remembers, per context (one generated file), the constants made.
var vconsts = map[*build.Context]map[string]operand.Mem{}

// vconst returns a 32-byte read-only constant holding w, as a memory
// operand; name is file-local (a static symbol) and made once per file.
func vconst(c *build.Context, name string, w [8]uint32) operand.Mem {
	m := vconsts[c]
	if m == nil {
		m = map[string]operand.Mem{}
		vconsts[c] = m
	}
	if v, ok := m[name]; ok {
		return v
	}
	v := c.StaticGlobal(name)
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i, x := range w {
		c.AddDatum(4*i, operand.U32(x))
	}
	m[name] = v
	return v
}

// prefetch emits PREFETCHT0 for the cache lines of [p+dist, p+dist+bytes).
func prefetch(c *build.Context, p reg.Register, dist, bytes int) {
	for off := 0; off < bytes; off += 64 {
		c.PREFETCHT0(mem(p, dist+off))
	}
}
