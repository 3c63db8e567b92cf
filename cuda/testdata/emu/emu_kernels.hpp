// The entry points of i2s.cu (and conv.cu) by name, for the emulator harness
// and the fake driver (include after i2s.cu). Every kernel takes one
// by-value struct whose first nptrs fields are device pointers (u64).
#pragma once

#include <cstring>

struct emu_kernel {
    const char* name;
    unsigned args_size;  // bytes of the kernel's argument struct
    unsigned nptrs;      // its leading pointer fields
    void (*launch)(unsigned grid, unsigned block, void* args);
};

template <class A, void (*F)(A)> void emu_launch_as(unsigned grid, unsigned block, void* p) {
    A a;
    std::memcpy(&a, p, sizeof a);
    emu_launch(F, grid, block, a);
}

#define EMU_I2S(name) {#name, sizeof(bng_args), 7, emu_launch_as<bng_args, name>}
#define EMU_CONV(name) {#name, sizeof(bng_conv_args), 8, emu_launch_as<bng_conv_args, name>}

static const emu_kernel emu_kernels[] = {
    EMU_I2S(bng_i2s_fused_absmean),
    EMU_I2S(bng_i2s_fused_absmax),
    EMU_I2S(bng_i2s_partials_absmean),
    EMU_I2S(bng_i2s_partials_absmax),
    EMU_I2S(bng_i2s_finish_absmean),
    EMU_I2S(bng_i2s_finish_absmax),
    EMU_I2S(bng_i2s_encode),
    EMU_I2S(bng_i2s_unpack),
    EMU_I2S(bng_i2s_dequantize),
    EMU_I2S(bng_i2s_warp_absmean),
    EMU_I2S(bng_i2s_warp_absmax),
    EMU_CONV(bng_conv_absmax),
    EMU_CONV(bng_conv_quant),
    EMU_CONV(bng_conv_igemm),
    EMU_CONV(bng_linear_gemv),
    EMU_CONV(bng_conv_fgemm),
    EMU_CONV(bng_conv_check_codes),
    EMU_CONV(bng_linear_gemv_any),
    EMU_CONV(bng_conv_igemm_mma),
    EMU_CONV(bng_linear_fgemv),
};
