// Package tests_go holds cross-package tests and the golden vectors shared
// with the Python tests (testdata/, generated from the PyTorch reference by
// testdata/gen_i2s_golden.py).
package tests_go

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

type goldenCase struct {
	Name      string    `json:"name"`
	X         []float64 `json:"x"`
	BlockSize *int      `json:"block_size"`
	Method    string    `json:"method"`
	Values    []int8    `json:"values"`
	PackedHex string    `json:"packed_hex"`
	ScaleBits []uint32  `json:"scale_bits"`
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	b, err := os.ReadFile("testdata/i2s_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 5 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	return cases
}

// TestI2SGolden checks every kernel family the CPU allows (and the generic
// one) against the golden vectors.
func TestI2SGolden(t *testing.T) {
	for _, disable := range []string{"", "all"} {
		q, _ := ternary.QuantizeOp.Select(cpu.ParseDisable(disable))
		for _, c := range loadGolden(t) {
			t.Run(string(q.Family())+"/"+c.Name, func(t *testing.T) {
				x := make([]float32, len(c.X))
				for i, v := range c.X {
					x[i] = float32(v)
				}
				bs := 0
				if c.BlockSize != nil {
					bs = *c.BlockSize
				}
				m, err := ternary.ParseMethod(c.Method)
				if err != nil {
					t.Fatal(err)
				}
				packed := make([]byte, ternary.PackedLen(len(x)))
				scales := make([]float32, ternary.NumBlocks(len(x), bs))
				if err := q.Quantize(x, bs, m, true, packed, scales); err != nil {
					t.Fatal(err)
				}
				if got := hex.EncodeToString(packed); got != c.PackedHex {
					t.Fatalf("packed\n got %s\nwant %s", got, c.PackedHex)
				}
				for i, want := range c.ScaleBits {
					if got := math.Float32bits(scales[i]); got != want {
						t.Fatalf("scale %d bits %#x, want %#x", i, got, want)
					}
				}
				vals := make([]int8, len(x))
				if err := ternary.Unpack(packed, vals); err != nil {
					t.Fatal(err)
				}
				for i := range vals {
					if vals[i] != c.Values[i] {
						t.Fatalf("value %d = %d, want %d", i, vals[i], c.Values[i])
					}
				}
			})
		}
	}
}
