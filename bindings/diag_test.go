package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/cuda"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// TestDiagnoseArguments checks the request handling of bng_diagnostics
// (diagnose is its body; guard turns the kind into the status). Needs no GPU.
func TestDiagnoseArguments(t *testing.T) {
	cases := []struct {
		req  string
		kind errs.Kind // 0: success
		msg  string    // in the error message, or in the JSON result
	}{
		{`{"name": "list"}`, 0, `"cuda_plan","cuda_time_conv2d","cuda_time_copy","cuda_time_quantize"`},
		{`{"name": "cuda_plan", "n": 4097}`, 0, `{"passes":2,"tile":2048,"blocks":1,"workspace":256}`},
		{`{"name": "cuda_plan", "n": 16777216, "block_size": 128}`, 0, `"passes":1`},
		{`{"name": "cuda_plan", "n": 4096, "block_size": null}`, 0, `"passes":1`},
		{``, errs.KindValue, "must be a JSON object"},
		{`{"name": "list"`, errs.KindValue, "must be a JSON object"},
		{`[1, 2]`, errs.KindValue, "must be a JSON object"},
		{`null`, errs.KindValue, "must be a JSON object"},
		{`{}`, errs.KindValue, `needs a "name" string`},
		{`{"name": 3}`, errs.KindValue, `needs a "name" string`},
		{`{"name": "nope"}`, errs.KindValue, `no entry "nope" (entries: cuda_plan, cuda_time_conv2d, cuda_time_copy, cuda_time_quantize`},
		{`{"name": "cuda_plan", "n": 0}`, errs.KindValue, "at least one element"},
		{`{"name": "cuda_plan", "n": 10, "blocksize": 2}`, errs.KindValue, `cuda_plan: unknown field "blocksize"`},
		{`{"name": "cuda_plan", "n": "10"}`, errs.KindValue, "cuda_plan: cannot unmarshal string"},
		{`{"name": "cuda_plan", "n": 1.5}`, errs.KindValue, "cuda_plan: cannot unmarshal number 1.5"},
		{`{"name": "cuda_time_conv2d", "x_shape": [1, 2, 3], "repeat": 1}`, errs.KindValue, "x: width W must be >= 1, got 0"},
		{`{"name": "cuda_time_conv2d", "x_shape": [1, 2, 3, 3], "w_shape": [4, 2, 3, 3], "repeat": 1}`, errs.KindValue, "groups"},
		{`{"name": "cuda_time_conv2d", "x_shape": [1, 2, 3, 3], "w_shape": [4, 2, 3, 3], "groups": 1, "stride": [1, 1],
		  "dilation": [1, 1], "act_bits": 4, "repeat": 1}`, errs.KindValue, "act_bits must be 0 (float32 activations) or 8, got 4"},
		{`{"name": "cuda_time_conv2d", "x_shape": [1, 2, 3, 3], "w_shape": [4, 2, 3, 3], "groups": 1, "stride": [1, 1],
		  "dilation": [1, 1], "w_bytes": 64, "n_scales": 1, "repeat": 1}`, errs.KindValue, "weight: packed must have 32 bytes"},
		{`{"name": "cuda_time_conv2d", "x_shape": [1, 2, 3, 3], "w_shape": [4, 2, 3, 3], "groups": 1, "stride": [1, 1],
		  "dilation": [1, 1], "w_bytes": 32, "n_scales": 1, "work_len": 4096, "repeat": 1}`, errs.KindValue, "x is NULL"},
		{`{"name": "cuda_time_copy", "dst": -1}`, errs.KindValue, "cuda_time_copy: cannot unmarshal number -1"},
		{`{"name": "cuda_time_copy", "dev": 4294967296}`, errs.KindValue, "cannot unmarshal number 4294967296"},
		{`{"name": "cuda_time_copy", "dst": 256, "src": 512, "nbytes": 4}`, errs.KindValue, "repeat must be in [1, 1048576], got 0"},
		{`{"name": "cuda_time_copy", "dst": 256, "src": 512, "nbytes": 4, "repeat": 1048577}`, errs.KindValue, "repeat must be in"},
		{`{"name": "cuda_time_copy", "dst": 0, "src": 512, "nbytes": 4, "repeat": 2}`, errs.KindValue, "dst is NULL"},
		{`{"name": "cuda_time_copy", "dst": 256, "src": 512, "nbytes": 0, "repeat": 2}`, errs.KindValue, "nbytes and repeat must be positive"},
		{`{"name": "cuda_time_quantize", "x": 256, "n": 10, "packed": 512, "packed_len": 31, "scales": 768, "n_scales": 1, "work": 1024, "work_len": 256, "repeat": 2}`,
			errs.KindValue, "packed must have 32 bytes"},
		{`{"name": "cuda_time_quantize", "x": 256, "n": 10, "method": 9, "packed": 512, "packed_len": 32, "scales": 768, "n_scales": 1, "work": 1024, "work_len": 256, "repeat": 2}`,
			errs.KindValue, "method must be 0 (absmean) or 1 (absmax), got 9"},
		{`{"name": "cuda_time_quantize", "x": 256, "n": 10, "packed": 512, "packed_len": 32, "scales": 768, "n_scales": 1, "work": 1024, "work_len": 8, "repeat": 2}`,
			errs.KindValue, "work must have at least 256 bytes"},
	}
	for _, c := range cases {
		out, err := diagnose([]byte(c.req))
		if c.kind == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.req, err)
				continue
			}
			b, _ := json.Marshal(out)
			if !strings.Contains(string(b), c.msg) {
				t.Errorf("%s: result %s, want %s in it", c.req, b, c.msg)
			}
			continue
		}
		if errs.KindOf(err) != c.kind || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v (kind %v), want kind %v with %q", c.req, err, errs.KindOf(err), c.kind, c.msg)
		}
	}
}

// TestDiagnoseWithoutGPU: the timers with valid arguments reach the driver,
// which is absent here: a RuntimeError with the reason, the same as every
// other CUDA call.
func TestDiagnoseWithoutGPU(t *testing.T) {
	st := cuda.Probe()
	if st.Available {
		t.Skip("a CUDA GPU is present")
	}
	for _, req := range []string{
		`{"name": "cuda_time_copy", "dst": 18446744073709551360, "src": 512, "nbytes": 4, "stream": 18446744073709551615, "repeat": 2}`,
		`{"name": "cuda_time_quantize", "dev": 0, "x": 256, "n": 10, "block_size": 0, "method": 1, "packed": 512, "packed_len": 32, "scales": 768, "n_scales": 1, "work": 1024, "work_len": 256, "stream": 0, "repeat": 2}`,
	} {
		if _, err := diagnose([]byte(req)); errs.KindOf(err) != errs.KindRuntime || err.Error() != st.Reason {
			t.Errorf("%s: %v, want RuntimeError %q", req, err, st.Reason)
		}
	}
}

// TestDiagUint64Exact: pointers above 2^53 reach the entry unrounded.
func TestDiagUint64Exact(t *testing.T) {
	var got uint64
	if err := decodeArgs("t", json.RawMessage(`{"p": 18446744073709551361}`), &struct {
		P *uint64 `json:"p"`
	}{&got}); err != nil || got != 18446744073709551361 {
		t.Fatalf("%d, %v", got, err)
	}
}

func TestRegisterDiagRefuses(t *testing.T) {
	for _, name := range []string{"list", "", "cuda_plan"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registerDiag(%q) did not panic", name)
				}
			}()
			registerDiag(name, func(json.RawMessage) (any, error) { return nil, nil })
		}()
	}
	out, _ := diagnose([]byte(`{"name":"list"}`))
	names := out.([]string)
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) ||
		slices.Contains(names, "list") || slices.Contains(names, "") {
		t.Fatalf("list after refused registrations: %v", names)
	}
	for _, want := range []string{"cuda_plan", "cuda_time_copy", "cuda_time_quantize"} {
		if !slices.Contains(names, want) {
			t.Fatalf("list %v has no %s", names, want)
		}
	}
}
