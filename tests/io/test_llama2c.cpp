// Tests of the llama2.c checkpoint reader/writer: the real stories260K.bin against values read independently
// (Python struct/numpy one-off, hex-float constants below), v0/v1/v2 round trips, Q8_0 bounds, every failure mode.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attnscope/io/llama2c.hpp"
#include "io_test_support.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/data.hpp"

using namespace attnscope;
using attnscope::testing::bytes_of;
using attnscope::testing::error_message;
using attnscope::testing::poke_int32;

namespace {

std::string read_bytes(const std::string& path) {
  const auto bytes = io::read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

io::LlamaWeights parse_llama2c(const std::string& bytes, const std::string& name = "mem.bin") {
  return io::parse_llama2c(bytes_of(bytes), bytes.size(), name);
}

void require_equal_weights(const io::LlamaWeights& a, const io::LlamaWeights& b) {
  CHECK(a.config.dim == b.config.dim);
  CHECK(a.config.hidden_dim == b.config.hidden_dim);
  CHECK(a.config.n_layers == b.config.n_layers);
  CHECK(a.config.n_heads == b.config.n_heads);
  CHECK(a.config.n_kv_heads == b.config.n_kv_heads);
  CHECK(a.config.vocab_size == b.config.vocab_size);
  CHECK(a.config.seq_len == b.config.seq_len);
  CHECK(a.config.shared_classifier == b.config.shared_classifier);
  CHECK(a.token_embedding == b.token_embedding);
  CHECK(a.classifier == b.classifier);
  CHECK(a.rms_final == b.rms_final);
  REQUIRE(a.layers.size() == b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const auto &x = a.layers[l], &y = b.layers[l];
    CHECK(x.rms_attention == y.rms_attention);
    CHECK(x.rms_ffn == y.rms_ffn);
    CHECK(x.wq == y.wq);
    CHECK(x.wk == y.wk);
    CHECK(x.wv == y.wv);
    CHECK(x.wo == y.wo);
    CHECK(x.w1 == y.w1);
    CHECK(x.w2 == y.w2);
    CHECK(x.w3 == y.w3);
  }
}

// |x − dequantize(quantize(x))| ≤ max|group|/254 (half a quantization step) + float rounding.
void check_q8_error(const float* original, const float* restored, Index count, int group_size) {
  for (Index g = 0; g < count / group_size; ++g) {
    float max_abs = 0;
    for (Index i = g * group_size; i < (g + 1) * group_size; ++i) max_abs = std::max(max_abs, std::abs(original[i]));
    for (Index i = g * group_size; i < (g + 1) * group_size; ++i)
      REQUIRE(std::abs(original[i] - restored[i]) <= max_abs / 254.0f * 1.0001f + 1e-7f);
  }
}

}  // namespace

TEST_CASE("stories260K.bin: config and weights match an independent read", "[io][llama2c]") {
  const io::LlamaWeights w = io::read_llama2c(attnscope::testing::data_file("stories260K.bin"));
  const io::LlamaConfig& c = w.config;
  CHECK(w.version == 0);
  CHECK(c.dim == 64);
  CHECK(c.hidden_dim == 172);
  CHECK(c.n_layers == 5);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.vocab_size == 512);
  CHECK(c.seq_len == 512);
  CHECK(c.shared_classifier);
  CHECK(c.head_size() == 8);
  CHECK(c.kv_dim() == 32);
  REQUIRE(w.layers.size() == 5);
  // Constants from a one-off Python struct/numpy read of the same file (offsets per data/README.md).
  CHECK(w.token_embedding(0, 0) == -0x1.2dd2a0p-2f);
  CHECK(w.token_embedding(0, 1) == 0x1.1fb0c8p-1f);
  CHECK(w.token_embedding(300, 17) == 0x1.663b48p-3f);
  CHECK(w.token_embedding(511, 63) == -0x1.b2359ap-2f);
  CHECK(w.token_embedding.cast<double>().sum() == Approx(-752.3677446640068).epsilon(1e-12));
  CHECK(w.layers[0].rms_attention(0) == 0x1.f1c9d4p-1f);
  CHECK(w.layers[4].rms_attention(63) == 0x1.10a0f4p+0f);
  CHECK(w.layers[0].wq(0, 0) == 0x1.6baa6cp-5f);
  CHECK(w.layers[0].wq(0, 1) == 0x1.cbe314p-3f);
  CHECK(w.layers[2].wq(5, 7) == 0x1.525844p-2f);
  CHECK(w.layers[4].wq(63, 63) == -0x1.8319aep-3f);
  CHECK(w.layers[0].wk(0, 0) == 0x1.baa26cp-3f);
  CHECK(w.layers[4].wk(31, 63) == -0x1.0f7e48p-2f);
  CHECK(w.layers[1].wk.cast<double>().sum() == Approx(-6.456831653835252).epsilon(1e-12));
  CHECK(w.layers[0].wv(0, 0) == 0x1.753ff2p-4f);
  CHECK(w.layers[4].wv(31, 63) == 0x1.69f5bep-4f);
  CHECK(w.layers[0].wo(0, 0) == 0x1.1c2aa0p-6f);
  CHECK(w.layers[4].wo(63, 63) == 0x1.968efep-8f);
  CHECK(w.layers[0].rms_ffn(0) == 0x1.793ad8p-1f);
  CHECK(w.layers[4].rms_ffn(63) == 0x1.3bf88ap+0f);
  CHECK(w.layers[0].w1(0, 0) == 0x1.b5a15ap-3f);
  CHECK(w.layers[4].w1(171, 63) == -0x1.2616c4p-3f);
  CHECK(w.layers[4].w1.cast<double>().sum() == Approx(8.018803581173415).epsilon(1e-12));
  CHECK(w.layers[0].w2(0, 0) == 0x1.147298p-3f);
  CHECK(w.layers[3].w2(10, 100) == 0x1.a313b0p-7f);
  CHECK(w.layers[4].w2(63, 171) == -0x1.cba716p-9f);
  CHECK(w.layers[0].w3(0, 0) == 0x1.203d8ap-4f);
  CHECK(w.layers[4].w3(171, 63) == 0x1.b24e8cp-4f);
  CHECK(w.rms_final(0) == 0x1.3aa9dep+1f);
  CHECK(w.rms_final(63) == 0x1.b530dep+0f);
  CHECK(w.classifier == w.token_embedding);
}

TEST_CASE("stories260K.bin: version-0 writer reproduces the file (RoPE tables to 1 ulp)", "[io][llama2c]") {
  const std::string original = read_bytes(attnscope::testing::data_file("stories260K.bin"));
  const io::LlamaWeights w = parse_llama2c(original);
  const std::string written = io::serialize_llama2c(w, 0);
  REQUIRE(written.size() == original.size());
  // Everything before the two legacy tables is bit-identical.
  const std::size_t rope_floats = 512 * 8 / 2, rope_start = original.size() - 2 * 4 * rope_floats;
  CHECK(written.compare(0, rope_start, original, 0, rope_start) == 0);
  // The tables (export.py precompute_freqs_cis in float32) agree to within one float32 ulp of 1.
  std::vector<float> ours(2 * rope_floats), theirs(2 * rope_floats);
  std::memcpy(ours.data(), written.data() + rope_start, 8 * rope_floats);
  std::memcpy(theirs.data(), original.data() + rope_start, 8 * rope_floats);
  double max_difference = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) max_difference = std::max(max_difference, double(std::abs(ours[i] - theirs[i])));
  CHECK(max_difference <= 1.2e-7);
  CHECK(theirs[rope_floats / 512 * 1 + 0] == Approx(std::cos(1.0)).margin(1e-7));  // t = 1, i = 0: cos(1)
}

TEST_CASE("llama2c v0 -> v1 -> v0 round trips are exact, shared and unshared classifier", "[io][llama2c]") {
  for (bool shared : {true, false}) {
    const io::LlamaWeights w = attnscope::testing::random_llama_weights(attnscope::testing::small_llama_config(shared), 7);
    for (int version : {0, 1}) {
      const std::string bytes = io::serialize_llama2c(w, version);
      const io::LlamaWeights back = parse_llama2c(bytes);
      CHECK(back.version == version);
      require_equal_weights(w, back);
      CHECK(io::serialize_llama2c(back, 1 - version) == io::serialize_llama2c(w, 1 - version));
    }
  }
  // The real model through v1 and back to v0 reproduces the original bytes of the tensors.
  const std::string original = read_bytes(attnscope::testing::data_file("stories260K.bin"));
  const io::LlamaWeights real = parse_llama2c(original);
  const io::LlamaWeights via_v1 = parse_llama2c(io::serialize_llama2c(real, 1));
  CHECK(via_v1.version == 1);
  require_equal_weights(real, via_v1);
  CHECK(io::serialize_llama2c(via_v1, 0) == io::serialize_llama2c(real, 0));
}

TEST_CASE("llama2c version 1/2 headers have the export.py byte layout", "[io][llama2c]") {
  const io::LlamaWeights w = attnscope::testing::random_llama_weights(attnscope::testing::small_llama_config(false), 3);
  for (int version : {1, 2}) {
    const std::string bytes = io::serialize_llama2c(w, version, 4);
    REQUIRE(bytes.size() > 256);
    CHECK(bytes.compare(0, 4, "24ka") == 0);  // uint32 0x616b3432 little-endian
    std::int32_t ints[8];
    std::memcpy(ints, bytes.data() + 4, sizeof ints);
    CHECK(ints[0] == version);
    CHECK(ints[1] == 8);
    CHECK(ints[2] == 12);
    CHECK(ints[3] == 2);
    CHECK(ints[4] == 2);
    CHECK(ints[5] == 1);
    CHECK(ints[6] == 16);  // vocab positive: the flag byte carries sharing
    CHECK(ints[7] == 6);
    CHECK(bytes[36] == 0);  // shared_classifier = false
    std::size_t padding_start = 37;
    if (version == 2) {
      std::int32_t group_size;
      std::memcpy(&group_size, bytes.data() + 37, 4);
      CHECK(group_size == 4);
      padding_start = 41;
    }
    CHECK(bytes.find_first_not_of('\0', padding_start) == 256);
    // Version 1: the first float after the header is layer 0's rms_attention[0].
    if (version == 1) {
      float first;
      std::memcpy(&first, bytes.data() + 256, 4);
      CHECK(first == w.layers[0].rms_attention(0));
    }
  }
  // Version 0: negative vocab_size marks the unshared classifier; 7 ints then the embedding.
  const std::string v0 = io::serialize_llama2c(w, 0);
  std::int32_t vocab;
  std::memcpy(&vocab, v0.data() + 20, 4);
  CHECK(vocab == -16);
  float first;
  std::memcpy(&first, v0.data() + 28, 4);
  CHECK(first == w.token_embedding(0, 0));
}

TEST_CASE("llama2c version 2: hand-built Q8_0 file dequantizes to q * scale", "[io][llama2c]") {
  // dim 4, hidden 4, 1 layer, 2 heads, 1 kv head (kv_dim 2), vocab 2, seq 2, shared, group size 2.
  std::string bytes;
  io::detail::append_little_endian<std::uint32_t>(bytes, 0x616b3432);
  for (std::int32_t v : {2, 4, 4, 1, 2, 1, 2, 2}) io::detail::append_little_endian(bytes, v);
  bytes.push_back(1);
  io::detail::append_little_endian<std::int32_t>(bytes, 2);
  bytes.resize(256, '\0');
  float next = 0.25f;  // fp32 norms: rms_att (4), rms_ffn (4), rms_final (4)
  for (int i = 0; i < 12; ++i) io::detail::append_little_endian(bytes, next += 0.25f);
  // Quantized tensors in order: embedding 2x4, wq 4x4, wk 2x4, wv 2x4, wo 4x4, w1 4x4, w2 4x4, w3 4x4.
  const int counts[] = {8, 16, 8, 8, 16, 16, 16, 16};
  for (int t = 0; t < 8; ++t) {
    for (int i = 0; i < counts[t]; ++i) bytes.push_back(static_cast<char>(static_cast<std::int8_t>((i * 37 + t) % 255 - 127)));
    for (int g = 0; g < counts[t] / 2; ++g) io::detail::append_little_endian(bytes, 0.01f * float(t + 1) + 0.001f * float(g));
  }
  const io::LlamaWeights w = parse_llama2c(bytes);
  CHECK(w.version == 2);
  CHECK(w.group_size == 2);
  CHECK(w.layers[0].rms_attention(0) == 0.5f);
  CHECK(w.rms_final(3) == 3.25f);
  auto expected = [](int t, int i) {
    return float(std::int8_t((i * 37 + t) % 255 - 127)) * (0.01f * float(t + 1) + 0.001f * float(i / 2));
  };
  for (int i = 0; i < 8; ++i) CHECK(w.token_embedding.data()[i] == expected(0, i));
  for (int i = 0; i < 16; ++i) CHECK(w.layers[0].wq.data()[i] == expected(1, i));
  for (int i = 0; i < 8; ++i) CHECK(w.layers[0].wv.data()[i] == expected(3, i));
  for (int i = 0; i < 16; ++i) CHECK(w.layers[0].w3.data()[i] == expected(7, i));
  CHECK(w.classifier == w.token_embedding);
}

TEST_CASE("llama2c version 2 round trip: Q8_0 error within half a step, re-export stable", "[io][llama2c]") {
  for (bool shared : {true, false}) {
    const io::LlamaWeights w = attnscope::testing::random_llama_weights(attnscope::testing::small_llama_config(shared), 11);
    const io::LlamaWeights q = parse_llama2c(io::serialize_llama2c(w, 2, 4));
    CHECK(q.version == 2);
    CHECK(q.group_size == 4);
    CHECK(q.layers[1].rms_ffn == w.layers[1].rms_ffn);  // norms stay fp32
    check_q8_error(w.token_embedding.data(), q.token_embedding.data(), w.token_embedding.size(), 4);
    check_q8_error(w.classifier.data(), q.classifier.data(), w.classifier.size(), 4);
    for (std::size_t l = 0; l < w.layers.size(); ++l)
      for (auto member : {&io::LlamaLayerWeights::wq, &io::LlamaLayerWeights::wk, &io::LlamaLayerWeights::wv,
                          &io::LlamaLayerWeights::wo, &io::LlamaLayerWeights::w1, &io::LlamaLayerWeights::w2,
                          &io::LlamaLayerWeights::w3})
        check_q8_error((w.layers[l].*member).data(), (q.layers[l].*member).data(), (w.layers[l].*member).size(), 4);
    // Quantizing already-quantized weights changes them by at most one float rounding.
    const io::LlamaWeights twice = parse_llama2c(io::serialize_llama2c(q, 2, 4));
    CHECK((twice.layers[0].w2 - q.layers[0].w2).cwiseAbs().maxCoeff() <= 1e-6f * q.layers[0].w2.cwiseAbs().maxCoeff());
  }
  // The real model quantized with group size 64 (export.py default).
  const io::LlamaWeights real = io::read_llama2c(attnscope::testing::data_file("stories260K.bin"));
  const std::string v2 = io::serialize_llama2c(real, 2);
  CHECK(v2.size() == 256 + 4 * (11 * 64) + (512 * 64 + 5 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64)) * (1 + 4.0 / 64));
  const io::LlamaWeights q = parse_llama2c(v2);
  check_q8_error(real.layers[2].w1.data(), q.layers[2].w1.data(), real.layers[2].w1.size(), 64);
  check_q8_error(real.token_embedding.data(), q.token_embedding.data(), real.token_embedding.size(), 64);
}

TEST_CASE("llama2c: truncation at any offset and trailing bytes give io_error", "[io][llama2c][errors]") {
  const std::string real = read_bytes(attnscope::testing::data_file("stories260K.bin"));
  for (std::size_t cut = 0; cut < real.size(); cut += 997) {
    const std::string message = error_message<io_error>([&] { parse_llama2c(real.substr(0, cut), "cut.bin"); });
    INFO("cut at " << cut << ": " << message);
    CHECK(message.find("attnscope::parse_llama2c: cut.bin: ") == 0);
  }
  CHECK(error_message<io_error>([&] { parse_llama2c(real + std::string(1, '\0')); }).find("does not match") != std::string::npos);
  const io::LlamaWeights w = attnscope::testing::random_llama_weights(attnscope::testing::small_llama_config(false), 5);
  for (int version : {0, 1, 2}) {
    const std::string bytes = io::serialize_llama2c(w, version, 4);
    for (std::size_t cut = 0; cut < bytes.size(); ++cut)
      REQUIRE_THROWS_AS(parse_llama2c(bytes.substr(0, cut)), io_error);
    REQUIRE_THROWS_AS(parse_llama2c(bytes + "x"), io_error);
    CHECK_NOTHROW(parse_llama2c(bytes));
  }
}

TEST_CASE("llama2c: corrupt headers give io_error naming the problem", "[io][llama2c][errors]") {
  const io::LlamaWeights w = attnscope::testing::random_llama_weights(attnscope::testing::small_llama_config(true), 9);
  const std::string v0 = io::serialize_llama2c(w, 0), v1 = io::serialize_llama2c(w, 1), v2 = io::serialize_llama2c(w, 2, 4);
  auto message_after = [&](std::string bytes, std::size_t offset, std::int32_t value) {
    poke_int32(bytes, offset, value);
    return error_message<io_error>([&] { parse_llama2c(bytes, "bad.bin"); });
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message_after(v0, 12, -2), Contains("bad.bin") && Contains("n_heads = -2"));
  CHECK_THAT(message_after(v0, 12, 3), Contains("dim = 8 is not divisible by n_heads = 3"));
  CHECK_THAT(message_after(v0, 16, 3), Contains("n_kv_heads = 3 does not divide n_heads = 2"));
  CHECK_THAT(message_after(v0, 0, 0), Contains("dim = 0"));
  CHECK_THAT(message_after(v0, 8, 5000), Contains("n_layers = 5000 is outside"));
  CHECK_THAT(message_after(v0, 20, std::numeric_limits<std::int32_t>::min()), Contains("vocab_size"));
  CHECK_THAT(message_after(v0, 0, 6), Contains("head_size"));  // dim 6, 2 heads: head size 3 is odd
  // Absurd but individually allowed sizes: the implied byte count is rejected before any allocation.
  std::string absurd = v0;
  for (std::size_t offset : {0, 4, 24}) poke_int32(absurd, offset, 1 << 20);
  poke_int32(absurd, 8, 4096);
  poke_int32(absurd, 12, 1 << 10);
  poke_int32(absurd, 16, 1 << 10);
  CHECK_THAT(error_message<io_error>([&] { parse_llama2c(absurd); }), Contains("does not match"));
  // Versioned headers: version, flag, group size, padding, magic.
  CHECK_THAT(message_after(v1, 4, 3), Contains("unsupported llama2c checkpoint version 3"));
  std::string flag = v1;
  flag[36] = 2;
  CHECK_THAT(error_message<io_error>([&] { parse_llama2c(flag); }), Contains("shared_classifier flag must be 0 or 1"));
  CHECK_THAT(message_after(v2, 37, 0), Contains("group_size = 0"));
  CHECK_THAT(message_after(v2, 37, 3), Contains("not a multiple of group_size 3"));
  std::string padding = v1;
  padding[200] = 1;
  CHECK_THAT(error_message<io_error>([&] { parse_llama2c(padding); }), Contains("nonzero header padding byte at offset 200"));
  std::string magic = v1;
  magic[0] = 'x';  // no longer versioned: read as version 0 with an absurd dim
  CHECK_THAT(error_message<io_error>([&] { parse_llama2c(magic); }), Contains("invalid configuration"));
  CHECK_THAT(message_after(v0, 24, 7), Contains("does not match"));  // seq_len changes the RoPE table size
  // Every single header byte flipped: either still valid or an io_error, never anything else.
  for (const std::string* bytes : {&v0, &v1, &v2})
    for (std::size_t i = 0; i < (bytes == &v0 ? 28u : 64u); ++i)
      for (int bit = 0; bit < 8; ++bit) {
        std::string flipped = *bytes;
        flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
        try {
          parse_llama2c(flipped);
        } catch (const io_error&) {
        }
      }
}

TEST_CASE("llama2c: non-finite weights and scales are rejected", "[io][llama2c][errors]") {
  const io::LlamaWeights w = attnscope::testing::random_llama_weights(attnscope::testing::small_llama_config(true), 9);
  std::string v1 = io::serialize_llama2c(w, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&v1[256 + 4 * 3], &nan, 4);  // layer 0 rms_attention[3]
  CHECK_THAT(error_message<io_error>([&] { parse_llama2c(v1); }), Catch::Matchers::Contains("layers[0].rms_attention at flat index 3"));
  std::string v2 = io::serialize_llama2c(w, 2, 4);
  const float inf = std::numeric_limits<float>::infinity();
  const std::size_t embedding_scales = 256 + 4 * (2 * 2 * 8 + 8) + 16 * 8;
  std::memcpy(&v2[embedding_scales + 4], &inf, 4);
  CHECK_THAT(error_message<io_error>([&] { parse_llama2c(v2); }), Catch::Matchers::Contains("non-finite Q8_0 scale inf in token_embedding at group 1"));
}

TEST_CASE("llama2c writer and file errors", "[io][llama2c][errors]") {
  io::LlamaWeights w = attnscope::testing::random_llama_weights(attnscope::testing::small_llama_config(true), 1);
  CHECK_THROWS_AS(io::serialize_llama2c(w, 3), invalid_argument);
  CHECK_THROWS_AS(io::serialize_llama2c(w, 2, 3), invalid_argument);  // 3 does not divide dim 8
  CHECK_THROWS_AS(io::serialize_llama2c(w, 2, 0), invalid_argument);
  io::LlamaWeights bad = w;
  bad.layers[1].wk.resize(3, 8);
  CHECK_THROWS_WITH(io::serialize_llama2c(bad, 1), Catch::Matchers::Contains("wk has shape 3x8, expected 4x8"));
  bad = w;
  bad.layers.pop_back();
  CHECK_THROWS_AS(io::serialize_llama2c(bad, 1), invalid_argument);
  bad = w;
  bad.classifier(0, 0) += 1;
  CHECK_THROWS_WITH(io::serialize_llama2c(bad, 0), Catch::Matchers::Contains("classifier differs"));
  bad = w;
  bad.layers[0].w2(1, 1) = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(io::serialize_llama2c(bad, 0), Catch::Matchers::Contains("layers[0].w2"));
  bad = w;
  bad.config.n_kv_heads = 3;
  CHECK_THROWS_AS(io::serialize_llama2c(bad, 0), invalid_argument);
  CHECK_THROWS_WITH(io::read_llama2c("/nonexistent/model.bin"), Catch::Matchers::Contains("/nonexistent/model.bin"));
  CHECK_THROWS_AS(io::read_llama2c(attnscope::testing::data_dir()), io_error);
  CHECK_THROWS_AS(io::write_llama2c("/nonexistent/dir/model.bin", w, 0), io_error);
  CHECK_THROWS_AS(io::parse_llama2c(nullptr, 0, "empty"), io_error);
}
