// The entry points of i2s.cu by name, for the emulator harness and the fake
// driver (include after i2s.cu).
#pragma once

struct emu_kernel {
    const char* name;
    void (*fn)(bng_args);
};
static const emu_kernel emu_kernels[] = {
    {"bng_i2s_fused_absmean", bng_i2s_fused_absmean},
    {"bng_i2s_fused_absmax", bng_i2s_fused_absmax},
    {"bng_i2s_partials_absmean", bng_i2s_partials_absmean},
    {"bng_i2s_partials_absmax", bng_i2s_partials_absmax},
    {"bng_i2s_finish_absmean", bng_i2s_finish_absmean},
    {"bng_i2s_finish_absmax", bng_i2s_finish_absmax},
    {"bng_i2s_encode", bng_i2s_encode},
    {"bng_i2s_unpack", bng_i2s_unpack},
    {"bng_i2s_dequantize", bng_i2s_dequantize},
    {"bng_i2s_warp_absmean", bng_i2s_warp_absmean},
    {"bng_i2s_warp_absmax", bng_i2s_warp_absmax},
};
