package gemm

import "testing"

// TestPeak: every family reports positive rates with their mixes (none for
// the generic kernels), and the int8 mix beats float32 FMA (it does on
// every SIMD family: 2 to 4 times the operations an instruction).
func TestPeak(t *testing.T) {
	for _, ks := range Families() {
		r := ks.Peak()
		if ks == Generic() {
			if r != (PeakRates{}) {
				t.Errorf("generic kernels: %+v, want none", r)
			}
			continue
		}
		if r.F32 <= 0 || r.I8 <= 0 || r.F32Mix == "" || r.I8Mix == "" {
			t.Fatalf("%s: %+v", ks.Family, r)
		}
		if r.I8 <= r.F32 {
			t.Errorf("%s: int8 %.0f Gops/s <= float32 %.0f", ks.Family, r.I8, r.F32)
		}
		t.Logf("%s: %+v", ks.Family, r)
	}
}
