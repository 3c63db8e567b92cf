// Package cuda runs bitnet_go's kernels on NVIDIA GPUs.
//
// The kernels are CUDA C++ (i2s.cu), compiled to PTX by build_ptx.sh and
// embedded here; the driver JIT-compiles the PTX for the GPU at hand. The
// operations (quantize, unpack, dequantize) are plain Go over the interfaces
// of package driver, which holds the only cgo: it loads the driver API at
// run time, so the library builds without CUDA and loads where there is no
// GPU or driver, and every call then reports why CUDA is unavailable.
package cuda

import (
	_ "embed"
	"regexp"
	"strings"
)

//go:embed i2s.ptx
var ptxSource string

// PTX returns the embedded PTX module.
func PTX() string { return ptxSource }

// PTXInfo describes the embedded module.
type PTXInfo struct {
	Version   string   `json:"version"` // PTX ISA version (.version)
	Target    string   `json:"target"`  // .target, e.g. sm_75
	Entries   []string `json:"entries"` // .entry names, in file order
	SourceSHA string   `json:"source_sha256"`
	Compiler  string   `json:"compiler"`
	Bytes     int      `json:"bytes"`
}

var (
	reVersion = regexp.MustCompile(`(?m)^\.version\s+(\d+\.\d+)\s*$`)
	reTarget  = regexp.MustCompile(`(?m)^\.target\s+(\w+)`)
	reEntry   = regexp.MustCompile(`(?m)^\.visible\s+\.entry\s+(\w+)\(`)
	reSource  = regexp.MustCompile(`(?m)^// source: \S+ sha256 ([0-9a-f]{64})$`)
	reTool    = regexp.MustCompile(`(?m)^// compiler: (.*)$`)
)

// ParsePTX extracts the facts of a PTX module's text.
func ParsePTX(s string) PTXInfo {
	info := PTXInfo{Bytes: len(s)}
	if m := reVersion.FindStringSubmatch(s); m != nil {
		info.Version = m[1]
	}
	if m := reTarget.FindStringSubmatch(s); m != nil {
		info.Target = m[1]
	}
	for _, m := range reEntry.FindAllStringSubmatch(s, -1) {
		info.Entries = append(info.Entries, m[1])
	}
	if m := reSource.FindStringSubmatch(s); m != nil {
		info.SourceSHA = m[1]
	}
	if m := reTool.FindStringSubmatch(s); m != nil {
		info.Compiler = strings.TrimSpace(m[1])
	}
	return info
}

// EmbeddedPTX describes the embedded module.
func EmbeddedPTX() PTXInfo { return ParsePTX(ptxSource) }

// MaxPTXVersion is the newest PTX ISA the oldest driver we support (R550,
// CUDA 12.4) JIT-compiles; the GPU machines run R580 (CUDA 13.0, ISA 9.0).
const MaxPTXVersion = "8.4"
