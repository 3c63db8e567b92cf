package cpu

import (
	"fmt"

	"github.com/klauspost/cpuid/v2"
)

// Kind names a class of CPU whose cores time kernels alike: the vendor and
// the microarchitecture its family/model numbers belong to, e.g.
// "amd-zen4" or "intel-icelake-server". The dispatch policy (policy.go)
// keeps per kind the family measured fastest for each op. KindUnknown is
// any CPU not classed here.
type Kind string

// KindUnknown is the kind of a CPU the classes below do not cover.
const KindUnknown Kind = "unknown"

// CPUID is the identity a Kind is derived from: the vendor as cpuid/v2
// names it ("AMD", "Intel", ...) and the (display) family and model numbers.
type CPUID struct {
	Vendor        string
	Family, Model int
}

// DetectedID returns this CPU's vendor, family and model (cpuid/v2).
func DetectedID() CPUID {
	c := cpuid.CPU
	return CPUID{Vendor: c.VendorID.String(), Family: c.Family, Model: c.Model}
}

// String writes the identity as "AMD family 25 model 17".
func (id CPUID) String() string {
	return fmt.Sprintf("%s family %d model %d", id.Vendor, id.Family, id.Model)
}

// amdKinds: AMD families 17h (Zen, Zen+, Zen 2), 19h (Zen 3, Zen 4) and 1Ah
// (Zen 5), by model range (AMD's processor programming references).
var amdKinds = []struct {
	family, lo, hi int
	kind           Kind
}{
	{0x17, 0x00, 0x2f, "amd-zen1"},
	{0x17, 0x30, 0xff, "amd-zen2"},
	{0x19, 0x00, 0x0f, "amd-zen3"}, // Milan
	{0x19, 0x10, 0x1f, "amd-zen4"}, // Genoa
	{0x19, 0x20, 0x5f, "amd-zen3"}, // Vermeer, Rembrandt, Cezanne
	{0x19, 0x60, 0x7f, "amd-zen4"}, // Raphael, Phoenix
	{0x19, 0xa0, 0xaf, "amd-zen4"}, // Bergamo, Siena
	{0x1a, 0x00, 0xff, "amd-zen5"},
}

// intelKinds: Intel family 6 models.
var intelKinds = map[int]Kind{
	0x3c: "intel-haswell", 0x3f: "intel-haswell", 0x45: "intel-haswell", 0x46: "intel-haswell",
	0x3d: "intel-broadwell", 0x47: "intel-broadwell", 0x4f: "intel-broadwell", 0x56: "intel-broadwell",
	0x4e: "intel-skylake", 0x5e: "intel-skylake", 0x8e: "intel-skylake", 0x9e: "intel-skylake", // and Kaby/Coffee Lake
	0xa5: "intel-skylake", 0xa6: "intel-skylake", // Comet Lake
	0x55: "intel-skylake-server", // Skylake-SP, Cascade Lake, Cooper Lake
	0x6a: "intel-icelake-server", 0x6c: "intel-icelake-server",
	0x7d: "intel-icelake-client", 0x7e: "intel-icelake-client",
	0x8c: "intel-tigerlake", 0x8d: "intel-tigerlake",
	0xa7: "intel-rocketlake",
	0x8f: "intel-sapphirerapids", 0xcf: "intel-sapphirerapids", // and Emerald Rapids
	0xad: "intel-graniterapids", 0xae: "intel-graniterapids",
	0x97: "intel-alderlake", 0x9a: "intel-alderlake", 0xb7: "intel-alderlake", 0xba: "intel-alderlake", 0xbf: "intel-alderlake", // and Raptor Lake
	0xaa: "intel-meteorlake", 0xac: "intel-meteorlake",
}

// KindOf classes a CPU identity; KindUnknown where no class covers it.
func KindOf(id CPUID) Kind {
	switch id.Vendor {
	case cpuid.AMD.String():
		for _, k := range amdKinds {
			if id.Family == k.family && id.Model >= k.lo && id.Model <= k.hi {
				return k.kind
			}
		}
	case cpuid.Intel.String():
		if id.Family == 6 {
			if k, ok := intelKinds[id.Model]; ok {
				return k
			}
		}
	}
	return KindUnknown
}

// DetectedKind returns this CPU's kind.
func DetectedKind() Kind { return KindOf(DetectedID()) }
