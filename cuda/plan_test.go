package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

func TestKargsLayout(t *testing.T) {
	var a kargs
	if s := unsafe.Sizeof(a); s != 128 {
		t.Fatalf("kargs is %d bytes, struct bng_args in i2s.cu is 128", s)
	}
	// Field order of struct bng_args.
	offs := []uintptr{
		unsafe.Offsetof(a.X), unsafe.Offsetof(a.Packed), unsafe.Offsetof(a.Scales), unsafe.Offsetof(a.Out),
		unsafe.Offsetof(a.Bad), unsafe.Offsetof(a.Partial), unsafe.Offsetof(a.Thr), unsafe.Offsetof(a.N),
		unsafe.Offsetof(a.BS), unsafe.Offsetof(a.NB), unsafe.Offsetof(a.Tile), unsafe.Offsetof(a.WPB),
		unsafe.Offsetof(a.CPB), unsafe.Offsetof(a.NChunks), unsafe.Offsetof(a.Magic), unsafe.Offsetof(a.Flags),
	}
	for i, o := range offs {
		if o != uintptr(8*i) {
			t.Fatalf("field %d at offset %d, want %d", i, o, 8*i)
		}
	}
}

// TestMagic checks the division by multiplication of the fused kernel for
// every block size and tile offset it can see.
func TestMagic(t *testing.T) {
	for bs := uint64(2); bs <= tileMax; bs++ {
		m := (1<<32 + bs - 1) / bs
		if m > 0xffffffff {
			t.Fatalf("magic of %d does not fit 32 bits", bs)
		}
		for i := uint64(0); i < tileMax; i++ {
			if q := (i * m) >> 32; q != i/bs {
				t.Fatalf("umulhi(%d, magic(%d)) = %d, want %d", i, bs, q, i/bs)
			}
		}
	}
}

func TestPlan(t *testing.T) {
	sizes := []int64{1, 2, 31, 32, 33, 127, 128, 129, 1000, 4095, 4096, 4097, 8192, 12345, 1 << 20, 1<<20 + 3, 1 << 28, 5_000_000_001}
	blocks := []int64{0, 1, 2, 3, 7, 16, 31, 32, 33, 64, 96, 100, 128, 256, 384, 1000, 1024, 4096, 4097, 8192, 131072, 1 << 20}
	for _, n := range sizes {
		for _, b := range blocks {
			p, err := newPlan(n, b)
			if err != nil {
				t.Fatal(err)
			}
			if p.nb != int64(ternary.NumBlocks(int(n), int(b))) || (p.nb == 1) != (p.bs == n) {
				t.Fatalf("n=%d bs=%d: plan %+v", n, b, p)
			}
			if p.warp {
				if !warpBlock(p.bs) || p.nb < 2 || p.tile != warpStep || p.workBytes() != 256 {
					t.Fatalf("n=%d bs=%d: warp plan %+v", n, b, p)
				}
				continue
			}
			if p.fused {
				if p.bs > tileMax || p.tile > tileMax {
					t.Fatalf("n=%d bs=%d: fused with bs %d tile %d", n, b, p.bs, p.tile)
				}
				if n > p.tile && (p.tile%p.bs != 0 || p.tile%128 != 0) {
					t.Fatalf("n=%d bs=%d: tile %d is not a multiple of the block and the group", n, b, p.tile)
				}
				perTile := (min(p.tile, n) + p.bs - 1) / p.bs
				if perTile > smallBlocks || (p.bs >= 32 && perTile > tileMax/32) {
					t.Fatalf("n=%d bs=%d: %d blocks per tile", n, b, perTile)
				}
				if p.wpb < 1 || p.wpb > ctaWarps || p.workBytes() != 256 {
					t.Fatalf("n=%d bs=%d: wpb %d work %d", n, b, p.wpb, p.workBytes())
				}
				continue
			}
			if p.nchunks != p.nb*p.cpb || p.cpb*chunkValues < p.bs || (p.cpb-1)*chunkValues >= p.bs {
				t.Fatalf("n=%d bs=%d: chunks %+v", n, b, p)
			}
			if p.offPartial != 8 || p.offThr < p.offPartial+8*p.nchunks || p.offThr%16 != 0 || p.work != p.offThr+4*p.nb {
				t.Fatalf("n=%d bs=%d: workspace %+v", n, b, p)
			}
			// Common block sizes must take the one-pass kernel.
			if slices.Contains([]int64{32, 64, 96, 100, 128, 256, 1024, 4096}, b) && p.nb > 1 {
				t.Fatalf("n=%d bs=%d: not fused", n, b)
			}
		}
	}
}

func TestCheckQuantize(t *testing.T) {
	if _, err := checkQuantize(10, 0, 7, 32, 1); errs.KindOf(err) != errs.KindValue {
		t.Fatalf("bad method: %v", err)
	}
	if _, err := checkQuantize(10, 0, ternary.AbsMean, 31, 1); err == nil || !strings.Contains(err.Error(), "packed must have 32 bytes") {
		t.Fatalf("bad packed length: %v", err)
	}
	if _, err := checkQuantize(10, 4, ternary.AbsMean, 32, 2); err == nil || !strings.Contains(err.Error(), "scales must have 3") {
		t.Fatalf("bad scales length: %v", err)
	}
	if _, err := checkQuantize(0, 0, ternary.AbsMean, 0, 1); errs.KindOf(err) != errs.KindValue {
		t.Fatalf("empty: %v", err)
	}
	err := QuantizeDevice(0, 0, 8, 8, 8, 10, 0, ternary.AbsMean, true, 32, 1, 256, 0)
	if err == nil || !strings.Contains(err.Error(), "x is NULL") {
		t.Fatalf("NULL x: %v", err)
	}
	err = QuantizeDevice(0, 6, 8, 8, 8, 10, 0, ternary.AbsMean, true, 32, 1, 256, 0)
	if err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Fatalf("misaligned x: %v", err)
	}
	err = QuantizeDevice(0, 8, 8, 8, 8, 10, 0, ternary.AbsMean, true, 32, 1, 8, 0)
	if err == nil || !strings.Contains(err.Error(), "work must have at least 256") {
		t.Fatalf("short work: %v", err)
	}
}

// TestNoDriver runs where no NVIDIA driver or GPU is present: every call
// says why, as a RuntimeError, and nothing panics.
func TestNoDriver(t *testing.T) {
	st := Probe()
	if st.Available {
		t.Skipf("a CUDA GPU is present (%d devices): the no-driver behaviour is not tested here", st.DeviceCount)
	}
	if st.Reason == "" || !strings.HasPrefix(st.Reason, "cuda: ") {
		t.Fatalf("reason %q", st.Reason)
	}
	x := []float32{1, 2, 3}
	packed := make([]byte, 32)
	scales := make([]float32, 1)
	err := QuantizeHost(0, unsafe.Pointer(&x[0]), 3, 0, ternary.AbsMean, true, unsafe.Pointer(&packed[0]), 32, unsafe.Pointer(&scales[0]), 1)
	if errs.KindOf(err) != errs.KindRuntime || err.Error() != st.Reason {
		t.Fatalf("QuantizeHost: %v", err)
	}
	if _, err := DeviceCount(); errs.KindOf(err) != errs.KindRuntime {
		t.Fatalf("DeviceCount: %v", err)
	}
	if _, err := DeviceName(0); errs.KindOf(err) != errs.KindRuntime {
		t.Fatalf("DeviceName: %v", err)
	}
	if _, _, err := MemInfo(0); errs.KindOf(err) != errs.KindRuntime {
		t.Fatalf("MemInfo: %v", err)
	}
	if err := EmptyCache(); err != nil {
		t.Fatalf("EmptyCache: %v", err)
	}
	if (Pool() != PoolStats{}) {
		t.Fatalf("Pool: %+v", Pool())
	}
}

func TestEmbeddedPTX(t *testing.T) {
	info := EmbeddedPTX()
	for _, e := range Entries() {
		if !slices.Contains(info.Entries, e) {
			t.Errorf("the embedded PTX has no .entry %s (entries: %v)", e, info.Entries)
		}
	}
	if len(info.Entries) != len(Entries()) {
		t.Errorf("entries %v, the library launches %v", info.Entries, Entries())
	}
	if info.Target != "sm_75" {
		t.Errorf(".target %q, want sm_75 (compute_75)", info.Target)
	}
	v, err := strconv.ParseFloat(info.Version, 64)
	maxV, _ := strconv.ParseFloat(MaxPTXVersion, 64)
	if err != nil || v > maxV || v < 7 {
		t.Errorf(".version %q: the drivers we support (R550 and newer, R580 on the GPU machines) JIT PTX ISA <= %s", info.Version, MaxPTXVersion)
	}
	if !strings.Contains(info.Compiler, "NVRTC 12.4") || !strings.Contains(info.Compiler, "--fmad=false") ||
		!strings.Contains(info.Compiler, "--ftz=false") || !strings.Contains(info.Compiler, "--prec-div=true") {
		t.Errorf("compiler line %q", info.Compiler)
	}
	src, err := os.ReadFile("i2s.cu")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	if info.SourceSHA != hex.EncodeToString(sum[:]) {
		t.Errorf("i2s.ptx was generated from another i2s.cu (sha256 %s, now %x): run `make ptx`", info.SourceSHA, sum)
	}
	// conv.cu is compiled into the module as a header: its hash is recorded too.
	conv, err := os.ReadFile("conv.cu")
	if err != nil {
		t.Fatal(err)
	}
	csum := sha256.Sum256(conv)
	m := regexp.MustCompile(`(?m)^// header: conv\.cu sha256 ([0-9a-f]{64})$`).FindStringSubmatch(PTX())
	if m == nil {
		t.Errorf("i2s.ptx names no conv.cu header hash: run `make ptx`")
	} else if m[1] != hex.EncodeToString(csum[:]) {
		t.Errorf("i2s.ptx was generated from another conv.cu (sha256 %s, now %x): run `make ptx`", m[1], csum)
	}
	// IEEE arithmetic only, no fused multiply-add, except in the float32
	// activation kernels (not bit-identical to the CPU by design: their sums
	// use fmaf).
	rest := stripComments(PTX())
	for _, name := range []string{"bng_conv_fgemm", "bng_linear_fgemv"} {
		fused := entryBody(rest, name)
		if !strings.Contains(fused, "fma.rn.f32") {
			t.Errorf("%s has no fma.rn.f32 (entry found: %v)", name, fused != "")
		}
		if strings.Contains(fused, ".ftz") || strings.Contains(fused, "div.approx") {
			t.Errorf("%s flushes denormals or divides approximately", name)
		}
		rest = strings.Replace(rest, fused, "", 1)
	}
	for _, bad := range []string{".ftz", "fma.rn.f32", "fma.rn.f64", "div.approx", "div.full"} {
		if strings.Contains(rest, bad) {
			t.Errorf("the PTX contains %q outside the float kernels: the kernels must use IEEE arithmetic only", bad)
		}
	}
}

// entryBody returns the text of the .entry name of PTX text s, from its
// line to the next .entry (or the end), or "" when s has no such entry.
func entryBody(s, name string) string {
	i := strings.Index(s, ".visible .entry "+name+"(")
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i+1:], ".visible .entry ")
	if j < 0 {
		return s[i:]
	}
	return s[i : i+1+j]
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "//"); i >= 0 {
			l = l[:i]
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestPTXRegenerates runs build_ptx.sh --check: regenerating the PTX with the
// pinned NVRTC must give the checked-in file. Needs the pinned NVRTC in the
// cache (`make ptx` installs it); skipped, saying so, when it is absent.
func TestPTXRegenerates(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if _, err := exec.LookPath("python3"); err != nil && os.Getenv("PYTHON") == "" {
		t.Skip("python3 not found: cannot run build_ptx.sh")
	}
	script, _ := filepath.Abs("build_ptx.sh")
	cmd := exec.Command("bash", script, "--check")
	cmd.Env = append(os.Environ(), "BITNET_GO_NO_DOWNLOAD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("NVRTC is not installed, PTX regeneration not checked (run `make ptx` once): %s", strings.TrimSpace(string(out)))
	}
	if err != nil {
		t.Fatalf("build_ptx.sh --check: %v\n%s", err, out)
	}
}
