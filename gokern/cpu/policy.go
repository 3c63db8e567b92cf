package cpu

import (
	"fmt"
	"slices"
	"strings"
)

// EnvDispatch is the environment variable that chooses the dispatch
// policy, read once at start-up: "measured" (the default) or "best-first".
const EnvDispatch = "BITNET_GO_DISPATCH"

// The dispatch policies.
const (
	// DispatchMeasured picks, per op, the family measured fastest on this
	// kind of CPU (Measurements); an op never measured on this kind runs
	// the best usable family that is not an AVX-512 one.
	DispatchMeasured = "measured"
	// DispatchBestFirst picks the best usable family in Families order,
	// AVX-512 first, whatever was measured: the order BITNET_GO_DISABLE
	// settings are written against, for benchmarks that time each family
	// (bench families) and for tests.
	DispatchBestFirst = "best-first"
)

// Measured is what a bench run found for one op on one kind of CPU.
type Measured struct {
	Fastest Family   // the family the op runs by default
	Timed   []Family // every family timed in that run (Fastest among them)
}

// Measurements holds, per CPU kind and op, the family measured fastest.
// Only ops measured on a kind have an entry; a family added to an op later
// is not chosen on that kind until it is timed there.
//
// amd-zen4, measured on 2026-11-23 with
//
//	nice -n -10 python -m bitnet_go bench families --threads 1,2 --families-rounds 5 --repeat 7
//	nice -n -10 python -m bitnet_go bench families --families-ops conv_gemm --threads 2 \
//	    --families-rounds 7 --repeat 7 --families-max-s 1
//
// on an AMD EPYC (family 25 model 17, Genoa; 2 vCPUs under a hypervisor,
// shared and busy: load average about 20) with AVX2, FMA, AVX-512
// F/DQ/CD/BW/VL/IFMA/VBMI/VBMI2/VNNI/BF16/BITALG/VPOPCNTDQ, no AVX-VNNI.
// Geometric means of median ms over each op's workloads (x the best):
// conv_gemm avx512vnni 1.45x / 1.40x, avx512 1.00x / 1.05x, avx2 1.05x /
// 1.00x, generic 23x / 17x (avx2 and avx512 tie within the noise; the
// AVX2 int8 implicit GEMM beats the VNNI im2col path about 2x, the ZMM
// float32 micro-kernel wins some layers and loses 3x3 256@14); conv_lut
// avx2 1.00x, generic 2.83x; quantize_i2s avx2, generic 8.6x; quant_quantize
// avx2, generic 9.1x; quant_dequantize avx2, generic 2.5x; quant_minmax
// avx2, generic 15x; quant_histogram avx2, generic 4.3x.
//
// conv_gemm on amd-zen4 again, measured on 2026-11-24 on the same kind of
// machine, quiet (load average about 1.5), with
//
//	python -m bitnet_go bench families --families-ops conv_gemm --threads 1,2 --families-rounds 3
//	nice -n -5 python -m bitnet_go bench families --families-ops conv_gemm --threads 1,2 --families-rounds 5
//
// avx512 1.00x / 1.00x, avx2 1.14x / 1.03x, avx512vnni 1.52x / 1.55x,
// generic 19.5x / 18.3x: avx512 fastest in both runs (14 of the 20 rows in
// the first), so it replaces the tie-broken avx2 above.
//
// Since conv_i8 took the int8 implicit GEMM and conv_directf the float32
// layers of algorithm auto, conv_gemm's kernels run the im2col GEMM (and
// the folds); its bench workloads are now those five layers with float32
// activations and algorithm="im2col". On 2026-11-24 (a quiet machine, load
// average about 1):
//
//	nice -n -5 python -m bitnet_go bench families --families-ops conv_gemm --threads 1,2 \
//	    --families-rounds 5 --repeat 7
//
// avx512vnni 1.00x (4.73 ms), avx512 1.03x, avx2 1.11x, generic 9.0x: the
// two AVX-512 families run the same float kernels (within noise), so
// avx512 stays.
//
// qlinear_dot on amd-zen4 (the same kind of machine, load average about
// 35), measured on 2026-11-24 with
//
//	nice -n -5 python -m bitnet_go bench families --families-ops qlinear_dot --threads 1,2 \
//	    --families-rounds 3 --repeat 5
//
// geometric mean over linear 4096x4096 N=1, 11008x4096 N=8, 4096x4096
// N=64 and conv 3x3 64@56, 256@14 at 1 and 2 threads: avx512vnni 1.00x
// (3.7 ms), avx2 2.08x, generic 38x; avx512vnni fastest in every row.
//
// linear_gemv on amd-zen4, measured on 2026-11-24 with
//
//	nice -n -10 python -m bitnet_go bench families --families-ops linear_gemv --threads 1,2 \
//	    --families-rounds 5 --repeat 7
//
// on the same CPU (busy: load average 7 to 25): avx512vnni 1.00x, avx2
// 1.44x, generic 69x; avx512vnni fastest on every workload (4096x4096 and
// 2560x6912, N = 1 and 8, 1 and 2 threads; 1.09x to 1.81x over avx2).
//
// qelem on amd-zen4, measured on 2026-11-24 with
//
//	nice -n -5 python -m bitnet_go bench families --families-ops qelem --threads 1,2 \
//	    --families-rounds 5 --repeat 7 --families-size 16M   (and --families-size 1M)
//
// on the same CPU (busy: load average 20 to 30, round spreads up to
// ±190%): uint8 add, median ms 16M 1 / 2 threads avx512 2.62 / 2.39, avx2
// 4.34 / 4.90, generic 115 / 169; 1M avx512 0.177 / 0.161, avx2 0.204 /
// 0.424, generic 10.2 / 6.9. Geomean avx512 1.00x, avx2 1.75x (1M) and
// 1.84x (16M); avx512 fastest in every row.
//
// conv_i8 on amd-zen4, measured on 2026-11-24 with
//
//	nice -n -5 python -m bitnet_go bench families --families-ops conv_i8 --threads 2 \
//	    --families-rounds 5 --repeat 7 --families-max-s 1
//
// on the same CPU (very busy: load average about 55, round spreads up to
// ±170%): geometric mean over the conv suite's int8 implicit-GEMM rows (3x3
// 64@56 N=1 and 8, 128@28, 256@14, 512@7 N=8, 1x1 256->64 and 64->256 @56
// N=8, the 7x7/2 stem N=1): avx512vnni 1.00x (5.5 ms), avx2 1.09x,
// generic 43x; avx512vnni fastest on 7 of the 8 rows. The same command
// again (load average about 55, spreads up to ±170%): avx512vnni 1.00x
// (4.2 ms), avx2 1.26x, generic 64x; avx512vnni fastest on all 8 rows.
//
// conv_directf on amd-zen4 (the implicit float32 convolution), measured on
// 2026-11-24 on the same kind of machine (busy: load average 9 to 23,
// round spreads up to ±267%) with
//
//	nice -n -5 python -m bitnet_go bench families --families-ops conv_directf --threads 2 \
//	    --families-rounds 3 --repeat 5
//	nice -n -5 python -m bitnet_go bench families --families-ops conv_directf --threads 1,2 \
//	    --families-rounds 5 --repeat 7
//
// geometric mean over 3x3 64@56 N=1, 128@28 N=8, 256@14 N=1, 512@7 N=8
// (float32 activations): avx512 1.00x / 1.00x (7.95 / 7.08 ms), avx2 1.15x
// / 1.06x, generic 15x / 12x; avx512 fastest on 3 of the 4 layers in both
// runs (avx2 on 128@28 N=8 by 7 to 30%, within the spread), 1.2x to 1.85x
// ahead on 512@7 N=8. Again after the op took the 1x1 and strided layers
// (the same day, load average 12 to 30), with the workloads of
// conv_gemm's five layers and the 7x7/2 stem:
//
//	nice -n -5 python -m bitnet_go bench families --families-ops conv_directf --threads 1,2 \
//	    --families-rounds 5 --repeat 7
//
// avx512 1.00x (5.47 ms), avx2 1.28x, generic 15x; avx512 fastest on 10
// of the 12 rows (avx2 on 128@28 N=8 and 256@14 at one thread, by 4-5%).
//
// cast_f16 (the bfloat16 -> float16 rounding, AVX2 + F16C) and cast_bf16
// (the bfloat16 -> float32 widening) on amd-zen4, measured on 2026-11-24 on
// the same kind of machine (load average about 1, one other helper's
// builds beside it) with
//
//	nice -n -5 python -m bitnet_go bench families --families-ops cast_f16,cast_bf16 --threads 1,2 \
//	    --families-rounds 5 --repeat 7
//
// 16M random bfloat16 patterns (NaNs among them), median ms 1 / 2 threads:
// cast_f16 avx2 5.54 / 5.80, generic 13.8 / 14.1 (geomean 2.46x);
// cast_bf16 avx2 8.77 / 9.14, generic 15.1 / 15.6 (1.72x); avx2 fastest in
// every row, the spreads under ±17%. Both are bound by the output array's
// first-touch page faults (at 16M a second thread gains nothing); the kernels
// alone (go test -bench Narrow, 1M values in cache) run 6x (bfloat16) and
// 130x (float32 -> float16) faster than the generic ones.
//
// quantize_i2s on amd-zen4 after the avx512 family (the one-pass kernels
// of a per-tensor scale in AVX-512, float32 and bfloat16), measured on
// 2026-11-24 on the same kind of machine (quiet: load average 0.2) with
//
//	nice -n -5 python -m bitnet_go bench families --families-ops quantize_i2s --threads 1,2 \
//	    --families-rounds 5 --repeat 7
//
// 16M float32 and 16M bfloat16 values (the converter's path), median ms 1
// / 2 threads: float32 avx512 4.19 / 2.34, avx2 4.76 / 2.67, generic 33.4 /
// 18.0; bfloat16 avx512 4.45 / 2.40, avx2 5.87 / 2.99, generic 38.6 / 21.4.
// Geomean avx512 1.00x (3.20 ms), avx2 1.21x, generic 8.3x; avx512 fastest
// in every row (1.13x to 1.32x over avx2).
//
// conv_dw on amd-zen4 (the depthwise convolution's taps kernels), measured
// on 2026-11-24 on the same kind of machine (2 vCPUs shared with another
// build: load average 1 to 2, round spreads up to ±215%) with
//
//	nice -n -5 python -m bitnet_go bench families --families-ops conv_dw --threads 1,2 \
//	    --families-rounds 3 --repeat 5
//	nice -n -5 python -m bitnet_go bench families --families-ops conv_dw --threads 1,2 \
//	    --families-rounds 5 --repeat 7
//
// geometric mean over depthwise 3x3 32@112 N=1, 3x3/2 96@112 N=1, 3x3
// 144@56 N=8, 576@14 N=8, 960@7 N=8 and 5x5 240@14 N=1, float32 and int8
// activations: avx512 1.00x / 1.00x (0.98 / 0.84 ms), avx2 1.06x / 1.06x,
// generic 3.3x / 3.6x (the two SIMD families run the same Go around their
// kernels; they tie within the spread on most rows). Re-measured on
// 2026-11-24 (same kind of machine, AMD EPYC Zen 4, 2 vCPUs, round spreads
// up to ±183%) after the lanes kernels (16 / 8 channels a vector: float32,
// and int8 with one scale block on planes up to 56x56 or stride 2; the
// rows kernels for 3 and 5 columns at stride 1) with
//
//	python -m bitnet_go bench families --families-ops conv_dw --threads 1,2 \
//	    --families-rounds 3 --repeat 5
//
// geometric mean over the same workloads, float32 and int8, 1 and 2
// threads: avx512 1.00x (0.387 ms), avx2 1.08x, generic 10.8x (generic has
// no lanes kernels); avx512 fastest or within the spread on most rows
// (960@7 N=8 at 1 thread: float32 0.338 ±42% vs avx2 0.322 ±6%, int8
// 0.323 vs 0.366).
//
// intel-sapphirerapids, measured on 2026-11-24 on the device machine of
// this workplace: an Intel Xeon (family 6 model 207, Emerald Rapids, 16
// cores under Firecracker, quiet: load average 0.1) with AVX2, FMA, F16C,
// AVX-512 F/DQ/CD/BW/VL/IFMA/VBMI/VBMI2/VNNI/BF16/FP16/BITALG/VPOPCNTDQ,
// AVX-VNNI and AMX, each op in its own process:
//
//	python -m bitnet_go bench families --families-ops OP --threads 1,2 \
//	    --families-rounds 3 --repeat 5 --families-max-s 1
//
// Geometric means of median ms over each op's workloads (x the best; the
// rounds spread up to ±50% on single rows): conv_gemm avx512vnni 1.00x
// (5.1 ms), avx512 1.28x, avx2 2.08x, generic 15.5x; conv_directf avx512
// 1.00x (2.9 ms), avx2 2.21x, generic 29x; conv_dw avx512 1.00x (0.71 ms),
// avx2 1.09x, generic 7.5x; conv_i8 avx512vnni 1.00x (4.3 ms), avx2 1.16x,
// generic 26x; linear_gemv avx512vnni 1.00x (0.36 ms), avx2 1.81x, generic
// 85x; qlinear_dot avx512vnni 1.00x (1.33 ms), avx2 2.81x, generic 60x;
// quantize_i2s avx512 1.00x (3.96 ms), avx2 1.49x, generic 14x; qelem
// avx512 1.00x (2.42 ms, 16M), avx2 1.12x, generic 58x; conv_lut avx2
// 1.00x, generic 2.05x; quant_quantize avx2, generic 5.8x; quant_dequantize
// avx2, generic 1.7x; quant_minmax avx2, generic 12x; quant_histogram avx2,
// generic 3.5x; cast_f16 avx2, generic 1.96x; cast_bf16 avx2, generic
// 1.86x. Unlike Zen 4, whose cores split a ZMM instruction in two halves,
// these cores run AVX-512 1.1x to 2.8x ahead of AVX2 on every op that has
// both. conv_gemm's workloads (float32 im2col) run the same ZMM float
// kernel in both AVX-512 families, so the 1.28x between them is the
// machine's noise; avx512vnni also brings VPDPBUSD to the int8 im2col
// path. quantize_tq was not timed there (it keeps avx2). conv_i8 again on
// 2026-11-25, the same machine and command, after its pair kernel and
// FoldTiles: avx512vnni 1.00x (3.65 ms), avx2 1.74x, generic 37x.
var Measurements = map[Kind]map[string]Measured{
	"amd-zen4": {
		"conv_gemm":        {Fastest: AVX512, Timed: []Family{AVX512VNNI, AVX512, AVX2, Generic}},
		"conv_directf":     {Fastest: AVX512, Timed: []Family{AVX512, AVX2, Generic}},
		"conv_dw":          {Fastest: AVX512, Timed: []Family{AVX512, AVX2, Generic}},
		"conv_lut":         {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"conv_i8":          {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX2, Generic}},
		"linear_gemv":      {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX2, Generic}},
		"quantize_i2s":     {Fastest: AVX512, Timed: []Family{AVX512, AVX2, Generic}},
		"quant_quantize":   {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"quant_dequantize": {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"quant_minmax":     {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"quant_histogram":  {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"qlinear_dot":      {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX2, Generic}},
		"qelem":            {Fastest: AVX512, Timed: []Family{AVX512, AVX2, Generic}},
		"cast_f16":         {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"cast_bf16":        {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
	},
	"intel-sapphirerapids": {
		"conv_gemm":        {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX512, AVX2, Generic}},
		"conv_directf":     {Fastest: AVX512, Timed: []Family{AVX512, AVX2, Generic}},
		"conv_dw":          {Fastest: AVX512, Timed: []Family{AVX512, AVX2, Generic}},
		"conv_lut":         {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"conv_i8":          {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX2, Generic}},
		"linear_gemv":      {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX2, Generic}},
		"quantize_i2s":     {Fastest: AVX512, Timed: []Family{AVX512, AVX2, Generic}},
		"quant_quantize":   {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"quant_dequantize": {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"quant_minmax":     {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"quant_histogram":  {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"qlinear_dot":      {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX2, Generic}},
		"qelem":            {Fastest: AVX512, Timed: []Family{AVX512, AVX2, Generic}},
		"cast_f16":         {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
		"cast_bf16":        {Fastest: AVX2, Timed: []Family{AVX2, Generic}},
	},
}

// policy is a dispatch policy with the CPU kind it applies to.
type policy struct {
	mode  string // DispatchMeasured or DispatchBestFirst
	kind  Kind
	table map[Kind]map[string]Measured
}

// parseDispatch reads a BITNET_GO_DISPATCH setting: the policy it names for
// kind, and the setting itself where it names none (then the default).
func parseDispatch(v string, kind Kind) (policy, string) {
	p := policy{mode: DispatchMeasured, kind: kind, table: Measurements}
	switch tok := strings.ToLower(strings.TrimSpace(v)); tok {
	case "", DispatchMeasured:
	case DispatchBestFirst:
		p.mode = DispatchBestFirst
	default:
		return p, v
	}
	return p, ""
}

// avx512 reports whether f is an AVX-512 family: never the default on a
// kind of CPU it was not measured fastest on.
func avx512(f Family) bool { return f == AVX512 || f == AVX512VNNI }

// choose is the dispatch policy: the family op runs among those it
// implements (Generic always), given which are usable, and why.
func (p policy) choose(op string, implemented []Family, usable func(Family) bool) (Family, string) {
	ok := func(f Family) bool { return f == Generic || (slices.Contains(implemented, f) && usable(f)) }
	firstOf := func(allowed func(Family) bool) Family {
		for _, f := range Families {
			if allowed(f) && ok(f) {
				return f
			}
		}
		return Generic
	}
	if p.mode == DispatchBestFirst {
		return firstOf(func(Family) bool { return true }), EnvDispatch + "=best-first: the best usable family"
	}
	m, measured := p.table[p.kind][op]
	if measured {
		if ok(m.Fastest) {
			return m.Fastest, fmt.Sprintf("measured fastest on %s", p.kind)
		}
		f := firstOf(func(f Family) bool { return slices.Contains(m.Timed, f) })
		return f, fmt.Sprintf("%s, measured fastest on %s, is not usable here: the best usable family timed there", m.Fastest, p.kind)
	}
	f := firstOf(func(f Family) bool { return !avx512(f) })
	return f, fmt.Sprintf("not measured on %s: the best usable family, AVX-512 ones only after a bench run on this kind", p.kind)
}
