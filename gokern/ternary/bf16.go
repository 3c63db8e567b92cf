package ternary

import (
	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/cast"
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// widened keeps the float32 scratch of QuantizeBF16 between calls (one
// buffer, up to maxWidened values: a checkpoint's largest weight), so that
// quantizing tensor after tensor costs no allocation or page faults.
var widened = buf.List[float32]{MaxCap: maxWidened, MaxCount: 1}

// maxWidened is the largest scratch QuantizeBF16 keeps (values; 128 MiB:
// a larger tensor's scratch is allocated for its call only).
const maxWidened = 1 << 25

// QuantizeBF16 is Quantize of the float32 values of bfloat16 bits x (exact:
// the bits shifted up), with the process's kernels: the same packed bytes,
// scales and errors as Quantize of the widened tensor, bit for bit. x is
// widened in parallel into a scratch buffer kept between calls.
func QuantizeBF16(x []uint16, blockSize int, m Method, checkFinite bool, packed []byte, scales []float32) error {
	return QuantizeOp.Get().QuantizeBF16(x, blockSize, m, checkFinite, packed, scales)
}

// QuantizeBF16 is the package's QuantizeBF16 with ks's kernels.
func (ks *Quantizer) QuantizeBF16(x []uint16, blockSize int, m Method, checkFinite bool, packed []byte, scales []float32) error {
	if err := CheckSizes(len(x), blockSize); err != nil {
		return err
	}
	n := len(x)
	if NumBlocks(n, blockSize) == 1 && n >= specMinValues && ks.family != cpu.Generic {
		// One scale, one pass (Quantize's choice for the widened tensor),
		// each piece widened in cache (specSource): the same bytes. What
		// it cannot do (a NaN or Inf; a tensor too large for it) takes
		// Quantize of the whole widened tensor.
		if m != AbsMean && m != AbsMax {
			return errs.Value("unknown method %d", m)
		}
		if len(packed) != PackedLen(n) {
			return errs.Value("packed must have %d bytes for %d values, got %d", PackedLen(n), n, len(packed))
		}
		if _, err := scaleBlock(n, blockSize, scales); err != nil {
			return err
		}
		if ks.quantizeSpec(specSource{bf: x}, m, packed, scales) {
			return nil
		}
	}
	f, h := widened.Sized(len(x))
	defer widened.Put(h)
	if err := cast.BF16ToF32(f, x); err != nil {
		return err
	}
	return ks.Quantize(f, blockSize, m, checkFinite, packed, scales)
}
