// Package cpu detects the processor's features (klauspost/cpuid/v2) and picks
// the kernel family that dispatch uses.
//
// Families, best first: "avx512vnni", "avx512", "avx2", "generic". A family is
// usable when the CPU reports every feature it needs, the build has assembly
// for it (never under -tags noasm), and BITNET_GO_DISABLE does not name it or
// a family it builds on. Kernel packages call Pick once at start-up (and again
// in tests after Override) and keep the generic Go version as the oracle.
package cpu

import (
	"os"
	"sort"
	"strings"
	"sync"

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

type state struct {
	disabled map[Family]bool
	unknown  []string
}

var (
	mu  sync.RWMutex
	cur = parseDisable(os.Getenv(EnvDisable))
)

// parseDisable reads a comma-separated list of family names; "all" and "asm"
// switch every assembly family off. Unknown names are kept to be reported.
func parseDisable(v string) state {
	s := state{disabled: map[Family]bool{}}
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

// Override replaces the BITNET_GO_DISABLE setting (same syntax) for the rest
// of the process; kernel packages must re-run their selection afterwards. It
// exists for tests and benchmarks.
func Override(disable string) {
	s := parseDisable(disable)
	mu.Lock()
	cur = s
	mu.Unlock()
}

// Disabled returns the families switched off, sorted, and the names in the
// setting that are not families.
func Disabled() (off []string, unknown []string) {
	mu.RLock()
	defer mu.RUnlock()
	off = []string{}
	for f := range cur.disabled {
		off = append(off, string(f))
	}
	sort.Strings(off)
	return off, append([]string{}, cur.unknown...)
}

// Usable reports whether kernels of family f may run here: the CPU supports
// it, the build has assembly for it, and it is not disabled.
func Usable(f Family) bool {
	if f == Generic {
		return true
	}
	if !asmBuilt || !Detected().supported(f) {
		return false
	}
	mu.RLock()
	defer mu.RUnlock()
	for _, dep := range builds[f] {
		if cur.disabled[dep] {
			return false
		}
	}
	return true
}

// Pick returns the best usable family among those a kernel implements
// (Generic is always implied).
func Pick(implemented ...Family) Family {
	for _, f := range Families {
		if f == Generic {
			return Generic
		}
		for _, g := range implemented {
			if g == f && Usable(f) {
				return f
			}
		}
	}
	return Generic
}

// Best returns the best family this CPU and build may use at all.
func Best() Family { return Pick(Families...) }

// AsmBuilt reports whether this build contains assembly kernels (false under
// -tags noasm and on other architectures).
func AsmBuilt() bool { return asmBuilt }

var (
	kmu     sync.Mutex
	kernels = map[string]Family{}
)

// Record notes which family a kernel's dispatch picked, for reporting.
func Record(kernel string, f Family) {
	kmu.Lock()
	kernels[kernel] = f
	kmu.Unlock()
}

// Kernels returns, for each kernel that dispatched, the family it picked.
func Kernels() map[string]Family {
	kmu.Lock()
	defer kmu.Unlock()
	out := make(map[string]Family, len(kernels))
	for k, f := range kernels {
		out[k] = f
	}
	return out
}

// InUse returns the best family any kernel picked (Generic if none did):
// the "kernel family that dispatch picked" reported to users.
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
