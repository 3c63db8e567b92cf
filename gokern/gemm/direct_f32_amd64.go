//go:build !noasm && amd64

package gemm

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// The conv_directf families (assembly from _gen/convf.go): avx2 tiles of 4
// channels x 8-position YMM vectors (blocked: 16 channels x up to 6
// positions), avx512 (and avx512vnni, the same kernels) of 8 channels x
// 16-position ZMM vectors (blocked: 32 channels x up to 14 positions).
var (
	_ = DirectF32Op.Register(cpu.AVX2, &DirectF32Kernels{Family: cpu.AVX2, MR: 4, Lanes: 8, NV: 3,
		Tile:    directTile(4, 8, 3, [3]directAsm{directF32Y4x1, directF32Y4x2, directF32Y4x3}),
		Blocked: blockedTile(16, blockedY[:]), BOC: 16, BNP: len(blockedY),
		WinoIn: winoInAsm(winoInY), WinoOut: winoOutAsm(16, winoOutY), TBlock: tblockAsm(8, transposeBlockY), TB: 8})
	_ = DirectF32Op.Register(cpu.AVX512, &DirectF32Kernels{Family: cpu.AVX512, MR: 8, Lanes: 16, NV: 3,
		Tile: directTile(8, 16, 3, [3]directAsm{directF32Z8x1, directF32Z8x2, directF32Z8x3}), Blocked: blockedTile(32, blockedZ[:]), BOC: 32, BNP: len(blockedZ),
		WinoIn: winoInAsm(winoInZ), WinoOut: winoOutAsm(32, winoOutZ), TBlock: tblockAsm(16, transposeBlockZ), TB: 16})
)

// directAsm is the signature of the generated tiles.
type directAsm func(k int, w *float32, x *float32, offs *int, bias *float32, t *float32, ldt int)

// directTile wraps the tiles of nv = 1 .. NV vectors as a checked Tile.
func directTile(mr, lanes, maxNV int, fns [3]directAsm) func(k int, w, x []float32, offs []int, bias, t []float32, ldt, nv int) {
	return func(k int, w, x []float32, offs []int, bias, t []float32, ldt, nv int) {
		checkDirectF32(mr, lanes, maxNV, k, w, x, offs, bias, t, ldt, nv)
		fns[nv-1](k, unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(offs), unsafe.SliceData(bias),
			unsafe.SliceData(t), ldt)
	}
}

// blockedAsm is the signature of the generated channels-in-lanes tiles.
type blockedAsm func(n int, w *float32, x *float32, offs *int, bias *float32, t *float32)

var (
	blockedZ = [...]blockedAsm{directF32B2x1, directF32B2x2, directF32B2x3, directF32B2x4, directF32B2x5,
		directF32B2x6, directF32B2x7, directF32B2x8, directF32B2x9, directF32B2x10, directF32B2x11, directF32B2x12,
		directF32B2x13, directF32B2x14}
	blockedY = [...]blockedAsm{directF32Y2x1, directF32Y2x2, directF32Y2x3, directF32Y2x4, directF32Y2x5, directF32Y2x6}
)

// blockedTile wraps the tiles of 1 .. len(fns) positions (boc output
// channels) as a checked Blocked.
func blockedTile(boc int, fns []blockedAsm) func(n int, w, x []float32, offs []int, bias, t []float32, np int) {
	return func(n int, w, x []float32, offs []int, bias, t []float32, np int) {
		checkBlockedF32(boc, len(fns), n, w, x, offs, bias, t, np)
		fns[np-1](n, unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(offs), unsafe.SliceData(bias),
			unsafe.SliceData(t))
	}
}

// winoAsm is the signature of the generated Winograd transforms.
type winoAsm func(nt int, src *float32, ld int, dst *float32, ldd int)

// winoInAsm wraps a generated input transform as a checked WinoIn.
func winoInAsm(fn winoAsm) func(nt int, x []float32, ld int, v []float32, ldv int) {
	return func(nt int, x []float32, ld int, v []float32, ldv int) {
		checkWino(true, 0, nt, x, ld, v, ldv)
		fn(nt, unsafe.SliceData(x), ld, unsafe.SliceData(v), ldv)
	}
}

// winoOutAsm wraps a generated output transform of oc channels as a
// checked WinoOut.
func winoOutAsm(oc int, fn winoAsm) func(nt int, m []float32, ldm int, y []float32, ldy int) {
	return func(nt int, m []float32, ldm int, y []float32, ldy int) {
		checkWino(false, oc, nt, m, ldm, y, ldy)
		fn(nt, unsafe.SliceData(m), ldm, unsafe.SliceData(y), ldy)
	}
}

// tblockAsm wraps a generated b x b block transpose as a checked TBlock.
func tblockAsm(b int, fn func(m *float32, ldm int, t *float32, ldt int)) func(m []float32, ldm int, t []float32, ldt int) {
	return func(m []float32, ldm int, t []float32, ldt int) {
		checkTBlock(b, m, ldm, t, ldt)
		fn(unsafe.SliceData(m), ldm, unsafe.SliceData(t), ldt)
	}
}
