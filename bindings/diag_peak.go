package main

import (
	"encoding/json"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
)

// The diagnostics entry "peak": one core's G operations a second for the
// instruction mixes of the float32 and int8 kernels of the selected
// "conv_gemm" set (gemm.Kernels.Peak: about 30 ms of measurement), zero for
// the generic kernels, as the JSON object
// {"f32", "i8", "f32_mix", "i8_mix", "family"}. The request is ignored.
func init() { registerDiag("peak", diagPeak) }

func diagPeak(json.RawMessage) (any, error) {
	ks := gemm.KernelOp.Get()
	r := ks.Peak()
	return map[string]any{"f32": r.F32, "i8": r.I8, "f32_mix": r.F32Mix, "i8_mix": r.I8Mix,
		"family": string(ks.Family)}, nil
}
