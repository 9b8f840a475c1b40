// Bindings of attnscope::stream (exact per-row attention statistics from Q and K without the L x L matrix) and of
// attnscope::text (byte-level BPE tokenizers).
#include <attnscope/stream.hpp>
#include <attnscope/text.hpp>

#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;
namespace stream = attnscope::stream;
namespace text = attnscope::text;

namespace {

/// The per-row vector fields of RowStatistics, in the order of the C++ struct.
struct VectorField {
  const char* name;
  Vector<double> stream::RowStatistics::*member;
};
const VectorField vector_fields[] = {{"max_scaled_logit", &stream::RowStatistics::max_scaled_logit},
                                     {"log_partition", &stream::RowStatistics::log_partition},
                                     {"entropy", &stream::RowStatistics::entropy},
                                     {"sink_mass", &stream::RowStatistics::sink_mass},
                                     {"max_weight", &stream::RowStatistics::max_weight},
                                     {"jacobian_norm", &stream::RowStatistics::jacobian_norm}};

/// The Visibility of the Python keywords: causal or every key, an optional sliding window, an optional key mask.
attnscope::Visibility visibility_of(bool causal, std::optional<Index> window, attnscope::KeyMask key_mask) {
  attnscope::Visibility visibility = causal ? attnscope::Visibility(attnscope::causal) : attnscope::Visibility();
  if (window) visibility = attnscope::SlidingWindow{*window, causal};
  return visibility.with_key_mask(std::move(key_mask));
}

std::optional<Index> window_of(const attnscope::Visibility& visibility) {
  return visibility.has_window() ? std::optional<Index>(visibility.window()) : std::nullopt;
}

}  // namespace

py::object row_statistics_object(const stream::RowStatistics& statistics) {
  py::dict fields;
  for (const auto& field : vector_fields) fields[field.name] = vector_array(Vector<double>(statistics.*field.member));
  fields["top_k_mass"] = matrix_array(Eigen::MatrixXd(statistics.top_k_mass));
  fields["top_k"] = statistics.top_k;
  fields["visible_keys"] = vector_array(Eigen::Matrix<Index, Eigen::Dynamic, 1>(statistics.visible_keys));
  return make_result("RowStatistics", fields);
}

py::object stacked_row_statistics(const std::vector<std::vector<stream::RowStatistics>>& statistics) {
  const py::ssize_t layers = static_cast<py::ssize_t>(statistics.size());
  const py::ssize_t heads = layers ? static_cast<py::ssize_t>(statistics[0].size()) : 0;
  const py::ssize_t length = heads ? statistics[0][0].entropy.size() : 0;
  const py::ssize_t top = heads ? statistics[0][0].top_k_mass.cols() : 0;
  py::dict fields;
  for (const auto& field : vector_fields) {
    py::array_t<double> out(Shape{layers, heads, length});
    double* data = out.mutable_data();
    for (const auto& layer : statistics)
      for (const auto& head : layer) data = std::copy_n((head.*field.member).data(), length, data);
    fields[field.name] = out;
  }
  py::array_t<double> top_k_mass(Shape{layers, heads, length, top});
  double* data = top_k_mass.mutable_data();
  for (const auto& layer : statistics)
    for (const auto& head : layer)
      for (py::ssize_t i = 0; i < length; ++i)
        for (py::ssize_t c = 0; c < top; ++c) *data++ = head.top_k_mass(i, c);
  fields["top_k_mass"] = top_k_mass;
  fields["top_k"] = heads ? py::cast(statistics[0][0].top_k) : py::cast(std::vector<Index>());
  py::array_t<Index> visible(Shape{length});
  if (heads) std::copy_n(statistics[0][0].visible_keys.data(), length, visible.mutable_data());
  fields["visible_keys"] = visible;
  return make_result("RowStatistics", fields);
}

void bind_stream(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "stream", "attnscope::stream: exact per-row softmax statistics from Q and K without the L x L matrix.");
  py::class_<stream::RowStatisticsOptions>(m, "RowStatisticsOptions",
                                           "Which keys each query sees and which statistics are computed.")
      .def(py::init([](bool causal, std::optional<Index> window, std::optional<double> scale,
                       std::vector<Index> sink_keys, bool max_weight_excludes_sinks, std::vector<Index> top_k,
                       bool jacobian_norm, const py::object& key_mask, Index block_rows, int threads) {
             stream::RowStatisticsOptions options;
             attnscope::KeyMask keys_shown;
             if (!key_mask.is_none()) {
               const CArray<bool> mask = carray<bool>(key_mask, "stream.RowStatisticsOptions", "key_mask");
               keys_shown = Eigen::Map<const stream::KeyMask>(mask.data(), mask.size());
             }
             options.visibility = visibility_of(causal, window, std::move(keys_shown));
             options.scale = scale;
             options.sink_keys = std::move(sink_keys);
             options.max_weight_excludes_sinks = max_weight_excludes_sinks;
             options.top_k = std::move(top_k);
             options.jacobian_norm = jacobian_norm;
             options.block_rows = block_rows;
             options.threads = checked_threads(threads, "stream.RowStatisticsOptions");
             return options;
           }),
           "causal"_a = true, "window"_a = py::none(), "scale"_a = py::none(), "sink_keys"_a = std::vector<Index>{0},
           "max_weight_excludes_sinks"_a = false, "top_k"_a = std::vector<Index>{}, "jacobian_norm"_a = true,
           "key_mask"_a = py::none(), "block_rows"_a = 64, "threads"_a = 0,
           "causal: row i sees keys j <= i (False: every key); window: sliding window W; scale: logit scale (None:\n"
           "1/sqrt(d)); sink_keys: keys whose weight is the sink mass; top_k: the k of each top-k mass column;\n"
           "jacobian_norm: compute the exact ||J||_2; key_mask: bool per key (False = hidden from every query);\n"
           "block_rows: query rows per GEMM block; threads: OpenMP threads (0: default).")
      .def_property(
          "causal", [](const stream::RowStatisticsOptions& o) { return o.visibility.is_causal(); },
          [](stream::RowStatisticsOptions& o, bool causal) {
            o.visibility = visibility_of(causal, window_of(o.visibility), o.visibility.key_mask());
          })
      .def_property(
          "window", [](const stream::RowStatisticsOptions& o) { return window_of(o.visibility); },
          [](stream::RowStatisticsOptions& o, std::optional<Index> window) {
            o.visibility = visibility_of(o.visibility.is_causal(), window, o.visibility.key_mask());
          })
      .def_readwrite("scale", &stream::RowStatisticsOptions::scale)
      .def_readwrite("sink_keys", &stream::RowStatisticsOptions::sink_keys)
      .def_readwrite("max_weight_excludes_sinks", &stream::RowStatisticsOptions::max_weight_excludes_sinks)
      .def_readwrite("top_k", &stream::RowStatisticsOptions::top_k)
      .def_readwrite("jacobian_norm", &stream::RowStatisticsOptions::jacobian_norm)
      .def_readwrite("block_rows", &stream::RowStatisticsOptions::block_rows)
      .def_readwrite("threads", &stream::RowStatisticsOptions::threads);

  m.def(
      "row_statistics",
      [](const py::object& queries, const py::object& keys, const stream::RowStatisticsOptions& options) {
        const py::array q_array = as_array(queries, "stream.row_statistics", "queries");
        return dispatch(q_array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const CArray<T> q = carray<T>(q_array, "stream.row_statistics", "queries");
          const CArray<T> k = carray<T>(keys, "stream.row_statistics", "keys");
          const auto q_matrix = matrix_of(q, "stream.row_statistics", "queries");
          const auto k_matrix = matrix_of(k, "stream.row_statistics", "keys");
          stream::RowStatistics statistics;
          {
            py::gil_scoped_release release;
            statistics = stream::row_statistics(q_matrix, k_matrix, options);
          }
          return row_statistics_object(statistics);
        });
      },
      "queries"_a, "keys"_a, "options"_a = stream::RowStatisticsOptions(),
      "Exact statistics of every query row of softmax(s q k^T) for Q, K of shape (L, d) (float32 or float64, the\n"
      "same dtype; read in place when C-contiguous), never forming the L x L matrix. Fields (float64 arrays of\n"
      "length L): max_scaled_logit, log_partition, entropy, sink_mass, max_weight, jacobian_norm (||diag p - pp^T||_2),\n"
      "top_k_mass (L, len(top_k)), top_k, visible_keys. The GIL is released. Raises ValueError on bad input.");
  m.def(
      "summarize",
      [](const std::vector<double>& values, const std::vector<double>& levels) {
        const stream::Summary s =
            stream::summarize(Eigen::Map<const Eigen::VectorXd>(values.data(), Index(values.size())), levels);
        py::dict fields;
        fields["count"] = s.count;
        fields["mean"] = s.mean;
        fields["min"] = s.min;
        fields["max"] = s.max;
        fields["probabilities"] = s.probabilities;
        fields["quantiles"] = s.quantiles;
        return make_result("Summary", fields);
      },
      "values"_a, "levels"_a = stream::default_quantile_levels(),
      "count, mean, min, max and quantiles (numpy's default linear interpolation) at `levels`.");
  m.def(
      "position_curve",
      [](const std::vector<double>& values, Index bins, const std::string& spacing) {
        if (spacing != "linear" && spacing != "logarithmic")
          throw_value_error("stream.position_curve", "spacing must be 'linear' or 'logarithmic'");
        const stream::PositionCurve curve =
            stream::position_curve(Eigen::Map<const Eigen::VectorXd>(values.data(), Index(values.size())), bins,
                                   spacing == "linear" ? stream::BinSpacing::linear : stream::BinSpacing::logarithmic);
        py::dict fields;
        fields["first_row"] = curve.first_row;
        fields["end_row"] = curve.end_row;
        fields["position"] = py::array(py::cast(curve.position));
        fields["mean"] = py::array(py::cast(curve.mean));
        return make_result("PositionCurve", fields);
      },
      "values"_a, "bins"_a, "spacing"_a = "logarithmic",
      "Mean of a per-row statistic over bins of rows (position n = row + 1): first_row, end_row, position, mean.");

  // ---- text -------------------------------------------------------------------------------------------------------
  py::module_ t = parent.def_submodule("text",
                                       "attnscope::text: BPE tokenizers with Hugging Face's ids, byte-level (GPT-2, "
                                       "Llama-3, Qwen2, GPT-NeoX) and SentencePiece-style (Llama-2, Mistral, Phi-3).");
  py::class_<text::ByteLevelBpeTokenizer>(t, "ByteLevelBpeTokenizer",
                                          "BPE tokenizer, byte-level or SentencePiece-style (tokenizer.json,\n"
                                          "tokenizer.model, or vocab.json + merges.txt).")
      .def_static(
          "from_folder",
          [](const PathArgument& folder) { return text::ByteLevelBpeTokenizer::from_folder(folder.string()); },
          "folder"_a,
                  "tokenizer.json, or tokenizer.model, or vocab.json + merges.txt, or encoder.json + vocab.bpe in a\n"
                  "folder (OSError if none or unsupported).")
      .def_static(
          "from_vocab_and_merges",
          [](const PathArgument& vocab, const PathArgument& merges) {
            return text::ByteLevelBpeTokenizer::from_vocab_and_merges(vocab.string(), merges.string());
          },
          "vocab_json_path"_a,
                  "merges_txt_path"_a, "GPT-2 style vocab.json (token -> id) and merges.txt (one merge per line).")
      .def_static(
          "from_tokenizer_json",
          [](const PathArgument& path) { return text::ByteLevelBpeTokenizer::from_tokenizer_json(path.string()); },
          "tokenizer_json_path"_a,
                  "A Hugging Face tokenizer.json with a BPE model, byte-level (GPT-2, Llama-3, Qwen2) or\n"
                  "SentencePiece-style (Llama-2, Mistral, Phi-3); OSError for other kinds (Unigram, WordPiece, ...).")
      .def_static(
          "from_sentencepiece_model",
          [](const PathArgument& path) { return text::ByteLevelBpeTokenizer::from_sentencepiece_model(path.string()); },
                  "tokenizer_model_path"_a,
                  "SentencePiece's tokenizer.model (a BPE model: Llama-1/2, Mistral-7B v0.1, TinyLlama), read as\n"
                  "Hugging Face's LlamaConverter turns it into a tokenizer.json; OSError for Unigram models.")
      .def(
          "encode",
          [](const text::ByteLevelBpeTokenizer& tokenizer, const std::string& utf8_text, bool parse_special_tokens,
             bool add_special_tokens) {
            text::EncodeOptions options;
            options.parse_special_tokens = parse_special_tokens;
            options.add_special_tokens = add_special_tokens;
            py::gil_scoped_release release;
            return tokenizer.encode(utf8_text, options);
          },
          "text"_a, "parse_special_tokens"_a = false, "add_special_tokens"_a = false,
          "Token ids (list of int) of a str. parse_special_tokens: special tokens written in the text (\"<s>\",\n"
          "\"<|endoftext|>\") become their ids instead of ordinary text. add_special_tokens: the post-processor's\n"
          "tokens are added around the text (Llama-2's and Mistral's BOS <s>, RoBERTa's <s> ... </s>), as the\n"
          "command's --add-special-tokens. Both True: the ids of Hugging Face's default tokenizer(text).")
      .def("decode",
           [](const text::ByteLevelBpeTokenizer& tokenizer, const std::vector<int>& ids) {
             return py::bytes(tokenizer.decode(ids)).attr("decode")("utf-8", "replace");
           },
           "ids"_a, "The text of token ids (invalid UTF-8 replaced).")
      .def("vocab_size", &text::ByteLevelBpeTokenizer::vocab_size, "Largest id + 1, added tokens included.")
      .def("added_prefix_ids", &text::ByteLevelBpeTokenizer::added_prefix_ids,
           "The ids add_special_tokens puts before the text (the post-processor's, e.g. [BOS]).")
      .def("added_suffix_ids", &text::ByteLevelBpeTokenizer::added_suffix_ids,
           "The ids add_special_tokens puts after the text (the post-processor's, e.g. [EOS]).")
      .def("token_id", &text::ByteLevelBpeTokenizer::token_id, "token"_a, "Id of a token string, or None.")
      .def("token_bytes", [](const text::ByteLevelBpeTokenizer& tokenizer, int id) {
        return py::bytes(tokenizer.token_bytes(id));
      }, "id"_a, "Raw bytes of one token.");
}

}  // namespace attnscope_python
