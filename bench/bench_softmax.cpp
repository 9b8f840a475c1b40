// Softmax and exact Jacobian spectral norms, float32: attnscope::softmax against the naive Eigen
// expression (row max, exp, divide by the sum) and a per-row Eigen loop; the row kernel alone against a plain copy of
// the same bytes; the exact ‖J‖₂ of every softmax row against the softmax itself; the secular method against
// Eigen's SelfAdjointEigenSolver on rows of 256. Shapes 4096×4096 and 16384×512; OpenMP threads 1 and 2 where the
// library loops over rows. Ratios are computed from one run by scripts/bench.sh (docs/performance.md).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>
#include <Eigen/Eigenvalues>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/core/random.hpp"
#include "attnscope/normalize/jacobian.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;

/// Seeded N(0, 9) logits (attention-like spread: row maxima a few units above the bulk).
RowMatrix<float> logits(Index rows, Index cols) {
  attnscope::Random random(2024);
  RowMatrix<float> z(rows, cols);
  for (Index i = 0; i < z.size(); ++i) z.data()[i] = static_cast<float>(3 * random.normal());
  return z;
}

void set_threads([[maybe_unused]] benchmark::State& state, int threads) {
#if defined(_OPENMP)
  omp_set_num_threads(threads);
#else
  if (threads != 1) state.SkipWithError("built without OpenMP");
#endif
}

void set_counters(benchmark::State& state, Index elements, double bytes_per_element) {
  state.SetItemsProcessed(state.iterations() * elements);
  state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations() * elements) * bytes_per_element));
}

/// The naive Eigen expression: row max, exp of the shifted matrix, divide each row by its sum.
void naive_eigen_softmax(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  for (auto _ : state) {
    const Eigen::VectorXf row_max = z.rowwise().maxCoeff();
    const RowMatrix<float> e = (z.colwise() - row_max).array().exp().matrix();
    const Eigen::VectorXf sums = e.rowwise().sum();
    RowMatrix<float> p = e.array().colwise() / sums.array();
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, z.size(), 8);
}

/// The same naive expression evaluated into preallocated, reused matrices (no allocation or first-touch cost).
void naive_eigen_softmax_preallocated(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  Eigen::VectorXf row_max = Eigen::VectorXf::Zero(z.rows()), sums = Eigen::VectorXf::Zero(z.rows());
  RowMatrix<float> e = RowMatrix<float>::Zero(z.rows(), z.cols()), p = e;  // touched before timing
  for (auto _ : state) {
    row_max.noalias() = z.rowwise().maxCoeff();
    e.noalias() = (z.colwise() - row_max).array().exp().matrix();
    sums.noalias() = e.rowwise().sum();
    p.array() = e.array().colwise() / sums.array();
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, z.size(), 8);
}

/// A careful per-row Eigen loop (vectorized Eigen exp, one row at a time, output preallocated).
void per_row_eigen_softmax(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  RowMatrix<float> p = RowMatrix<float>::Zero(z.rows(), z.cols());  // touched before timing
  for (auto _ : state) {
    for (Index i = 0; i < z.rows(); ++i) {
      p.row(i) = (z.row(i).array() - z.row(i).maxCoeff()).exp().matrix();
      p.row(i) /= p.row(i).sum();
    }
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, z.size(), 8);
}

/// attnscope::softmax as users call it (validation, a new output matrix each call); range(2) = OpenMP threads.
void attnscope_softmax(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  set_threads(state, static_cast<int>(state.range(2)));
  for (auto _ : state) {
    RowMatrix<float> p = attnscope::softmax(z);
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, z.size(), 8);
}

/// attnscope::softmax_into a preallocated, reused output; range(2) = OpenMP threads.
void attnscope_softmax_into(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  RowMatrix<float> p = RowMatrix<float>::Zero(z.rows(), z.cols());  // touched before timing
  set_threads(state, static_cast<int>(state.range(2)));
  for (auto _ : state) {
    attnscope::softmax_into(z, p);
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, z.size(), 8);
}

/// The row kernel alone into a preallocated output (no allocation, one thread): compare with copy_same_bytes.
void softmax_row_kernel(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  RowMatrix<float> p = RowMatrix<float>::Zero(z.rows(), z.cols());  // touched before timing
  for (auto _ : state) {
    for (Index i = 0; i < z.rows(); ++i)
      benchmark::DoNotOptimize(attnscope::detail::try_softmax_row(z.data() + i * z.cols(), z.cols(), 1.0f,
                                                                  p.data() + i * z.cols()));
    benchmark::ClobberMemory();
  }
  set_counters(state, z.size(), 8);
}

/// memcpy of the same bytes into a preallocated buffer: the bandwidth ceiling of one read + one write per element.
void copy_same_bytes(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  RowMatrix<float> p = RowMatrix<float>::Zero(z.rows(), z.cols());  // touched before timing
  for (auto _ : state) {
    std::memcpy(p.data(), z.data(), sizeof(float) * static_cast<std::size_t>(z.size()));
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, z.size(), 8);
}

/// Allocating and first-touching a fresh output matrix of the same shape (what every call returning a new matrix pays;
/// on the benchmark VM this costs more than the softmax arithmetic).
void fresh_output_matrix(benchmark::State& state) {
  for (auto _ : state) {
    RowMatrix<float> p(state.range(0), state.range(1));
    p.setZero();
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, state.range(0) * state.range(1), 4);
}

/// Exact ‖J‖₂ of every softmax row (public API with validation); range(2) = OpenMP threads.
void softmax_spectral_norm(benchmark::State& state) {
  const RowMatrix<float> p = attnscope::softmax(logits(state.range(0), state.range(1)));
  set_threads(state, static_cast<int>(state.range(2)));
  for (auto _ : state) {
    attnscope::Vector<float> norms = attnscope::softmax_jacobian_spectral_norm(p);
    benchmark::DoNotOptimize(norms.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, p.size(), 4);
}

/// Exact ‖J‖₂ of every softmax row from the logits (jacobian_spectral_norm with SoftmaxMap, fused per row: softmax
/// into a row buffer, then the secular root; no rows×cols probability matrix), one thread.
void softmax_spectral_norm_from_logits(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  set_threads(state, 1);
  for (auto _ : state) {
    attnscope::Vector<float> norms = attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1});
    benchmark::DoNotOptimize(norms.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, z.size(), 4);
}

/// The cheap two-sided bound of every row (one pass).
void softmax_norm_bounds(benchmark::State& state) {
  const RowMatrix<float> p = attnscope::softmax(logits(state.range(0), state.range(1)));
  set_threads(state, 1);
  for (auto _ : state) {
    auto bounds = attnscope::softmax_jacobian_norm_bounds(p);
    benchmark::DoNotOptimize(bounds.upper.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, p.size(), 4);
}

/// Paired timing for ratios on a shared, noisy machine: every iteration times `baseline` and then `candidate` on the same
/// data, back to back, so both see the same load; the counters are the medians of the two times and of the per-pair
/// ratio baseline/candidate (`speed_fraction`: 0.7 means the candidate runs at 0.7 of the baseline's speed). The
/// reported time is the candidate's (manual time).
template <class Baseline, class Candidate>
void run_paired(benchmark::State& state, Baseline&& baseline, Candidate&& candidate) {
  using clock = std::chrono::steady_clock;
  std::vector<double> baseline_ms, candidate_ms, fractions;
  for (auto _ : state) {
    const auto start = clock::now();
    baseline();
    const auto middle = clock::now();
    candidate();
    const auto end = clock::now();
    const double first = std::chrono::duration<double, std::milli>(middle - start).count();
    const double second = std::chrono::duration<double, std::milli>(end - middle).count();
    baseline_ms.push_back(first);
    candidate_ms.push_back(second);
    fractions.push_back(first / second);
    state.SetIterationTime(second / 1e3);
  }
  const auto median = [](std::vector<double> values) {
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    return values[values.size() / 2];
  };
  state.counters["baseline_ms"] = median(baseline_ms);
  state.counters["candidate_ms"] = median(candidate_ms);
  state.counters["speed_fraction"] = median(fractions);
}

/// Performance target (docs/performance.md): softmax_into (reused output, one thread) paired with a memcpy of the same
/// bytes; the target is speed_fraction ≥ 0.7.
void softmax_into_paired_with_copy(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  RowMatrix<float> p = RowMatrix<float>::Zero(z.rows(), z.cols()), copy = p;  // touched before timing
  set_threads(state, 1);
  run_paired(
      state,
      [&] {
        std::memcpy(copy.data(), z.data(), sizeof(float) * static_cast<std::size_t>(z.size()));
        benchmark::DoNotOptimize(copy.data());
        benchmark::ClobberMemory();
      },
      [&] {
        attnscope::softmax_into(z, p);
        benchmark::DoNotOptimize(p.data());
        benchmark::ClobberMemory();
      });
}

/// Performance target (docs/performance.md): the exact ‖J‖₂ of every row from the logits paired with softmax_into of
/// the same logits (one thread); the target is candidate/baseline ≤ 1.5, i.e. speed_fraction ≥ 0.67.
void norm_from_logits_paired_with_softmax_into(benchmark::State& state) {
  const RowMatrix<float> z = logits(state.range(0), state.range(1));
  RowMatrix<float> p = RowMatrix<float>::Zero(z.rows(), z.cols());  // touched before timing
  set_threads(state, 1);
  run_paired(
      state,
      [&] {
        attnscope::softmax_into(z, p);
        benchmark::DoNotOptimize(p.data());
        benchmark::ClobberMemory();
      },
      [&] {
        attnscope::Vector<float> norms = attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1});
        benchmark::DoNotOptimize(norms.data());
        benchmark::ClobberMemory();
      });
}

/// Rows of 256: the secular method per row (no validation) ...
void secular_rows_256(benchmark::State& state) {
  const RowMatrix<float> p = attnscope::softmax(logits(256, 256));
  for (auto _ : state) {
    for (Index i = 0; i < p.rows(); ++i)
      benchmark::DoNotOptimize(attnscope::detail::softmax_jacobian_norm_row(p.data() + i * 256, Index{256}, 1.0f));
  }
  state.SetItemsProcessed(state.iterations() * p.rows());
}

/// ... and Eigen's dense SelfAdjointEigenSolver (eigenvalues only) on J = diag p − ppᵀ of the same rows.
void eigensolver_rows_256(benchmark::State& state) {
  const RowMatrix<float> p = attnscope::softmax(logits(256, 256));
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXf> solver(256);
  Eigen::MatrixXf jacobian(256, 256);
  for (auto _ : state) {
    for (Index i = 0; i < p.rows(); ++i) {
      const Eigen::VectorXf row = p.row(i).transpose();
      jacobian = -row * row.transpose();
      jacobian.diagonal() += row;
      solver.compute(jacobian, Eigen::EigenvaluesOnly);
      benchmark::DoNotOptimize(solver.eigenvalues()(255));
    }
  }
  state.SetItemsProcessed(state.iterations() * p.rows());
}

void shapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->Args({4096, 4096})->Args({16384, 512})->Unit(benchmark::kMillisecond);
}

void shapes_and_threads(benchmark::internal::Benchmark* benchmark) {
  for (int threads : {1, 2}) benchmark->Args({4096, 4096, threads})->Args({16384, 512, threads});
  benchmark->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(naive_eigen_softmax)->Apply(shapes);
BENCHMARK(naive_eigen_softmax_preallocated)->Apply(shapes);
BENCHMARK(per_row_eigen_softmax)->Apply(shapes);
BENCHMARK(attnscope_softmax)->Apply(shapes_and_threads);
BENCHMARK(attnscope_softmax_into)->Apply(shapes_and_threads);
BENCHMARK(softmax_row_kernel)->Apply(shapes);
BENCHMARK(copy_same_bytes)->Apply(shapes);
BENCHMARK(fresh_output_matrix)->Apply(shapes);
BENCHMARK(softmax_spectral_norm)->Apply(shapes_and_threads);
BENCHMARK(softmax_spectral_norm_from_logits)->Apply(shapes);
BENCHMARK(softmax_norm_bounds)->Apply(shapes);
BENCHMARK(softmax_into_paired_with_copy)->Apply(shapes)->UseManualTime()->MinTime(2.0);
BENCHMARK(norm_from_logits_paired_with_softmax_into)->Apply(shapes)->UseManualTime()->MinTime(2.0);
BENCHMARK(secular_rows_256)->Unit(benchmark::kMicrosecond);
BENCHMARK(eigensolver_rows_256)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
