// bench/llamacpp_peer/llamacpp_peer.cpp — times llama.cpp's prompt processing (one llama_decode of N tokens, CPU
// only) for bench/llamacpp_side_by_side.sh, and writes the last token's logits. Built only by that script, against
// node-llama-cpp's prebuilt CPU libraries and the llama.cpp headers of the same release (see the script).
//
//   llamacpp_peer MODEL.gguf BACKEND_DIR TOKENS THREADS FLASH(0|1) REPEATS LOGITS.f32
//
// Prints one line per repeat, "seconds S", each a fresh context (empty cache) decoding tokens 1..TOKENS (ids
// t mod vocab) in one batch with logits for the last token only; LOGITS.f32 gets that row (float32, vocab values).
// With PEER_KV_F32=1 in the environment the key/value cache is float32 instead of llama.cpp's default float16 (for
// comparing logits with attnscope, whose attention is float32).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s MODEL.gguf BACKEND_DIR TOKENS THREADS FLASH(0|1) REPEATS LOGITS.f32\n", argv[0]);
    return 2;
  }
  const int tokens = std::atoi(argv[3]), threads = std::atoi(argv[4]), flash = std::atoi(argv[5]),
            repeats = std::atoi(argv[6]);
  llama_log_set(quiet_log, nullptr);
  ggml_backend_load_all_from_path(argv[2]);  // the CPU variant that fits this CPU
  llama_backend_init();
  llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], model_params);
  if (model == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<float> last(static_cast<std::size_t>(vocab));
  for (int r = 0; r < repeats; ++r) {
    llama_context_params context_params = llama_context_default_params();
    context_params.n_ctx = static_cast<std::uint32_t>(tokens);
    context_params.n_batch = context_params.n_ubatch = static_cast<std::uint32_t>(tokens);
    context_params.n_threads = context_params.n_threads_batch = threads;
    context_params.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    context_params.no_perf = true;
    if (const char* kv = std::getenv("PEER_KV_F32"); kv != nullptr && std::string(kv) == "1")
      context_params.type_k = context_params.type_v = GGML_TYPE_F32;
    llama_context* context = llama_init_from_model(model, context_params);
    if (context == nullptr) {
      std::fprintf(stderr, "cannot create a context\n");
      return 1;
    }
    llama_batch batch = llama_batch_init(tokens, 0, 1);
    for (int i = 0; i < tokens; ++i) {
      batch.token[i] = (i + 1) % vocab;
      batch.pos[i] = i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = i + 1 == tokens;
    }
    batch.n_tokens = tokens;
    const auto start = std::chrono::steady_clock::now();
    const int status = llama_decode(context, batch);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status != 0) {
      std::fprintf(stderr, "llama_decode failed: %d\n", status);
      return 1;
    }
    const float* logits = llama_get_logits_ith(context, tokens - 1);
    for (int v = 0; v < vocab; ++v) last[static_cast<std::size_t>(v)] = logits[v];
    std::printf("seconds %.4f\n", seconds);
    std::fflush(stdout);
    llama_batch_free(batch);
    llama_free(context);
  }
  if (std::FILE* out = std::fopen(argv[7], "wb")) {
    std::fwrite(last.data(), sizeof(float), last.size(), out);
    std::fclose(out);
  }
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
