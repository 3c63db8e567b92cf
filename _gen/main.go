//go:build generate

// Command _gen writes the project's amd64 assembly kernels with avo
// (github.com/mmcloughlin/avo): for every registered target, an assembly file
// and its Go stubs, both marked "DO NOT EDIT" and built only with
// `!noasm && amd64`.
//
// It lives at the repository root and serves every package that has
// assembly. Run it from this directory (make generate does), or from anywhere
// with go -C:
//
//	go run -tags generate .          # rewrite every target
//	go run -tags generate . -check   # exit 1 if a checked-in file is stale
//	go run -tags generate . -only ternary
//	go -C _gen run -tags generate .  # the same, from the repository root
//
// Output paths are relative to the repository root (-root, default "..", the
// parent of this directory). This directory is its own Go module so that avo
// and its dependencies never enter the library's module graph; the leading
// underscore keeps `./...` in the main module away from it.
//
// Adding kernels: write the emitters in a file beside this one (build tag
// `generate`; the shared emitter sequences are in asm.go and emit.go) and
// list them in a row of targets naming the package directory (relative to
// the repository root) and the output base name. GEMM micro-kernels go to
// dir "gokern/gemm" the same way the quantizer's go to "gokern/ternary".
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
)

// constraint is the build constraint of every generated file; the package
// provides the generic fallbacks under its negation.
const constraint = "!noasm,amd64" // avo takes "// +build" syntax: !noasm && amd64

// generator names the program in the "Code generated" line. It is fixed (no
// flags, no paths) so that regeneration is byte-for-byte reproducible.
const generator = "_gen (go run -tags generate .)"

// target is one generated pair of files: dir/base_amd64.s and
// dir/base_amd64.go, in the package named by the last element of dir.
type target struct {
	name string // for -only
	dir  string // package directory, relative to the repository root
	base string // file name without the _amd64.{s,go} suffix
	// avx2Only marks targets whose kernels must run on AVX2 CPUs: the
	// output may not use the AVX-512-only registers X16-X31/Y16-Y31/Z*/K*
	// (avo's allocator would pick them under register pressure).
	avx2Only bool
	// alignLoops: every innermost loop starts a 64-byte line (see
	// alignLoops). Opt-in, target by target, where measured: the Go 1.26
	// assembler does not finish implicit_vnni_amd64.s with it.
	alignLoops bool
	gen        func(c *build.Context)
}

// targets are every generated pair of files, sorted by name.
var targets = []target{
	{name: "cast", dir: "gokern/cast", base: "cast_avx2", avx2Only: true, gen: castAVX2},
	{name: "convf", dir: "gokern/gemm", base: "directf_avx2", avx2Only: true, gen: convfAVX2},
	{name: "convf512", dir: "gokern/gemm", base: "directf_avx512", gen: convfAVX512},
	{name: "convfb", dir: "gokern/gemm", base: "directfb_avx2", avx2Only: true, gen: convfBlockedAVX2},
	{name: "convfb512", dir: "gokern/gemm", base: "directfb_avx512", gen: convfBlockedAVX512},
	{name: "dw", dir: "gokern/gemm", base: "depthwise_avx2", avx2Only: true, gen: dwAVX2},
	{name: "dw512", dir: "gokern/gemm", base: "depthwise_avx512", gen: dwAVX512},
	{name: "gemm", dir: "gokern/gemm", base: "micro_avx2", avx2Only: true, gen: gemmAVX2},
	{name: "gemm512", dir: "gokern/gemm", base: "micro_avx512", gen: gemmAVX512},
	{name: "gemv512", dir: "gokern/gemm", base: "gemv_avx512", gen: gemvAVX512},
	{name: "implicit512", dir: "gokern/gemm", base: "implicit_vnni", gen: kernels(implicitI8VNNI, implicitI8VNNIPair, quantU8x8AVX512, quantU8x16AVX512)},
	{name: "lut", dir: "gokern/gemm", base: "lut_avx2", avx2Only: true, gen: lutAVX2},
	{name: "peak", dir: "gokern/gemm", base: "peak", gen: peakLoops},
	{name: "qlinear", dir: "gokern/ops/qlinear", base: "dot_avx2", avx2Only: true, alignLoops: true, gen: qlinearAVX2},
	{name: "qlinear512", dir: "gokern/ops/qlinear", base: "dot_avx512", alignLoops: true, gen: qlinearAVX512},
	{name: "qelem", dir: "gokern/ops/qelem", base: "qelem_avx2", avx2Only: true, gen: qelemAVX2},
	{name: "qelem512", dir: "gokern/ops/qelem", base: "qelem_avx512", gen: qelemAVX512},
	{name: "quant", dir: "gokern/quant", base: "quant_avx2", avx2Only: true, gen: quantAVX2},
	{name: "ternary", dir: "gokern/ternary", base: "quant_avx2", avx2Only: true, gen: ternaryAVX2},
	{name: "ternary512", dir: "gokern/ternary", base: "quant_avx512", gen: ternaryAVX512},
	{name: "tq", dir: "gokern/ternary", base: "tq_avx2", avx2Only: true, gen: tqAVX2},
}

// kernels returns a target's gen: each of emit, in order.
func kernels(emit ...func(*build.Context)) func(*build.Context) {
	return func(c *build.Context) {
		for _, e := range emit {
			e(c)
		}
	}
}

// forEach returns an emitter of f(c, n) for each n of ns, in order: the
// variants of a kernel generated per size.
func forEach(ns []int, f func(*build.Context, int)) func(*build.Context) {
	return func(c *build.Context) {
		for _, n := range ns {
			f(c, n)
		}
	}
}

func main() {
	root := flag.String("root", "..", "repository root (the generator runs from _gen)")
	check := flag.Bool("check", false, "do not write: report stale or missing files and exit 1 if any")
	only := flag.String("only", "", "comma-separated target names (default: all)")
	flag.Parse()
	if err := checkRoot(*root); err != nil {
		fmt.Fprintf(os.Stderr, "_gen: %v\n", err)
		os.Exit(2)
	}

	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	stale := 0
	for _, t := range targets {
		if len(want) > 0 && !want[t.name] {
			continue
		}
		delete(want, t.name)
		files, err := generate(t)
		if err != nil {
			fmt.Fprintf(os.Stderr, "_gen: target %s: %v\n", t.name, err)
			os.Exit(1)
		}
		for _, f := range files {
			path := filepath.Join(*root, filepath.FromSlash(f.path))
			if *check {
				old, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(old, f.data) {
					fmt.Fprintf(os.Stderr, "_gen: %s is stale: run make generate\n", f.path)
					stale++
				}
				continue
			}
			if err := os.WriteFile(path, f.data, 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "_gen: %v\n", err)
				os.Exit(1)
			}
		}
	}
	for n := range want {
		fmt.Fprintf(os.Stderr, "_gen: unknown target %q\n", n)
		os.Exit(2)
	}
	if stale > 0 {
		os.Exit(1)
	}
}

// mainModule is the module whose packages the targets write into.
const mainModule = "github.com/bitnet-go/bitnet_go"

// checkRoot reports an error unless root holds the main module's go.mod, so
// that a run from the wrong directory writes nothing.
func checkRoot(root string) error {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return fmt.Errorf("-root %s is not the repository root: %v", root, err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if strings.TrimSpace(first) != "module "+mainModule {
		return fmt.Errorf("-root %s is not the repository root: its go.mod is not module %s", root, mainModule)
	}
	return nil
}

type outFile struct {
	path string // slash-separated, relative to the repository root
	data []byte
}

// avx512Regs matches registers that exist only with AVX-512 (EVEX).
var avx512Regs = regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[1-7])\b`)

// generate builds one target with its own avo context and prints it.
func generate(t target) ([]outFile, error) {
	c := build.NewContext()
	c.ConstraintExpr(constraint)
	t.gen(c)
	f, err := c.Result()
	if err != nil {
		return nil, err
	}
	if err := pass.Compile.Execute(f); err != nil {
		return nil, err
	}
	cfg := printer.Config{Name: generator, Pkg: path.Base(t.dir)}
	asm, err := printer.NewGoAsm(cfg).Print(f)
	if err != nil {
		return nil, err
	}
	if t.alignLoops {
		asm = alignLoops(asm)
	}
	stubs, err := printer.NewStubs(cfg).Print(f)
	if err != nil {
		return nil, err
	}
	if t.avx2Only {
		if m := avx512Regs.Find(asm); m != nil {
			return nil, fmt.Errorf("AVX2 target uses AVX-512 register %s: reduce register pressure", m)
		}
	}
	return []outFile{
		{t.dir + "/" + t.base + "_amd64.s", asm},
		{t.dir + "/" + t.base + "_amd64.go", stubs},
	}, nil
}

// alignLoops puts "PCALIGN $64" before every label that a later jump of
// its function goes back to with no other such label in between (an
// innermost loop's top), so that each starts a 64-byte line (the
// assembler raises the function's alignment to match).
// Where a loop starts inside a line depended on the code before it and on
// where the linker put the function: the same loop of tile4x8AVX2 ran at
// half speed in the shared library (its 134 bytes over four lines) against
// the test binary (three), as Zen 4 then decodes it instead of replaying
// it from its op cache.
func alignLoops(asm []byte) []byte {
	lines := strings.SplitAfter(string(asm), "\n")
	head := map[int]bool{} // line indexes of the loop tops
	at := map[string]int{} // the labels of the current function
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "TEXT "):
			at = map[string]int{}
		case strings.HasSuffix(t, ":") && !strings.ContainsAny(t, " \t"):
			at[strings.TrimSuffix(t, ":")] = i
		case strings.HasPrefix(t, "J"):
			f := strings.Fields(t)
			if j, ok := at[f[len(f)-1]]; ok && len(f) == 2 && !anyHead(head, j, i) {
				head[j] = true // innermost loops only
			}
		}
	}
	var b strings.Builder
	for i, l := range lines {
		if head[i] {
			b.WriteString("\tPCALIGN $64\n")
		}
		b.WriteString(l)
	}
	return []byte(b.String())
}

// anyHead reports whether a loop top lies between lines j and i.
func anyHead(head map[int]bool, j, i int) bool {
	for k := j + 1; k < i; k++ {
		if head[k] {
			return true
		}
	}
	return false
}
