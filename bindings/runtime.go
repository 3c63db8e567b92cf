package main

/*
#include <stdint.h>
*/
import "C"

import (
	"encoding/json"
	"runtime"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/envvar"
	_ "github.com/bitnet-go/bitnet_go/gokern/gemm" // registers its kernel ops
	"github.com/bitnet-go/bitnet_go/gokern/par"
	_ "github.com/bitnet-go/bitnet_go/gokern/ternary" // registers its kernel ops
)

// bng_cpu_features writes a JSON object into buf: the cpuid/v2 features, the
// families disabled by BITNET_GO_DISABLE, the family every registered kernel
// op selected (cpu.Kernels: every op, from start-up), why (the dispatch
// policy for this CPU's kind) and the families each could run, the
// numeric environment settings as read (envvar) and the thread limit.
//
//export bng_cpu_features
func bng_cpu_features(buf *C.char, bufcap C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		ft := cpu.Detected()
		off, unknown := cpu.Disabled()
		mode, kind, dispatchIgnored := cpu.Dispatch()
		id := cpu.DetectedID()
		doc := map[string]any{
			"avx2":             ft.AVX2,
			"fma":              ft.FMA,
			"avx512f":          ft.AVX512F,
			"avx512bw":         ft.AVX512BW,
			"avx512vl":         ft.AVX512VL,
			"avx512vnni":       ft.AVX512VNNI,
			"avxvnni":          ft.AVXVNNI,
			"brand":            ft.Brand,
			"arch":             runtime.GOARCH,
			"asm_built":        cpu.AsmBuilt(),
			"disabled":         off,
			"disable_ignored":  unknown,
			"family":           string(cpu.InUse()),
			"best_available":   string(cpu.Best()),
			"kernels":          cpu.Kernels(),
			"kernel_reasons":   cpu.KernelReasons(),
			"kernel_families":  cpu.KernelFamilies(),
			"cpu_kind":         string(kind),
			"cpu_id":           map[string]any{"vendor": id.Vendor, "family": id.Family, "model": id.Model},
			"dispatch":         mode,
			"dispatch_ignored": dispatchIgnored,
			"go_version":       runtime.Version(),
			"settings":         envvar.All(),
			"max_threads":      par.MaxThreads,
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		return str(buf, bufcap, string(b))
	})
}

//export bng_set_num_threads
func bng_set_num_threads(n C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error { return par.SetThreads(int(n)) })
}

//export bng_get_num_threads
func bng_get_num_threads() C.int64_t { return C.int64_t(par.Threads()) }
