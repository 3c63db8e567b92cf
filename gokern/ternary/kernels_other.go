//go:build noasm || !amd64

package ternary

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// simdKernels is empty: this build has no assembly.
var simdKernels = map[cpu.Family]kernelSet{}
