package qlinear

import (
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// TestFamiliesPresent checks that the families this CPU can run are tested
// (an assembly family the CPU has must be among families()).
func TestFamiliesPresent(t *testing.T) {
	got := map[cpu.Family]bool{}
	for _, k := range families(t) {
		got[k.Family] = true
	}
	t.Logf("families tested: %v", got)
	if !got[cpu.Generic] {
		t.Fatal("the generic kernels are not tested")
	}
}
