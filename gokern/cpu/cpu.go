// Package cpu detects the processor's features (klauspost/cpuid/v2) and picks
// the kernel family that dispatch uses.
//
// Families, best first: "avx512vnni", "avx512", "avx2", "generic". A family is
// usable when the CPU reports every feature it needs, the build has assembly
// for it (never under -tags noasm), and BITNET_GO_DISABLE does not name it or
// a family it builds on.
//
// Kernels are chosen through one registry (registry.go): every op registers
// its generic Go implementation (the oracle) and one implementation per
// SIMD family, the process selects once, under the start-up Selection, and
// tests select per instance under any Selection (or take one family's
// implementation) without touching process-wide state.
package cpu

import (
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// EnvDisable is the environment variable that switches families off.
const EnvDisable = "BITNET_GO_DISABLE"

// Family names a set of kernels that share the instructions they need.
type Family string

// The families, in order of preference.
const (
	AVX512VNNI Family = "avx512vnni"
	AVX512     Family = "avx512"
	AVX2       Family = "avx2"
	Generic    Family = "generic"
)

// Families lists every family, best first.
var Families = []Family{AVX512VNNI, AVX512, AVX2, Generic}

// Features is what the CPU reports, whatever is disabled.
type Features struct {
	AVX2, FMA, AVX512F, AVX512BW, AVX512VL, AVX512VNNI, AVXVNNI bool
	Brand                                                       string
}

// Detected returns the CPU's features as cpuid/v2 reports them.
func Detected() Features {
	c := cpuid.CPU
	return Features{
		AVX2:       c.Supports(cpuid.AVX2),
		FMA:        c.Supports(cpuid.FMA3),
		AVX512F:    c.Supports(cpuid.AVX512F),
		AVX512BW:   c.Supports(cpuid.AVX512BW),
		AVX512VL:   c.Supports(cpuid.AVX512VL),
		AVX512VNNI: c.Supports(cpuid.AVX512VNNI),
		AVXVNNI:    c.Supports(cpuid.AVXVNNI),
		Brand:      c.BrandName,
	}
}

// supported reports whether the CPU has what family f needs. The 256-bit
// VPDPBUSD that the Go assembler emits is EVEX-encoded, so AVX-VNNI alone
// never qualifies a CPU for the avx512vnni family.
func (ft Features) supported(f Family) bool {
	avx2 := ft.AVX2 && ft.FMA
	avx512 := avx2 && ft.AVX512F && ft.AVX512BW && ft.AVX512VL
	switch f {
	case AVX512VNNI:
		return avx512 && ft.AVX512VNNI
	case AVX512:
		return avx512
	case AVX2:
		return avx2
	case Generic:
		return true
	}
	return false
}

// builds lists, for each family, the families it builds on: disabling one
// disables everything above it.
var builds = map[Family][]Family{
	AVX512VNNI: {AVX512VNNI, AVX512, AVX2},
	AVX512:     {AVX512, AVX2},
	AVX2:       {AVX2},
	Generic:    nil,
}

// Selection is a BITNET_GO_DISABLE setting: the families switched off and
// the names in the setting that are not families. The zero value disables
// nothing. Kernel ops select their implementation under a Selection
// (Op.Select); the process's own is Startup.
type Selection struct {
	disabled map[Family]bool
	unknown  []string
	// policy, where set, is the dispatch policy ops choose by (Op.Select);
	// without one they take the best usable family (best-first).
	policy *policy
}

// startup is the process's selection, read once from the environment:
// BITNET_GO_DISABLE's families off, BITNET_GO_DISPATCH's policy for this
// CPU's kind (dispatchIgnored: a setting that names no policy).
var startup, dispatchIgnored = func() (Selection, string) {
	s := ParseDisable(os.Getenv(EnvDisable))
	p, ignored := parseDispatch(os.Getenv(EnvDispatch), DetectedKind())
	s.policy = &p
	return s, ignored
}()

// WithDispatch returns s choosing by the dispatch policy mode
// (DispatchMeasured or DispatchBestFirst) for CPUs of kind: what a process
// on such a CPU with BITNET_GO_DISPATCH=mode would run (ParseDisable's
// selection alone is best-first).
func (s Selection) WithDispatch(mode string, kind Kind) Selection {
	p, _ := parseDispatch(mode, kind)
	s.policy = &p
	return s
}

// Dispatch returns the start-up dispatch policy (DispatchMeasured or
// DispatchBestFirst), the CPU kind it applies to, and the BITNET_GO_DISPATCH
// setting where it named no policy (then ignored).
func Dispatch() (mode string, kind Kind, ignored string) {
	return startup.policy.mode, startup.policy.kind, dispatchIgnored
}

// Startup returns the selection read from BITNET_GO_DISABLE at start-up:
// the one every op's default implementation (Op.Get) was chosen under.
func Startup() Selection { return startup }

// ParseDisable reads a comma-separated list of family names (the syntax of
// BITNET_GO_DISABLE); "all" and "asm" switch every assembly family off.
// Unknown names are kept to be reported.
func ParseDisable(v string) Selection {
	s := Selection{disabled: map[Family]bool{}}
	for _, tok := range strings.Split(v, ",") {
		tok = strings.ToLower(strings.TrimSpace(tok))
		switch tok {
		case "":
		case "all", "asm":
			s.disabled[AVX512VNNI], s.disabled[AVX512], s.disabled[AVX2] = true, true, true
		case string(AVX512VNNI), string(AVX512), string(AVX2):
			s.disabled[Family(tok)] = true
		default:
			s.unknown = append(s.unknown, tok)
		}
	}
	return s
}

// Disabled returns the families s switches off, sorted, and the names in the
// setting that are not families.
func (s Selection) Disabled() (off []string, unknown []string) {
	off = []string{}
	for f := range s.disabled {
		off = append(off, string(f))
	}
	sort.Strings(off)
	return off, append([]string{}, s.unknown...)
}

// Usable reports whether kernels of family f may run under s: the CPU
// supports it, the build has assembly for it, and s disables neither it nor
// a family it builds on.
func (s Selection) Usable(f Family) bool {
	if f == Generic {
		return true
	}
	return s.usableOn(Detected(), asmBuilt, f)
}

// usableOn is Usable on a CPU with features ft and a build with assembly
// (asm) or without.
func (s Selection) usableOn(ft Features, asm bool, f Family) bool {
	if f == Generic {
		return true
	}
	if !asm || !ft.supported(f) {
		return false
	}
	for _, dep := range builds[f] {
		if s.disabled[dep] {
			return false
		}
	}
	return true
}

// Pick returns the best family usable under s among those a kernel
// implements (Generic is always implied), best-first whatever s's dispatch
// policy (Op.Select applies that).
func (s Selection) Pick(implemented ...Family) Family {
	for _, f := range Families {
		if f != Generic && slices.Contains(implemented, f) && s.Usable(f) {
			return f
		}
	}
	return Generic
}

// Disabled returns the start-up selection's disabled families and unknown
// names (Startup().Disabled()).
func Disabled() (off []string, unknown []string) { return startup.Disabled() }

// Usable reports whether family f is usable under the start-up selection.
func Usable(f Family) bool { return startup.Usable(f) }

// Pick returns the best family usable under the start-up selection among
// those implemented.
func Pick(implemented ...Family) Family { return startup.Pick(implemented...) }

// Best returns the best family this CPU and build may use at all.
func Best() Family { return Pick(Families...) }

// AsmBuilt reports whether this build contains assembly kernels (false under
// -tags noasm and on other architectures).
func AsmBuilt() bool { return asmBuilt }

// InUse returns the best family any registered op selected (Generic if
// none did): the "kernel family that dispatch picked" reported to users.
func InUse() Family {
	best := Generic
	for _, f := range Kernels() {
		if rank(f) < rank(best) {
			best = f
		}
	}
	return best
}

func rank(f Family) int {
	for i, g := range Families {
		if g == f {
			return i
		}
	}
	return len(Families)
}
