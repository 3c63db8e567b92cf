// Runs a program of cuda/i2s.cu kernel launches on the CPU (see emu.hpp).
//
// usage: harness PROGRAM OUTPUT
// PROGRAM (little-endian): "BNGEMU1\0", u64 arena size, the arena bytes,
// u64 op count, then ops: u32 kind; kind 1 (launch): u32 name length, the
// name, u32 grid, u32 block, the kernel's argument struct (bng_args,
// bng_conv_args); kind 2 (memset32): u64
// address, u32 value, u64 count. Addresses are VBASE + offset into the arena.
// OUTPUT receives the arena after the ops.
#define BNG_EMU 1
#include "i2s.cu"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static const unsigned long long VBASE = 0x100000000000ull;

#include "emu_kernels.hpp"

static void die(const char* msg) {
    std::fprintf(stderr, "harness: %s\n", msg);
    std::exit(2);
}

static void get(FILE* f, void* p, size_t n) {
    if (n && std::fread(p, 1, n, f) != n) die("short program file");
}

static unsigned char* arena;
static unsigned long long arena_size;

static unsigned long long xlate(unsigned long long a, unsigned long long need) {
    if (a == 0) return 0;
    if (a < VBASE || a - VBASE + need > arena_size) die("address outside the arena");
    return (unsigned long long)(arena + (a - VBASE));
}

int main(int argc, char** argv) {
    if (argc != 3) die("usage: harness PROGRAM OUTPUT");
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) die("cannot open program");
    char magic[8];
    get(f, magic, 8);
    if (std::memcmp(magic, "BNGEMU1", 8) != 0) die("bad magic");
    get(f, &arena_size, 8);
    arena = (unsigned char*)std::aligned_alloc(256, (arena_size + 255) / 256 * 256);
    get(f, arena, arena_size);
    unsigned long long nops;
    get(f, &nops, 8);
    for (unsigned long long i = 0; i < nops; ++i) {
        unsigned kind;
        get(f, &kind, 4);
        if (kind == 1) {
            unsigned len, grid, block;
            get(f, &len, 4);
            std::string name(len, '\0');
            get(f, name.data(), len);
            get(f, &grid, 4);
            get(f, &block, 4);
            const emu_kernel* k = nullptr;
            for (const emu_kernel& c : emu_kernels)
                if (name == c.name) k = &c;
            if (!k) die("unknown kernel");
            if (block != 256) die("block size must be 256");
            if (grid == 0) die("empty grid");
            std::vector<unsigned long long> args((k->args_size + 7) / 8);
            get(f, args.data(), k->args_size);
            for (unsigned j = 0; j < k->nptrs; ++j) args[j] = xlate(args[j], 0);
            k->launch(grid, block, args.data());
        } else if (kind == 2) {
            unsigned long long addr, count;
            unsigned v;
            get(f, &addr, 8);
            get(f, &v, 4);
            get(f, &count, 8);
            unsigned* p = (unsigned*)xlate(addr, count * 4);
            for (unsigned long long j = 0; j < count; ++j) p[j] = v;
        } else {
            die("unknown op");
        }
    }
    std::fclose(f);
    FILE* o = std::fopen(argv[2], "wb");
    if (!o || std::fwrite(arena, 1, arena_size, o) != arena_size) die("cannot write output");
    std::fclose(o);
    return 0;
}
