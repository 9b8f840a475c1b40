// analysis::summarize_routing: the load counts every choice once, the mean routing entropy equals the entropy of the
// softmax over all experts computed directly (random logits, several shapes), its bounds (0 for a decided router, ln E
// for equal logits), and the refusals.
#include <cmath>
#include <vector>

#include "attnscope/analysis/routing.hpp"
#include "attnscope/core/random.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {
using attnscope::Index;
using Choices = Eigen::Matrix<int, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

TEST_CASE("summarize_routing: load and mean entropy against direct computation") {
  attnscope::Random random(31);
  for (int trial = 0; trial < 40; ++trial) {
    const Index tokens = 1 + Index(random.below(30)), experts = 2 + Index(random.below(9));
    const Index k = 1 + Index(random.below(std::uint64_t(experts)));
    attnscope::RowMatrix<float> logits(tokens, experts);
    Choices choices(tokens, k);
    std::vector<Index> load(std::size_t(experts), 0);
    double entropy = 0;
    for (Index t = 0; t < tokens; ++t) {
      double sum = 0;
      for (Index e = 0; e < experts; ++e) {
        logits(t, e) = static_cast<float>(3 * random.normal());
        sum += std::exp(double(logits(t, e)));
      }
      for (Index e = 0; e < experts; ++e) {
        const double p = std::exp(double(logits(t, e))) / sum;
        entropy -= p * std::log(p);
      }
      for (Index j = 0; j < k; ++j) {
        choices(t, j) = int((t + j) % experts);
        ++load[std::size_t(choices(t, j))];
      }
    }
    const auto summary = attnscope::analysis::summarize_routing(logits, choices);
    CHECK(summary.load == load);
    CHECK(summary.mean_entropy == Approx(entropy / double(tokens)).epsilon(1e-12));
    CHECK(summary.max_entropy == Approx(std::log(double(experts))));
    CHECK(summary.mean_entropy <= summary.max_entropy + 1e-12);
  }
  // equal logits: ln E; one logit far above the rest: 0
  const attnscope::RowMatrix<float> equal = attnscope::RowMatrix<float>::Constant(3, 4, 0.5f);
  attnscope::RowMatrix<float> decided = attnscope::RowMatrix<float>::Zero(3, 4);
  decided.col(2).setConstant(1000.0f);
  const Choices two = Choices::Constant(3, 1, 2);
  CHECK(attnscope::analysis::summarize_routing(equal, two).mean_entropy == Approx(std::log(4.0)).epsilon(1e-14));
  CHECK(attnscope::analysis::summarize_routing(decided, two).mean_entropy == Approx(0.0).margin(1e-300));
}

TEST_CASE("summarize_routing refuses bad inputs, naming the token") {
  using attnscope::testing::error_message;
  attnscope::RowMatrix<float> logits = attnscope::RowMatrix<float>::Zero(2, 3);
  CHECK(error_message([&] { attnscope::analysis::summarize_routing(logits, Choices::Constant(2, 1, 3)); })
            .find("token 0 chose expert 3") != std::string::npos);
  CHECK(error_message([&] { attnscope::analysis::summarize_routing(logits, Choices::Constant(3, 1, 0)); })
            .find("3 rows for 2 tokens") != std::string::npos);
  logits(1, 2) = NAN;
  CHECK(error_message([&] { attnscope::analysis::summarize_routing(logits, Choices::Constant(2, 1, 0)); })
            .find("at token 1, expert 2") != std::string::npos);
  CHECK(error_message([&] {
          attnscope::analysis::summarize_routing(attnscope::RowMatrix<float>(0, 3), Choices(0, 1));
        }).find("expected non-empty") != std::string::npos);
}
