// Bindings of attnscope::model: llama2.c checkpoints and Hugging Face folders (GPT-2, Llama, Mistral, Qwen2) run by
// one Transformer; forward passes with per-head captures (as numpy arrays), "what if" normalization maps, ablation,
// generation, likelihood and the streaming forward with exact row statistics.
#include <attnscope/analysis/capture.hpp>
#include <attnscope/model.hpp>
#include <attnscope/model/load.hpp>

#include "arrays.hpp"
#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;
namespace model = attnscope::model;

namespace {

/// The capture of a forward pass as a dict of numpy arrays, named and stacked by the library's capture layout
/// (io/capture_layout.hpp, the names of `attnscope capture` files): "logits" (handed over without a copy),
/// (n_heads, L, .) for each layer and captured part (e.g. "layer0.attention") and "hidden_states" (n_layers + 1, L,
/// dim).
py::dict capture_dict(model::ForwardResult& result) {
  py::dict out;
  const Shape logits_shape{result.logits.rows(), result.logits.cols()};
  out[attnscope::io::capture_part::logits] = take_as_array(std::move(result.logits), logits_shape);
  result.logits.resize(0, 0);
  for (auto& [name, array] : attnscope::analysis::capture_arrays(result)) out[py::str(name)] = to_numpy(std::move(array));
  return out;
}

model::CaptureOptions capture_of(const std::vector<std::string>& names) {
  model::CaptureOptions capture;
  for (const std::string& name : names) {
    if (name == "q") capture.q = true;
    else if (name == "k") capture.k = true;
    else if (name == "v") capture.v = true;
    else if (name == "scores") capture.scores = true;
    else if (name == "attention") capture.attention = true;
    else if (name == "head_output") capture.head_output = true;
    else if (name == "hidden_states") capture.hidden_states = true;
    else
      throw_value_error("model.Transformer.capture", "unknown capture '" + name +
                                                         "' (q, k, v, scores, attention, head_output, hidden_states)");
  }
  return capture;
}

/// ForwardOptions from the keyword arguments map / ablated_heads / ablation_mode.
model::ForwardOptions forward_options(const py::object& map, const std::vector<std::pair<int, int>>& ablated_heads,
                                      const std::string& ablation_mode) {
  model::ForwardOptions options;
  if (!map.is_none()) options.map = to_map(map);
  options.ablated_heads.insert(ablated_heads.begin(), ablated_heads.end());
  if (ablation_mode == "mean")
    options.ablation_mode = model::AblationMode::mean;
  else if (ablation_mode != "zero")
    throw_value_error("model.Transformer", "ablation_mode must be 'zero' or 'mean', got '" + ablation_mode + "'");
  return options;
}

py::dict config_dict(const model::TransformerConfig& c) {
  py::dict d;
  d["architecture"] = c.architecture;
  d["dim"] = c.dim;
  d["hidden_dim"] = c.hidden_dim;
  d["n_layers"] = c.n_layers;
  d["n_heads"] = c.n_heads;
  d["n_kv_heads"] = c.n_kv_heads;
  d["head_dim"] = c.head_dim;
  d["vocab_size"] = c.vocab_size;
  d["seq_len"] = c.seq_len;
  d["norm"] = c.norm == model::NormKind::rms_norm ? "rms_norm" : "layer_norm";
  d["norm_epsilon"] = c.norm_epsilon;
  d["position_encoding"] = c.position_encoding == model::PositionEncoding::learned            ? "learned"
                           : c.position_encoding == model::PositionEncoding::rope_interleaved ? "rope_interleaved"
                                                                                              : "rope_rotate_half";
  d["rope_theta"] = c.rope_theta;
  d["feed_forward"] = c.feed_forward == model::FeedForwardKind::swiglu ? "swiglu" : "gelu_tanh";
  d["tied_embeddings"] = c.tied_embeddings;
  d["sliding_window"] = c.sliding_window;
  return d;
}

const char* const options_doc = R"(
    map: None (softmax, as trained) or a normalization map (object or text, e.g. 'ssmax:0.43', 'temperature:2').
    ablated_heads: (layer, head) pairs whose output is replaced; ablation_mode: 'zero' or 'mean'.)";

}  // namespace

void bind_model(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "model", "attnscope::model: llama2.c checkpoints and Hugging Face folders run by one Transformer (float32).");

  py::class_<model::Transformer>(m, "Transformer", "A decoder-only transformer (load_model / load_huggingface_model).")
      .def_property_readonly("config", [](const model::Transformer& t) { return config_dict(t.config()); },
                             "The TransformerConfig as a dict (architecture, dim, n_layers, n_heads, ...).")
      .def(
          "forward",
          [](const model::Transformer& t, const std::vector<int>& tokens, const std::vector<std::string>& capture,
             const py::object& map, const std::vector<std::pair<int, int>>& ablated_heads,
             const std::string& ablation_mode) {
            model::ForwardOptions options = forward_options(map, ablated_heads, ablation_mode);
            options.capture = capture_of(capture);
            model::ForwardResult result;
            {
              py::gil_scoped_release release;
              result = t.forward(tokens, options);
            }
            return capture_dict(result);
          },
          "tokens"_a, "capture"_a = std::vector<std::string>{"scores", "attention"}, "map"_a = py::none(),
          "ablated_heads"_a = std::vector<std::pair<int, int>>{}, "ablation_mode"_a = "zero",
          (std::string("Forward pass over token ids at positions 0..L-1; returns a dict of float32 numpy arrays:\n"
                       "'logits' (L, vocab) and, per layer i and requested capture c, e.g. 'layer0.attention', of shape\n"
                       "(n_heads, L, L) for scores/attention (scores q.k/sqrt(d), future entries -inf; attention 0\n"
                       "there) or (n_heads, L, head_dim) for q, k, v, head_output; 'hidden_states' (n_layers + 1, L,\n"
                       "dim). The names are those of `attnscope capture` NPZ files.\n"
                       "    capture: any of 'q', 'k', 'v', 'scores', 'attention', 'head_output', 'hidden_states'.") +
           options_doc + "\nRaises ValueError for a token outside the vocabulary, L > seq_len, bad heads or maps.")
              .c_str())
      .def(
          "capture",
          [](const model::Transformer& t, const std::vector<int>& tokens, const std::vector<std::string>& capture,
             const py::object& map) {
            model::ForwardOptions options = forward_options(map, {}, "zero");
            options.capture = capture_of(capture);
            model::ForwardResult result;
            {
              py::gil_scoped_release release;
              result = t.forward(tokens, options);
            }
            return capture_dict(result);
          },
          "tokens"_a, "capture"_a = std::vector<std::string>{"q", "k", "v", "scores", "attention"}, "map"_a = py::none(),
          "forward() with q, k, v, scores and attention captured by default: the dict an `attnscope capture` NPZ\n"
          "holds (np.savez(path, **result) writes one).")
      .def(
          "forward_row_statistics",
          [](const model::Transformer& t, const std::vector<int>& tokens, const std::vector<Index>& sink_keys,
             const std::vector<Index>& top_k, bool jacobian_norm, bool max_weight_excludes_sinks,
             bool allow_beyond_trained_positions, const std::vector<std::pair<int, int>>& ablated_heads,
             const std::string& ablation_mode) {
            const model::ForwardOptions options = forward_options(py::none(), ablated_heads, ablation_mode);
            model::StreamingOptions streaming;
            streaming.statistics.sink_keys = sink_keys;
            streaming.statistics.top_k = top_k;
            streaming.statistics.jacobian_norm = jacobian_norm;
            streaming.statistics.max_weight_excludes_sinks = max_weight_excludes_sinks;
            streaming.allow_beyond_trained_positions = allow_beyond_trained_positions;
            model::StreamingForwardResult result;
            {
              py::gil_scoped_release release;
              result = t.forward_row_statistics(tokens, options, streaming);
            }
            py::dict fields;
            const Shape logits_shape{result.logits.rows(), result.logits.cols()};
            fields["logits"] = take_as_array(std::move(result.logits), logits_shape);
            fields["row_statistics"] = stacked_row_statistics(result.row_statistics);
            fields["trained_positions"] = result.trained_positions;
            fields["beyond_trained_positions"] = result.beyond_trained_positions;
            return make_result("ForwardRowStatistics", fields);
          },
          "tokens"_a, "sink_keys"_a = std::vector<Index>{0}, "top_k"_a = std::vector<Index>{},
          "jacobian_norm"_a = true, "max_weight_excludes_sinks"_a = false, "allow_beyond_trained_positions"_a = false,
          "ablated_heads"_a = std::vector<std::pair<int, int>>{}, "ablation_mode"_a = "zero",
          "Streaming forward (flash-attention style, no L x L matrix): logits (L, vocab) float32 and row_statistics,\n"
          "an object of float64 arrays (n_layers, n_heads, L): max_scaled_logit, log_partition, entropy, sink_mass,\n"
          "max_weight, jacobian_norm, and top_k_mass (n_layers, n_heads, L, len(top_k)); trained_positions and\n"
          "beyond_trained_positions (RoPE models beyond seq_len need allow_beyond_trained_positions=True).")
      .def(
          "generate_greedy",
          [](const model::Transformer& t, const std::vector<int>& prefix, int steps, const py::object& map,
             const std::vector<std::pair<int, int>>& ablated_heads, const std::string& ablation_mode) {
            const model::ForwardOptions options = forward_options(map, ablated_heads, ablation_mode);
            py::gil_scoped_release release;
            return t.generate_greedy(prefix, steps, options);
          },
          "prefix"_a, "steps"_a, "map"_a = py::none(), "ablated_heads"_a = std::vector<std::pair<int, int>>{},
          "ablation_mode"_a = "zero",
          (std::string("Greedy decoding (argmax, first index on ties, as llama2.c run.c); returns prefix + steps\n"
                       "new token ids (list of int).") + options_doc).c_str())
      .def(
          "generate_sampled",
          [](const model::Transformer& t, const std::vector<int>& prefix, int steps, double temperature,
             std::uint64_t seed, const py::object& map, const std::vector<std::pair<int, int>>& ablated_heads,
             const std::string& ablation_mode) {
            const model::ForwardOptions options = forward_options(map, ablated_heads, ablation_mode);
            py::gil_scoped_release release;
            return t.generate_sampled(prefix, steps, temperature, seed, options);
          },
          "prefix"_a, "steps"_a, "temperature"_a, "seed"_a, "map"_a = py::none(),
          "ablated_heads"_a = std::vector<std::pair<int, int>>{}, "ablation_mode"_a = "zero",
          (std::string("Samples from softmax(logits / temperature) with attnscope.Random(seed) (deterministic; T = 0:\n"
                       "greedy); returns prefix + new tokens.") + options_doc).c_str())
      .def(
          "mean_negative_log_likelihood",
          [](const model::Transformer& t, const std::vector<int>& tokens, const py::object& map,
             const std::vector<std::pair<int, int>>& ablated_heads, const std::string& ablation_mode) {
            const model::ForwardOptions options = forward_options(map, ablated_heads, ablation_mode);
            py::gil_scoped_release release;
            return t.mean_negative_log_likelihood(tokens, options);
          },
          "tokens"_a, "map"_a = py::none(), "ablated_heads"_a = std::vector<std::pair<int, int>>{},
          "ablation_mode"_a = "zero",
          (std::string("Teacher-forced mean -log p(token[p+1] | ..) in nats per token.") + options_doc).c_str());

  m.def("load_model", [](const PathArgument& path) { return model::load_model<>(path.string()); }, "path"_a,
        "A directory is a Hugging Face folder (load_huggingface_model), anything else a llama2.c checkpoint.\n"
        "Raises OSError naming the file and the problem.");
  m.def(
      "load_huggingface_model",
      [](const PathArgument& folder) { return model::load_huggingface_model<>(folder.string()); }, "folder"_a,
        "config.json + safetensors (one file or sharded; F32/F16/BF16) of a model_type listed in docs/models.md.");
}

}  // namespace attnscope_python
