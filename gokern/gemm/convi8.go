package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// ConvI8 is one family's set of the int8 implicit-GEMM convolution kernels
// (implicit.go): the registry op "conv_i8" (ConvI8Op), apart from the float
// and im2col kernels of "conv_gemm" so that each dispatches by its own
// measurement. gokern/ops/conv2d runs Implicit, where set, instead of
// conv_gemm's int8 im2col path, with QuantU8x16 / QuantU8x8 / QuantU8x4 writing its
// input and FoldTiles turning its sums into the output.
type ConvI8 struct {
	Family cpu.Family
	// Implicit is the implicit-GEMM kernel; nil (the generic set: the
	// scalar oracle is slower than the generic im2col kernels) leaves the
	// int8 convolutions to conv_gemm's im2col path.
	Implicit ImplicitI8
	// ImplicitPair, where set, is Implicit over two blocks at once; nil:
	// Implicit on each.
	ImplicitPair ImplicitI8Pair
	// FoldTiles turns the implicit kernels' tiles into float32 output rows
	// (every set has one: the generic set's is the oracle), and Fence
	// orders its streaming stores before any later store (a goroutine runs
	// it before it reports its work done).
	FoldTiles FoldTiles
	Fence     func()
	// QuantU8x16, QuantU8x8 and QuantU8x4 quantize activations into the
	// implicit layout.
	QuantU8x16 QuantU8x16
	QuantU8x8  QuantU8x8
	QuantU8x4  QuantU8x4
}

// ConvI8Op is the registry's op "conv_i8": one ConvI8 set per family.
var ConvI8Op = cpu.NewOp("conv_i8", &ConvI8{Family: cpu.Generic, QuantU8x16: quantU8x16Generic, QuantU8x8: quantU8x8Generic,
	QuantU8x4: quantU8x4Generic, FoldTiles: foldTilesGeneric, Fence: func() {}})

// ConvI8Families lists the conv_i8 sets compiled in and usable here, generic
// first, for tests that run every family against the oracle.
func ConvI8Families() []*ConvI8 { return ConvI8Op.Impls() }
