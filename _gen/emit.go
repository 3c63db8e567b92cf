//go:build generate

package main

import (
	"strings"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Emitter sequences that open and close every kernel.

// declare starts the NOSPLIT function name with Go signature sig and the
// doc comment lines doc (for its stub).
func declare(c *build.Context, name, sig string, doc ...string) {
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr(sig)
	c.Doc(doc...)
}

// declareNoescape is declare with a //go:noescape stub: for kernels whose
// pointer arguments do not outlive the call.
func declareNoescape(c *build.Context, name, sig string, doc ...string) {
	declare(c, name, sig, doc...)
	c.Pragma("noescape")
}

// loadArg loads the parameter named arg into a new 64-bit general register:
// "p" is a scalar or pointer parameter, "s.base" and "s.len" the data
// pointer and length of the slice parameter s.
func loadArg(c *build.Context, arg string) reg.Register {
	name, part, _ := strings.Cut(arg, ".")
	p := c.Param(name)
	switch part {
	case "":
	case "base":
		p = p.Base()
	case "len":
		p = p.Len()
	default:
		panic("loadArg: bad parameter " + arg)
	}
	return c.Load(p, c.GP64())
}

// loadArgs is loadArg of each of args, in order.
func loadArgs(c *build.Context, args ...string) []reg.Register {
	out := make([]reg.Register, len(args))
	for i, a := range args {
		out[i] = loadArg(c, a)
	}
	return out
}

// vzeroRet ends a kernel that used YMM or ZMM registers: VZEROUPPER (no
// AVX-SSE transition penalty in the caller), RET.
func vzeroRet(c *build.Context) {
	c.VZEROUPPER()
	c.RET()
}

// vzeroReturn ends a kernel that used YMM or ZMM registers and returns r as
// its (first) result: VZEROUPPER, the store of r, RET.
func vzeroReturn(c *build.Context, r reg.Register) {
	c.VZEROUPPER()
	c.Store(r, c.ReturnIndex(0))
	c.RET()
}

// Loops. body emits the work of one iteration, pointer advances included.

// repeat emits a loop that runs body n >= 1 times (n counts down to 0):
// label top, body, DECQ n, JNZ top.
func repeat(c *build.Context, top string, n operand.Op, body func()) {
	c.Label(top)
	body()
	c.DECQ(n)
	c.JNZ(operand.LabelRef(top))
}

// whileAtLeast emits a loop that runs body while the unsigned n >= by, then
// goes on at label exit: label top, the test (TESTQ/JZ for by 1, else
// CMPQ/JB), body, n -= by (DECQ or SUBQ), JMP top. Code after it usually
// starts with label exit.
func whileAtLeast(c *build.Context, top, exit string, n reg.Register, by int, body func()) {
	c.Label(top)
	if by == 1 {
		c.TESTQ(n, n)
		c.JZ(operand.LabelRef(exit))
	} else {
		c.CMPQ(n, operand.Imm(uint64(by)))
		c.JB(operand.LabelRef(exit))
	}
	body()
	if by == 1 {
		c.DECQ(n)
	} else {
		c.SUBQ(operand.Imm(uint64(by)), n)
	}
	c.JMP(operand.LabelRef(top))
}
