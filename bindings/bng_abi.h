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
	BNG_I2_S = 0, BNG_TL1 = 1, BNG_TL2 = 2, BNG_TQ2_0 = 3, BNG_TQ1_0 = 4,
	BNG_F32 = 16, BNG_I8 = 17, BNG_U8 = 18, BNG_I4 = 19, BNG_U4 = 20, BNG_BINARY = 21, BNG_I32 = 22,
	BNG_I64 = 23, BNG_BF16 = 24, BNG_F16 = 25
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
#define BNG_QUANTIZE_V2 2
/* method codes */
enum { BNG_ABSMEAN = 0, BNG_ABSMAX = 1, BNG_GIVEN = 2 };
typedef struct {
	int32_t version;      /* BNG_QUANTIZE_V1 or BNG_QUANTIZE_V2 */
	int32_t method;       /* BNG_ABSMEAN, BNG_ABSMAX (i2_s); BNG_GIVEN (int8/uint8/int4/uint4/binary); BNG_ABSMEAN (binary) */
	int32_t check_finite; /* non-zero: NaN/Inf in the input is a ValueError */
	int32_t run_on;       /* 0: where the operands are; BNG_CUDA: on device run_on_id (host operands copied) */
	int32_t run_on_id;
	int32_t reserved;
	void *work;           /* device workspace for device operands (bng_cuda_workspace_size bytes) */
	int64_t work_len;
	/* V2 only: */
	int32_t quant_min, quant_max;  /* integer range; both 0 = the dtype's full range */
} bng_quantize_params;

#define BNG_CONV2D_V1 1
#define BNG_CONV2D_V2 2
typedef struct {
	int32_t version;      /* BNG_CONV2D_V1 or BNG_CONV2D_V2 */
	int32_t act_bits;     /* 0: float32 activations; 8: int8 */
	int32_t algorithm;    /* 0 auto, 1 naive, 2 im2col, 3 direct, 4 depthwise, 5 gemm1x1, 6 lut */
	int32_t check_finite;
	int64_t stride[2];    /* h, w */
	int64_t padding[4];   /* top, left, bottom, right */
	int64_t dilation[2];  /* h, w */
	int64_t groups;
	/* V2 only: */
	uint64_t weight_id;   /* 0, or a number below 2^63 (the numbers above are the library's own)
	                       * naming an i2_s w's codes for the life of the process (the caller's
	                       * promise: they never change, no other codes are ever passed with
	                       * it). Once a GEMV has read them all and found no code 3, later calls
	                       * skip that check. Layouts kept between calls are still found by
	                       * comparing the codes. Ignored for other formats. */
} bng_conv2d_params;

#define BNG_OP_INFO_V1 1
/* What ran, written by an op when the caller passes one (may be NULL). */
typedef struct {
	int32_t version;      /* the caller sets BNG_OP_INFO_V1 */
	int32_t algorithm;    /* conv2d: 1..6 as in bng_conv2d_params */
	char kernel[64];      /* the kernel that ran, e.g. "implicit_gemm/avx2", NUL-terminated */
} bng_op_info;

/* The exports below are declared without const (the declarations cgo writes
 * for Go exports have none, and the two must agree); they do not write their
 * inputs. */

/* Min and max of float32 x per group: x.axis >= 0 per channel (outputs shape[axis]),
 * axis -1 with x.block_size 0: whole tensor (1 output), else per block of the
 * flattened tensor. mn, mx: float32 [groups]. check_finite != 0: NaN/Inf is a
 * ValueError; else NaN propagates like torch.aminmax (a group with a NaN gives NaN). */
int32_t bng_minmax(bng_tensor *x, bng_tensor *mn, bng_tensor *mx, int32_t check_finite,
                   char *errbuf, int64_t errcap);

#define BNG_HISTOGRAM_V1 1
typedef struct {
	int32_t version;      /* BNG_HISTOGRAM_V1 */
	int32_t absolute;     /* non-zero: histogram of |x| */
	int32_t check_finite;
	int32_t reserved;
	float lo, hi;         /* the range; lo < hi, both finite */
} bng_histogram_params;
/* ADDS the counts of float32 x's values into counts (int64 [nbins], nbins = counts' length)
 * exactly as torch.histc(x, nbins, lo, hi) bins them (same float32 bin arithmetic,
 * values outside [lo, hi] ignored, hi in the last bin). */
int32_t bng_histogram(bng_tensor *x, bng_histogram_params *p, bng_tensor *counts,
                      char *errbuf, int64_t errcap);

#define BNG_QPARAMS_V1 1
enum { BNG_MAP_AFFINE = 0, BNG_MAP_SYMMETRIC = 1,           /* torch.ao observers */
       BNG_MAP_AO_SYMMETRIC = 2, BNG_MAP_AO_SYMMETRIC_NO_CLIPPING_ERR = 3, BNG_MAP_AO_ASYMMETRIC = 4 };  /* torchao */
typedef struct {
	int32_t version;      /* BNG_QPARAMS_V1 */
	int32_t dtype;        /* BNG_I8, BNG_U8, BNG_I4, BNG_U4 */
	int32_t mapping;
	int32_t quant_min, quant_max;  /* both 0: dtype range (Python applies reduce_range) */
	int32_t reserved;
	float eps;            /* torch: finfo(float32).eps; torchao: its own default */
} bng_qparams_params;
/* scale and zero point per group from float32 mn, mx [groups] (torch.ao observer
 * _calculate_qparams, or torchao choose_qparams_affine). scales float32 [groups], zero_points int32 [groups]. */
int32_t bng_choose_qparams(bng_tensor *mn, bng_tensor *mx, bng_qparams_params *p,
                           bng_tensor *scales, bng_tensor *zero_points, char *errbuf, int64_t errcap);

#define BNG_CALIBRATE_V1 1
enum { BNG_CALIB_PERCENTILE = 0, BNG_CALIB_ENTROPY = 1, BNG_CALIB_MSE = 2 };
typedef struct {
	int32_t version;      /* BNG_CALIBRATE_V1 */
	int32_t method;
	int32_t num_bits;     /* 8 */
	int32_t is_unsigned;
	int32_t start_bin;    /* entropy: 128 */
	int32_t reserved;
	double percentile;    /* percentile: e.g. 99.99 */
	double bin_width;     /* width of every bin of counts (bins start at 0: |x| histogram) */
} bng_calibrate_params;
/* amax from an |x| histogram (int64 counts [nbins], bin i = [i*w, (i+1)*w)), NVIDIA's
 * pytorch-quantization histogram calibrator algorithms (see the issue). */
int32_t bng_calibrate(bng_tensor *counts, bng_calibrate_params *p, double *amax,
                      char *errbuf, int64_t errcap);

/* ---- quantized linear, matmul, conv2d (bitnet_go.functional; gokern/ops/qlinear) ---- */
#define BNG_QOPS_V1 1
#define BNG_QOPS_V2 2
typedef struct {
	int32_t version;      /* BNG_QOPS_V1 or BNG_QOPS_V2 */
	int32_t relu;         /* non-zero: outputs below the output zero point are it */
	int32_t reduce_range; /* float32 x (dynamic linear): activations quantized to [0, 127] */
	int32_t reserved;
	int64_t stride[2];    /* bng_qconv2d: h, w */
	int64_t padding[4];   /* bng_qconv2d: top, left, bottom, right */
	int64_t dilation[2];  /* bng_qconv2d: h, w */
	int64_t groups;       /* bng_qconv2d */
	/* V2 only: */
	uint64_t weight_id;   /* 0, or a number naming w's codes for the life of the process: the
	                       * caller promises they never change and that no other codes are ever
	                       * passed with this number (an immutable array's own). Layouts derived
	                       * from w are then kept under it and found without comparing the codes. */
} bng_qops_params;
/* out (..., N) = quantized x (..., K) times w (N, K)^T + bias, as torch's fbgemm engine
 * computes it (see gokern/ops/qlinear). x: uint8 or int8 with one scale and zero point,
 * out: x's dtype with the output scale and zero point it carries; or x float32 (dynamic:
 * quantized per call as torch's linear_dynamic does) and out float32, its scale and
 * zero point written to act_qparams (float32 scale, then the zero point as float32) when
 * not NULL. w: int8 with one scale and zero point, one per row (axis 0), or one per
 * block of block_size values of a row (block_size dividing K; n_scales = N*K/block_size).
 * bias: NULL or float32 (N). colsums: NULL or int32 (N), the sums of w's rows. */
int32_t bng_qlinear(bng_tensor *x, bng_tensor *w, bng_tensor *bias, bng_tensor *colsums,
                    bng_tensor *out, bng_qops_params *p, float *act_qparams, bng_op_info *info,
                    char *errbuf, int64_t errcap);
/* out (B..., M, N) = a (B..., M, K) times b (B..., K, N): both uint8 or both int8, per tensor;
 * out of the same dtype with its scale and zero point. */
int32_t bng_qmatmul(bng_tensor *a, bng_tensor *b, bng_tensor *out, bng_qops_params *p,
                    bng_op_info *info, char *errbuf, int64_t errcap);
/* out (N, O, Ho, Wo) = quantized conv2d of x (N, C, H, W; uint8 or int8) with w (O, C/groups,
 * kH, kW; int8, per tensor or per output channel: axis 0) + bias (NULL or float32 O). */
int32_t bng_qconv2d(bng_tensor *x, bng_tensor *w, bng_tensor *bias, bng_tensor *out,
                    bng_qops_params *p, bng_op_info *info, char *errbuf, int64_t errcap);
/* ---- element-wise ops on quantized tensors (gokern/ops/qelem) ----
 * Every operand is a C-contiguous host int8 or uint8 tensor with one scale
 * (n_scales 1, finite and > 0) and one zero point (n_zero_points 1, in the
 * dtype's range; 0 entries: zero point 0), axis -1 and block_size 0. */
#define BNG_QELEM_V1 1
typedef struct {
	int32_t version;      /* BNG_QELEM_V1 */
	int32_t relu;         /* bng_qadd: non-zero fuses a ReLU (torch's add_relu) */
	int32_t reserved[2];  /* 0 */
} bng_qelem_params;
/* out = quantize(dequantize(a) + dequantize(b)) with out's scale and zero point, as
 * torch.ops.quantized.add (add_relu with p->relu) computes it in its vectorised
 * kernel: each input fma(scale, q, float32(scale * -zp)), the sum in float32,
 * clamp(nearbyint(sum * float32(1/scale_out))) + zp_out (ties to even). a and b
 * broadcast (NumPy rules) to out's shape; a, b and out have one dtype. */
int32_t bng_qadd(bng_tensor *a, bng_tensor *b, bng_tensor *out, bng_qelem_params *p,
                 bng_op_info *info, char *errbuf, int64_t errcap);
/* out = max(x, zero point) (torch.relu of a quantized tensor): x's dtype, shape,
 * scale and zero point. */
int32_t bng_qrelu(bng_tensor *x, bng_tensor *out, bng_qelem_params *p, bng_op_info *info,
                  char *errbuf, int64_t errcap);
/* out = x requantized to out's dtype (int8/uint8), scale and zero point:
 * torch.quantize_per_tensor(x.dequantize(), scale, zero_point, dtype). */
int32_t bng_requantize(bng_tensor *x, bng_tensor *out, bng_qelem_params *p,
                       char *errbuf, int64_t errcap);

#endif
