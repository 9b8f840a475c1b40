// attnscope/text/detail/sentencepiece_model.hpp — SentencePiece's tokenizer.model (internal to the BPE tokenizer): a
// protocol buffer ModelProto (sentencepiece_model.proto) read with a small reader of the wire format (varints,
// 32/64-bit fields, length-delimited fields), and turned into the parts of a BPE tokenizer the way Hugging Face's
// LlamaConverter turns it into a tokenizer.json:
// - vocabulary: every piece with its id (piece order); CONTROL and UNKNOWN pieces (<unk>, <s>, </s>) are special
//   added tokens, USER_DEFINED pieces non-special added tokens (all matched in the raw text);
// - merges: for every piece, each split into two pieces of the vocabulary (ordered by the ids of the left and right
//   pieces), all ranked by the piece's score, highest first (ties: piece order) — SentencePiece's BPE merges the
//   adjacent pair whose merged piece scores highest;
// - normalizer: Prepend("▁") when add_dummy_prefix, Replace(" ", "▁") when escape_whitespaces;
// - byte_fallback and the unknown piece from the trainer spec; unknown characters fuse;
// - post-processor: the BOS piece (bos_id) before the text, as LlamaTokenizer's add_bos_token does by default;
// - decoder: Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0).
// Fields used: ModelProto.pieces (1) {piece 1, score 2, type 3}; trainer_spec (2) {model_type 3, byte_fallback 35,
// unk_id 40, bos_id 41}; normalizer_spec (3) {name 1, precompiled_charsmap 2, add_dummy_prefix 3,
// remove_extra_whitespaces 4, escape_whitespaces 5}.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/text/detail/tokenizer_files.hpp"

namespace attnscope::text::detail {

/// One field of a protocol buffer message: its number, wire type and value (varint / fixed bits, or the bytes of a
/// length-delimited field).
struct ProtobufField {
  std::uint32_t number = 0;
  int wire_type = 0;
  std::uint64_t value = 0;
  std::string_view bytes;
  std::size_t offset = 0;  // of the field's key in the file
};

/// Reads the fields of one message; io_error naming the file and the byte offset of a truncated or malformed field.
class ProtobufReader {
 public:
  ProtobufReader(std::string_view message, std::size_t base_offset, const LoadContext& where)
      : message_(message), base_(base_offset), where_(where) {}

  bool next(ProtobufField& field) {
    if (position_ >= message_.size()) return false;
    field.offset = base_ + position_;
    const std::uint64_t key = varint();
    field.number = static_cast<std::uint32_t>(key >> 3);
    field.wire_type = static_cast<int>(key & 7);
    field.bytes = {};
    switch (field.wire_type) {
      case 0:
        field.value = varint();
        break;
      case 1:
        field.value = fixed(8);
        break;
      case 5:
        field.value = fixed(4);
        break;
      case 2: {
        const std::uint64_t length = varint();
        if (length > message_.size() - position_) fail("a length-delimited field runs past the end of its message");
        field.bytes = message_.substr(position_, static_cast<std::size_t>(length));
        position_ += static_cast<std::size_t>(length);
        break;
      }
      default:
        fail("unknown protobuf wire type " + std::to_string(field.wire_type));
    }
    return true;
  }
  std::size_t offset_of(std::string_view inner) const {
    return base_ + static_cast<std::size_t>(inner.data() - message_.data());
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    where_.fail(attnscope::detail::concat("malformed SentencePiece model at byte ", base_ + position_, ": ", what));
  }
  std::uint64_t varint() {
    std::uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (position_ >= message_.size()) fail("truncated varint");
      const auto byte = static_cast<unsigned char>(message_[position_++]);
      result |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if (byte < 0x80) return result;
    }
    fail("varint longer than 10 bytes");
  }
  std::uint64_t fixed(std::size_t size) {
    if (size > message_.size() - position_) fail("truncated fixed-width field");
    std::uint64_t result = 0;
    for (std::size_t i = 0; i < size; ++i)
      result |= static_cast<std::uint64_t>(static_cast<unsigned char>(message_[position_ + i])) << (8 * i);
    position_ += size;
    return result;
  }

  std::string_view message_;
  std::size_t base_;
  const LoadContext& where_;
  std::size_t position_ = 0;
};

/// One piece of a SentencePiece vocabulary: its text, score (merge priority) and type (SentencePiece's
/// ModelProto.SentencePiece.Type, the numbers llama.cpp's GGUF token types use too: 1 NORMAL, 2 UNKNOWN, 3 CONTROL,
/// 4 USER_DEFINED, 5 UNUSED, 6 BYTE).
struct SentencePiece {
  std::string text;
  float score = 0;
  int type = 1;  // NORMAL
};

/// The settings of a SentencePiece BPE vocabulary that shape the tokenizer besides its pieces.
struct SentencePieceSettings {
  bool byte_fallback = false, add_dummy_prefix = true, escape_whitespaces = true;
  std::int64_t unknown_id = 0;
  std::vector<int> prefix, suffix;  // ids the post-processor puts around the text (BOS, EOS)
};

/// The parts of a BPE tokenizer from a SentencePiece BPE vocabulary, as Hugging Face's LlamaConverter builds its
/// tokenizer.json: every piece a token (UNKNOWN, CONTROL and USER_DEFINED pieces also added tokens, the first two
/// special), merges of two pieces ordered by the score of the piece they form (ties: the order of the pieces, then of
/// the two parts' ids), byte fallback and the unknown token, a normalizer Prepend("▁") + Replace(" ", "▁"), and the
/// decoder Replace("▁", " ") + ByteFallback + Fuse + Strip(" ", 1, 0).
inline TokenizerParts sentencepiece_parts(const std::vector<SentencePiece>& pieces,
                                          const SentencePieceSettings& settings, const LoadContext& where) {
  if (pieces.empty()) where.fail("no pieces (not a SentencePiece model?)");
  if (static_cast<std::int64_t>(pieces.size()) - 1 > max_token_id)
    where.fail(attnscope::detail::concat(pieces.size(), " pieces (at most ", max_token_id + 1, ")"));
  const bool byte_fallback = settings.byte_fallback, add_dummy_prefix = settings.add_dummy_prefix;
  const bool escape_whitespaces = settings.escape_whitespaces;
  const std::int64_t unknown_id = settings.unknown_id;

  TokenizerParts parts;
  std::vector<std::pair<std::string, int>> entries;
  std::unordered_map<std::string, int> id_of;
  std::vector<AddedToken> added;
  for (std::size_t id = 0; id < pieces.size(); ++id) {
    entries.emplace_back(pieces[id].text, static_cast<int>(id));
    id_of.emplace(pieces[id].text, static_cast<int>(id));
    const int type = pieces[id].type;
    if (type == 2 || type == 3 || type == 4) {  // UNKNOWN, CONTROL, USER_DEFINED
      AddedToken token;
      token.content = pieces[id].text;
      token.id = static_cast<int>(id);
      token.special = type != 4;
      token.normalized = false;
      if (!token.content.empty()) added.push_back(std::move(token));
    }
  }
  parts.vocabulary.set_tokens(entries, where, false);

  struct Candidate {
    std::string left, right;
    float score;
    std::size_t order;
  };
  std::vector<Candidate> candidates;
  for (std::size_t id = 0; id < pieces.size(); ++id) {
    const std::string& text = pieces[id].text;
    std::vector<Candidate> local;
    for (std::size_t cut = 1; cut < text.size(); ++cut) {
      if ((static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) continue;  // not a character boundary
      const std::string left = text.substr(0, cut), right = text.substr(cut);
      if (id_of.count(left) && id_of.count(right)) local.push_back({left, right, pieces[id].score, 0});
    }
    std::sort(local.begin(), local.end(), [&](const Candidate& a, const Candidate& b) {
      return std::make_pair(id_of[a.left], id_of[a.right]) < std::make_pair(id_of[b.left], id_of[b.right]);
    });
    for (Candidate& candidate : local) {
      candidate.order = candidates.size();
      candidates.push_back(std::move(candidate));
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  std::vector<MergeEntry> merges;
  merges.reserve(candidates.size());
  for (const Candidate& candidate : candidates) merges.push_back({candidate.left, candidate.right, candidate.order});
  parts.vocabulary.set_merges(merges, MergeSource::json_array, where);
  parts.vocabulary.set_unknown_handling(
      byte_fallback, unknown_id >= 0 && unknown_id < static_cast<std::int64_t>(pieces.size()) ? static_cast<int>(unknown_id) : -1,
      true);

  const std::string metaspace = "\xE2\x96\x81";
  if (add_dummy_prefix) {
    NormalizerStep prepend;
    prepend.kind = NormalizerStep::Kind::prepend;
    prepend.text = metaspace;
    parts.normalizer.push_back(prepend);
    parts.normalizer_name = "Prepend";
  }
  if (escape_whitespaces) {
    NormalizerStep replace;
    replace.kind = NormalizerStep::Kind::replace;
    replace.text = " ";
    replace.replacement = metaspace;
    parts.normalizer.push_back(replace);
    parts.normalizer_name += parts.normalizer_name.empty() ? "Replace" : ",Replace";
  }
  parts.vocabulary.add_tokens(std::move(added), where);
  build_added_token_matchers(parts);
  parts.post_processor.prefix = settings.prefix;
  parts.post_processor.suffix = settings.suffix;
  DecoderStep to_space;
  to_space.kind = DecoderStep::Kind::replace;
  to_space.pattern = metaspace;
  to_space.content = " ";
  DecoderStep bytes;
  bytes.kind = DecoderStep::Kind::byte_fallback;
  DecoderStep fuse;
  fuse.kind = DecoderStep::Kind::fuse;
  DecoderStep strip;
  strip.kind = DecoderStep::Kind::strip;
  strip.content = " ";
  strip.start = 1;
  parts.decoder = {to_space, bytes, fuse, strip};
  return parts;
}

/// The parts of a BPE tokenizer from a SentencePiece BPE tokenizer.model (see the header comment).
inline TokenizerParts load_sentencepiece_model(const std::string& path, const char* function) {
  const std::vector<unsigned char> file = io::read_file(path);
  const std::string_view data(reinterpret_cast<const char*>(file.data()), file.size());
  const LoadContext where{function, path};
  using Piece = SentencePiece;
  std::vector<Piece> pieces;
  int model_type = 1;  // UNIGRAM (the proto's default)
  bool byte_fallback = false, add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
  std::int64_t unknown_id = 0, bos_id = 1;
  std::string normalizer_name;
  bool has_charsmap = false;

  ProtobufReader model(data, 0, where);
  for (ProtobufField field; model.next(field);) {
    if (field.wire_type != 2 && (field.number >= 1 && field.number <= 3))
      where.fail(attnscope::detail::concat("malformed SentencePiece model at byte ", field.offset, ": field ",
                                           field.number, " of ModelProto is not a message"));
    if (field.number == 1) {
      Piece piece;
      ProtobufReader reader(field.bytes, model.offset_of(field.bytes), where);
      for (ProtobufField inner; reader.next(inner);) {
        if (inner.number == 1 && inner.wire_type == 2) piece.text = std::string(inner.bytes);
        if (inner.number == 2 && inner.wire_type == 5) {
          const auto bits = static_cast<std::uint32_t>(inner.value);
          std::memcpy(&piece.score, &bits, sizeof(float));
        }
        if (inner.number == 3 && inner.wire_type == 0) piece.type = static_cast<int>(inner.value);
      }
      pieces.push_back(std::move(piece));
    } else if (field.number == 2) {
      ProtobufReader reader(field.bytes, model.offset_of(field.bytes), where);
      for (ProtobufField inner; reader.next(inner);) {
        if (inner.wire_type != 0) continue;
        const auto as_int = static_cast<std::int64_t>(static_cast<std::int32_t>(inner.value & 0xFFFFFFFFu));
        if (inner.number == 3) model_type = static_cast<int>(inner.value);
        if (inner.number == 35) byte_fallback = inner.value != 0;
        if (inner.number == 40) unknown_id = as_int;
        if (inner.number == 41) bos_id = as_int;
      }
    } else if (field.number == 3) {
      ProtobufReader reader(field.bytes, model.offset_of(field.bytes), where);
      for (ProtobufField inner; reader.next(inner);) {
        if (inner.number == 1 && inner.wire_type == 2) normalizer_name = std::string(inner.bytes);
        if (inner.number == 2 && inner.wire_type == 2) has_charsmap = !inner.bytes.empty();
        if (inner.number == 3 && inner.wire_type == 0) add_dummy_prefix = inner.value != 0;
        if (inner.number == 4 && inner.wire_type == 0) remove_extra_whitespaces = inner.value != 0;
        if (inner.number == 5 && inner.wire_type == 0) escape_whitespaces = inner.value != 0;
      }
    }
  }
  const auto unsupported = [&](const std::string& what) { where.fail("not supported: " + what); };
  if (pieces.empty()) where.fail("no pieces (not a SentencePiece model?)");
  if (model_type != 2)
    unsupported(attnscope::detail::concat("SentencePiece model_type ", model_type,
                                          model_type == 1 ? " (Unigram)" : "", " (only BPE models are supported)"));
  if (has_charsmap || (!normalizer_name.empty() && normalizer_name != "identity"))
    unsupported("SentencePiece normalizer '" + normalizer_name + "' (a precompiled character map)");
  if (remove_extra_whitespaces) unsupported("SentencePiece remove_extra_whitespaces");
  SentencePieceSettings settings;
  settings.byte_fallback = byte_fallback;
  settings.add_dummy_prefix = add_dummy_prefix;
  settings.escape_whitespaces = escape_whitespaces;
  settings.unknown_id = unknown_id;
  if (bos_id >= 0 && bos_id < static_cast<std::int64_t>(pieces.size())) settings.prefix.push_back(static_cast<int>(bos_id));
  return sentencepiece_parts(pieces, settings, where);
}

}  // namespace attnscope::text::detail
