/* bitnet_go C ABI: the structs that cross it. See bindings/main.go for the
 * conventions every export follows (status codes, errbuf), and
 * docs/architecture.md for the design.
 *
 * Every struct starts with its version; a caller fills the version it was
 * written for and the library refuses versions it does not know. A new field
 * means a new version; existing versions keep their layout.
 */
#ifndef BNG_ABI_H
#define BNG_ABI_H
#include <stdint.h>

#define BNG_TENSOR_V1 1

/* dtype codes: packed ternary formats below 16, plain element types from 16. */
enum {
	BNG_I2_S = 0, BNG_TL1 = 1, BNG_TL2 = 2,
	BNG_F32 = 16, BNG_I8 = 17, BNG_U8 = 18, BNG_I4 = 19, BNG_U4 = 20, BNG_BINARY = 21, BNG_I32 = 22
};

/* device_type codes are DLPack's. */
enum { BNG_CPU = 1, BNG_CUDA = 2 };

/* One operand: DLPack's DLTensor plus quantization parameters. */
typedef struct {
	int32_t version;        /* BNG_TENSOR_V1 */
	int32_t dtype;          /* BNG_F32, BNG_I2_S, ... */
	int32_t device_type;    /* BNG_CPU or BNG_CUDA */
	int32_t device_id;      /* 0 for the CPU; the CUDA ordinal */
	void *data;             /* host address, or the CUdeviceptr */
	int64_t nbytes;         /* bytes at data */
	int32_t ndim;           /* 0..16 */
	int32_t axis;           /* dimension scales/zero points run along; -1: blocks of the flattened tensor */
	const int64_t *shape;   /* ndim entries */
	const int64_t *strides; /* ndim entries in elements, or NULL: C-contiguous */
	void *scales;           /* float32[n_scales] on the tensor's device, or NULL */
	int64_t n_scales;
	int64_t block_size;     /* axis -1: scale per block_size elements; 0: one scale */
	void *zero_points;      /* int32[n_zero_points] on the tensor's device, or NULL */
	int64_t n_zero_points;
	uint64_t stream;        /* CUDA stream for a device operand (0: legacy default) */
} bng_tensor;

#define BNG_QUANTIZE_V1 1
typedef struct {
	int32_t version;      /* BNG_QUANTIZE_V1 */
	int32_t method;       /* 0 absmean, 1 absmax */
	int32_t check_finite; /* non-zero: NaN/Inf in the input is a ValueError */
	int32_t run_on;       /* 0: where the operands are; BNG_CUDA: on device run_on_id (host operands copied) */
	int32_t run_on_id;
	int32_t reserved;
	void *work;           /* device workspace for device operands (bng_cuda_workspace_size bytes) */
	int64_t work_len;
} bng_quantize_params;

#define BNG_CONV2D_V1 1
typedef struct {
	int32_t version;      /* BNG_CONV2D_V1 */
	int32_t act_bits;     /* 0: float32 activations; 8: int8 */
	int32_t algorithm;    /* 0 auto, 1 naive, 2 im2col, 3 direct, 4 depthwise, 5 gemm1x1, 6 lut */
	int32_t check_finite;
	int64_t stride[2];    /* h, w */
	int64_t padding[4];   /* top, left, bottom, right */
	int64_t dilation[2];  /* h, w */
	int64_t groups;
} bng_conv2d_params;

#define BNG_OP_INFO_V1 1
/* What ran, written by an op when the caller passes one (may be NULL). */
typedef struct {
	int32_t version;      /* the caller sets BNG_OP_INFO_V1 */
	int32_t algorithm;    /* conv2d: 1..6 as in bng_conv2d_params */
	char kernel[64];      /* the kernel that ran, e.g. "implicit_gemm/avx2", NUL-terminated */
} bng_op_info;

#endif
