//go:build !noasm

package cpu

const asmBuilt = true
