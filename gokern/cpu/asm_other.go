//go:build noasm || !amd64

package cpu

const asmBuilt = false
