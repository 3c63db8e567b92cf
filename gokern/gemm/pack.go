package gemm

import (
	"bytes"
	"encoding/binary"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Panels returns the number of A panels of one group of og rows.
func Panels(og int) int { return (og + MR - 1) / MR }

// ALen returns the bytes of the A panels of a weight with groups groups of
// og rows of k values each: groups * Panels(og) * k (the caller checks that
// the product fits).
func ALen(og, groups, k int) int { return groups * Panels(og) * k }

// PackA decodes the I2_S tensor packed (groups*og rows of k values, row-major,
// the layout of a flattened (O, C/groups, kH, kW) weight) into A panels:
// panel i of group g starts at (g*Panels(og)+i)*k and holds rows
// g*og+i*MR .. +MR (rows past og are zero). A code 3 is a ValueError naming
// the element. The work is spread over par's threads. Every set writes the
// same panels; ks's panel packer does it where rows are whole I2_S groups.
func (ks *Kernels) PackA(dst []byte, packed []byte, og, groups, k int) error {
	if og < 1 || groups < 1 || k < 1 {
		return errs.Value("gemm.PackA: og=%d, groups=%d, k=%d must be positive", og, groups, k)
	}
	np := Panels(og)
	n := groups * og * k
	if len(dst) != ALen(og, groups, k) {
		return errs.Value("gemm.PackA: dst has %d bytes, want %d", len(dst), ALen(og, groups, k))
	}
	if len(packed) < ternary.PackedLen(n) {
		return errs.Value("weight: packed has %d bytes, %d values need %d", len(packed), n, ternary.PackedLen(n))
	}
	// The family's panel packer, where rows are whole I2_S groups; rows
	// past og read code 1 everywhere (bytes 0x55).
	fast := ks.packPanel
	var ones []byte
	if k%GroupValues != 0 {
		fast = nil
	} else if fast != nil && og%MR != 0 {
		ones = bytes.Repeat([]byte{0x55}, k/4)
	}
	total := groups * np
	chunks := par.Chunks(total, max(1, 4096/k))
	bad := make([]int, len(chunks)-1)
	par.Run(chunks, func(c, lo, hi int) {
		bad[c] = -1
		for pi := lo; pi < hi; pi++ {
			g, i := pi/np, pi%np
			panel := dst[pi*k : (pi+1)*k]
			if fast != nil {
				var rows [MR][]byte
				for r := range MR {
					rows[r] = ones
					if row := i*MR + r; row < og {
						p := (g*og + row) * k / 4
						rows[r] = packed[p : p+k/4]
					}
				}
				if fast(panel, &rows) {
					continue
				}
			}
			// The per-row decoder: any k, and it locates a code 3.
			clear(panel)
			for r := range MR {
				row := i*MR + r
				sh := uint(2 * r)
				if row >= og {
					for j := range panel {
						panel[j] |= 1 << sh
					}
					continue
				}
				if p := decodeRow(panel, packed, (g*og+row)*k, sh); p >= 0 && bad[c] < 0 {
					bad[c] = p
				}
			}
		}
	})
	for _, p := range bad {
		if p >= 0 {
			return errs.Value("weight: invalid I2_S code 3 at element %d", p)
		}
	}
	return nil
}

// decodeRow ORs the codes of the len(dst) values starting at flat position
// p0 of an I2_S tensor into dst, shifted left by sh. It returns the flat
// position of the first code 3, or -1. Values in a run of up to 32 positions
// share one bit shift and consecutive bytes, so each run is one tight loop.
func decodeRow(dst []byte, packed []byte, p0 int, sh uint) int {
	bad := -1
	for k := 0; k < len(dst); {
		p := p0 + k
		run := min(ternary.LaneValues-(p&31), len(dst)-k)
		b := (p>>7)<<5 | p&31
		src := packed[b : b+run]
		psh := uint(6 - 2*((p>>5)&3))
		out := dst[k : k+run]
		var three byte
		j := 0
		// eight values at a time in a uint64 (byte-wise: shifts by at
		// most 6 keep each byte's two bits apart from its neighbours')
		var three64 uint64
		for ; j+8 <= run; j += 8 {
			c := (binary.LittleEndian.Uint64(src[j:]) >> psh) & 0x0303030303030303
			three64 |= c & (c >> 1)
			binary.LittleEndian.PutUint64(out[j:], binary.LittleEndian.Uint64(out[j:])|c<<sh)
		}
		if three64 != 0 {
			three = 1
		}
		for ; j < run; j++ {
			c := (src[j] >> psh) & 3
			three |= c & (c >> 1)
			out[j] |= c << sh
		}
		if three != 0 && bad < 0 {
			for j, v := range src {
				if (v>>psh)&3 == 3 {
					bad = p + j
					break
				}
			}
		}
		k += run
	}
	return bad
}
