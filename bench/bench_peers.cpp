// attnscope's side of the peer comparison (scripts/bench_peers.sh): the same arrays the Python peers read
// (NPY files written by the script into $ATTNSCOPE_PEERS_DIR), one thread: softmax_into a reused output, the exact ‖J‖₂
// of every softmax row from the logits, sparsemax and exact 1.5-entmax rows into a reused output, and the secular
// ‖J‖₂ of 256 probability rows of 256 (against numpy eigvalsh on the dense Jacobians).
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/io/npy.hpp"
#include "attnscope/normalize/entmax.hpp"
#include "attnscope/normalize/jacobian.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/sparsemax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

/// The float32 matrix `name`.npy of the peers directory (empty when $ATTNSCOPE_PEERS_DIR is not set).
RowMatrix<float> peer_array(const std::string& name) {
  const char* directory = std::getenv("ATTNSCOPE_PEERS_DIR");
  if (directory == nullptr) return {};
  return attnscope::io::read_npy(std::string(directory) + "/" + name + ".npy").to_matrix<float>();
}

std::string shape_name(benchmark::State& state) {
  return "logits_" + std::to_string(state.range(0)) + "x" + std::to_string(state.range(1));
}

template <class Body>
void run_on_logits(benchmark::State& state, Body&& body) {
#if defined(_OPENMP)
  omp_set_num_threads(1);
#endif
  const RowMatrix<float> z = peer_array(shape_name(state));
  if (z.size() == 0) {
    state.SkipWithError("set ATTNSCOPE_PEERS_DIR (scripts/bench_peers.sh)");
    return;
  }
  RowMatrix<float> out = RowMatrix<float>::Zero(z.rows(), z.cols());  // reused, touched before timing
  for (auto _ : state) {
    body(z, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * z.size());
}

void attnscope_softmax_into(benchmark::State& state) {
  run_on_logits(state, [](const RowMatrix<float>& z, RowMatrix<float>& out) { attnscope::softmax_into(z, out); });
}
void attnscope_jacobian_norm_from_logits(benchmark::State& state) {
  run_on_logits(state, [](const RowMatrix<float>& z, RowMatrix<float>& out) {
    out(0, 0) = attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1})(0);
  });
}
void attnscope_sparsemax_rows(benchmark::State& state) {
  run_on_logits(state, [](const RowMatrix<float>& z, RowMatrix<float>& out) {
    for (Index i = 0; i < z.rows(); ++i) attnscope::detail::sparsemax_row(&z(i, 0), z.cols(), &out(i, 0));
  });
}
void attnscope_entmax15_rows(benchmark::State& state) {
  run_on_logits(state, [](const RowMatrix<float>& z, RowMatrix<float>& out) {
    for (Index i = 0; i < z.rows(); ++i) attnscope::detail::entmax15_row(&z(i, 0), z.cols(), &out(i, 0));
  });
}
void attnscope_secular_norms_256(benchmark::State& state) {
  const RowMatrix<float> p = peer_array("probabilities_256x256");
  if (p.size() == 0) {
    state.SkipWithError("set ATTNSCOPE_PEERS_DIR (scripts/bench_peers.sh)");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::softmax_jacobian_spectral_norm(p));
}

void peer_shapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->Args({4096, 4096})->Args({16384, 512})->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(attnscope_softmax_into)->Apply(peer_shapes);
BENCHMARK(attnscope_jacobian_norm_from_logits)->Apply(peer_shapes);
BENCHMARK(attnscope_sparsemax_rows)->Apply(peer_shapes);
BENCHMARK(attnscope_entmax15_rows)->Apply(peer_shapes);
BENCHMARK(attnscope_secular_norms_256)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
