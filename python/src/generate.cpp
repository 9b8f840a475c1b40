// Binding of Transformer::generate_with_statistics as Transformer.generate: decoding with the key/value cache
// (greedy, or temperature sampling with a seed) and, with statistics=True, the exact row statistics of every step's
// query row per layer and head, the most attended keys and the key-0 attention of the first rows (sink rate).
// Added to the Transformer class of attnscope.model (python/src/model.cpp).
#include <attnscope/model.hpp>

#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;
namespace model = attnscope::model;

void bind_generate(py::module_& parent) {
  py::class_<model::Transformer> transformer =
      py::reinterpret_borrow<py::class_<model::Transformer>>(parent.attr("model").attr("Transformer"));
  transformer.def(
      "generate",
      [](const model::Transformer& t, const std::vector<int>& tokens, int steps, double temperature,
         std::uint64_t seed, const std::vector<int>& stop_tokens, bool statistics, const std::vector<Index>& sink_keys,
         const std::vector<Index>& top_k, bool jacobian_norm, bool max_weight_excludes_sinks, Index sink_rate_queries) {
        model::GenerationOptions generation;
        generation.temperature = temperature;
        generation.seed = seed;
        generation.stop_tokens = stop_tokens;
        generation.first_key_queries = statistics ? sink_rate_queries : 0;
        model::StreamingOptions streaming;
        streaming.statistics.sink_keys = sink_keys;
        streaming.statistics.top_k = top_k;
        streaming.statistics.jacobian_norm = statistics && jacobian_norm;
        streaming.statistics.max_weight_excludes_sinks = max_weight_excludes_sinks;
        if (!statistics) streaming.heads = {{0, 0}};  // the tokens only: one head's statistics, not returned
        model::GenerationResult result;
        {
          py::gil_scoped_release release;
          result = t.generate_with_statistics(tokens, steps, generation, streaming);
        }
        py::dict out;
        out["tokens"] = result.tokens;
        out["prompt_length"] = result.prompt_length;
        out["steps"] = result.steps;
        if (!statistics) return out;
        out["row_statistics"] = stacked_row_statistics(result.step_statistics);
        const auto& c = t.config();
        const py::ssize_t layers = c.n_layers, heads = c.n_heads, steps_done = result.steps;
        py::array_t<std::int64_t> attended(Shape{layers, heads, steps_done});
        std::int64_t* keys = attended.mutable_data();
        for (const auto& layer : result.most_attended_key)
          for (const auto& head : layer) keys = std::copy_n(head.data(), steps_done, keys);
        out["most_attended_key"] = attended;
        const py::ssize_t rows = result.first_key_attention[0][0].size();
        py::array_t<double> first_key(Shape{layers, heads, rows});
        double* weights = first_key.mutable_data();
        for (const auto& layer : result.first_key_attention)
          for (const auto& head : layer) weights = std::copy_n(head.data(), rows, weights);
        out["first_key_attention"] = first_key;
        if (c.learned_sinks) {
          py::array_t<double> learned(Shape{layers, heads, steps_done});
          double* share = learned.mutable_data();
          for (const auto& layer : result.step_statistics)
            for (const auto& head : layer) share = std::copy_n(head.learned_sink.data(), steps_done, share);
          out["learned_sink"] = learned;
        }
        return out;
      },
      "tokens"_a, "steps"_a, "temperature"_a = 0.0, "seed"_a = 0, "stop_tokens"_a = std::vector<int>{},
      "statistics"_a = true, "sink_keys"_a = std::vector<Index>{0}, "top_k"_a = std::vector<Index>{},
      "jacobian_norm"_a = true, "max_weight_excludes_sinks"_a = false, "sink_rate_queries"_a = 64,
      "Generates `steps` tokens after `tokens` with the key/value cache (greedy at temperature 0, else sampling with\n"
      "attnscope.Random(seed); stops after a token of stop_tokens). Returns a dict: tokens (prompt + generated),\n"
      "prompt_length, steps; with statistics=True also row_statistics (RowStatistics of float64 arrays (n_layers,\n"
      "n_heads, steps): step s is query row prompt_length - 1 + s, the statistics forward_row_statistics computes\n"
      "for that row of the returned tokens), most_attended_key (int64 (n_layers, n_heads, steps)),\n"
      "first_key_attention (float64 (n_layers, n_heads, min(sink_rate_queries, rows run)): the weight on key 0,\n"
      "for the sink rate) and, with learned sinks, learned_sink (n_layers, n_heads, steps).");
}

}  // namespace attnscope_python
