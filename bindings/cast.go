package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"github.com/bitnet-go/bitnet_go/gokern/cast"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// bng_cast writes host tensor x converted into out, which holds as many
// values: bfloat16 -> float32 (exact), bfloat16 or float32 -> float16
// (rounded to nearest even, as numpy's astype(np.float16)).
//
//export bng_cast
func bng_cast(x, out *C.bng_tensor, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		ts, err := decodeHost([]*C.bng_tensor{x, out}, "x", "out")
		if err != nil {
			return err
		}
		return castOp(ts[0], ts[1])
	})
}

// castOp is bng_cast's body on decoded operands.
func castOp(xt, ot *qtensor.Tensor) error {
	if xt.Len() != ot.Len() {
		return errs.Value("out must have as many values as x (%d), got %d", xt.Len(), ot.Len())
	}
	switch {
	case xt.DType == qtensor.BF16 && ot.DType == qtensor.F32:
		x, o, err := view2[uint16, float32](xt, ot)
		if err != nil {
			return err
		}
		return cast.BF16ToF32(o, x)
	case xt.DType == qtensor.BF16 && ot.DType == qtensor.F16:
		x, o, err := view2[uint16, uint16](xt, ot)
		if err != nil {
			return err
		}
		return cast.BF16ToF16(o, x)
	case xt.DType == qtensor.F32 && ot.DType == qtensor.F16:
		x, o, err := view2[float32, uint16](xt, ot)
		if err != nil {
			return err
		}
		return cast.F32ToF16(o, x)
	}
	return errs.Type("cast converts bfloat16 to float32 or float16 and float32 to float16, got %s to %s", xt.DType, ot.DType)
}

// view2 is qtensor.View of x and out as their own dtypes.
func view2[X, O float32 | uint16](xt, ot *qtensor.Tensor) ([]X, []O, error) {
	x, err := qtensor.View[X](xt, xt.DType)
	if err != nil {
		return nil, nil, err
	}
	o, err := qtensor.View[O](ot, ot.DType)
	return x, o, err
}
