// llama_harness: load a GGUF with llama.cpp, optionally tokenize a text, evaluate tokens and
// print the logits of every position as one JSON object on stdout (logs go to stderr).
//
//   llama_harness MODEL [--tokens 1,2,3] [--text STRING] [--threads N] [--ctx N]
//
// Output: {"n_vocab": V, "text_tokens": [...], "tokens": [...], "logits": [[V floats], ...]}
// ("text_tokens" only with --text; without --tokens the text's tokens are evaluated).
// Built against upstream llama.cpp or bitnet.cpp's fork by tools/llama_cpp/build.sh; the
// macro HARNESS_VOCAB_API says whether llama.h has the llama_vocab API (2025 on).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

#ifdef HARNESS_VOCAB_API
#define LOAD_MODEL llama_model_load_from_file
#define NEW_CONTEXT llama_init_from_model
#define FREE_MODEL llama_model_free
#define VOCAB_OF(m) llama_model_get_vocab(m)
#define N_VOCAB(v) llama_vocab_n_tokens(v)
#else
#define LOAD_MODEL llama_load_model_from_file
#define NEW_CONTEXT llama_new_context_with_model
#define FREE_MODEL llama_free_model
#define VOCAB_OF(m) (m)
#define N_VOCAB(v) llama_n_vocab(v)
#endif

static void print_float(float v) {
    if (std::isnan(v)) std::printf("NaN");
    else if (std::isinf(v)) std::printf(v > 0 ? "Infinity" : "-Infinity");
    else std::printf("%.9g", v);
}

static void print_ints(const std::vector<llama_token> &t) {
    std::printf("[");
    for (size_t i = 0; i < t.size(); i++) std::printf(i ? ",%d" : "%d", t[i]);
    std::printf("]");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MODEL [--tokens 1,2,3] [--text STRING] [--threads N] [--ctx N]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    std::vector<llama_token> tokens;
    const char *text = nullptr;
    int threads = 1, n_ctx = 256;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--tokens")) {
            for (char *s = argv[i + 1]; *s;) {
                tokens.push_back((llama_token)std::strtol(s, &s, 10));
                if (*s == ',') s++;
            }
        } else if (!std::strcmp(argv[i], "--text")) {
            text = argv[i + 1];
        } else if (!std::strcmp(argv[i], "--threads")) {
            threads = std::atoi(argv[i + 1]);
        } else if (!std::strcmp(argv[i], "--ctx")) {
            n_ctx = std::atoi(argv[i + 1]);
        } else {
            std::fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = false;
    llama_model *model = LOAD_MODEL(path, mp);
    if (!model) {
        std::fprintf(stderr, "harness: llama.cpp could not load %s\n", path);
        return 3;
    }
    const auto *vocab = VOCAB_OF(model);
    const int n_vocab = N_VOCAB(vocab);
    std::vector<llama_token> text_tokens;
    if (text) {
        text_tokens.resize(std::strlen(text) + 8);
        int n = llama_tokenize(vocab, text, (int)std::strlen(text), text_tokens.data(), (int)text_tokens.size(), false, false);
        if (n < 0) {
            std::fprintf(stderr, "harness: tokenize failed (%d)\n", n);
            return 4;
        }
        text_tokens.resize(n);
        if (tokens.empty()) tokens = text_tokens;
    }
    std::printf("{\"n_vocab\": %d", n_vocab);
    if (text) {
        std::printf(", \"text_tokens\": ");
        print_ints(text_tokens);
    }
    std::printf(", \"tokens\": ");
    print_ints(tokens);
    std::printf(", \"logits\": [");
    if (!tokens.empty()) {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = n_ctx;
        cp.n_batch = n_ctx;
        cp.n_ubatch = n_ctx;
        cp.n_threads = threads;
        cp.n_threads_batch = threads;
        llama_context *ctx = NEW_CONTEXT(model, cp);
        if (!ctx) {
            std::fprintf(stderr, "harness: could not create a context\n");
            return 5;
        }
        llama_batch batch = llama_batch_init((int)tokens.size(), 0, 1);
        for (size_t i = 0; i < tokens.size(); i++) {
            batch.token[i] = tokens[i];
            batch.pos[i] = (llama_pos)i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        batch.n_tokens = (int)tokens.size();
        if (llama_decode(ctx, batch) != 0) {
            std::fprintf(stderr, "harness: llama_decode failed\n");
            return 6;
        }
        for (size_t i = 0; i < tokens.size(); i++) {
            const float *l = llama_get_logits_ith(ctx, (int)i);
            std::printf(i ? ",\n[" : "\n[");
            for (int j = 0; j < n_vocab; j++) {
                if (j) std::printf(",");
                print_float(l[j]);
            }
            std::printf("]");
        }
        llama_batch_free(batch);
        llama_free(ctx);
    }
    std::printf("]}\n");
    FREE_MODEL(model);
    llama_backend_free();
    return 0;
}
