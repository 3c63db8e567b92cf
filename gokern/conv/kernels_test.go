package conv

import (
	"os"
	"os/exec"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// envFresh marks the child process of TestKernelsRecordedAtStart.
const envFresh = "BITNET_GO_TEST_FRESH_PROCESS"

// TestKernelsRecordedAtStart: cpu.Kernels lists the convolution's kernel
// ops (conv_gemm, conv_lut, quantize_i2s) from start-up, before any
// convolution runs, as the families selected. Checked in a fresh process
// running this test alone, so that no other test has run a convolution yet.
func TestKernelsRecordedAtStart(t *testing.T) {
	if os.Getenv(envFresh) == "1" {
		got := cpu.Kernels()
		for name, want := range map[string]cpu.Family{"conv_gemm": gemm.KernelOp.Get().Family,
			"conv_lut": gemm.LUT16Op.Get().Family, "quantize_i2s": ternary.QuantizeOp.Get().Family()} {
			if f, ok := got[name]; !ok || f != want {
				t.Errorf("at start-up cpu.Kernels()[%q] = %q (listed: %v), want %q", name, f, ok, want)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKernelsRecordedAtStart$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFresh+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fresh process: %v\n%s", err, out)
	}
}
