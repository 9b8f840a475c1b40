// attnscope/text/bpe_merge.hpp — the BPE merge loop over one pre-tokenized word (Sennrich et al. 2016, "Neural
// Machine Translation of Rare Words with Subword Units", Algorithm 1 applied at encoding time; GPT-2 runs it on bytes).
//
// A word starts as one symbol per byte. While some adjacent pair of symbols is in the merge table, the pair with the
// lowest merge rank is replaced by its merged token; among equal ranks the leftmost pair goes first. This is the order
// of Hugging Face tokenizers' BPE (a priority queue keyed by (rank, position)); OpenAI's encoder.py merges every
// occurrence of the lowest-ranked bigram left to right per round, which yields the same tokens whenever every merged
// token is formed before any merge that uses it (true of merge lists produced by BPE training).
// The same loop runs on words of characters (SentencePiece-style BPE: one symbol per character, or per byte token
// <0xNN> for a character outside the vocabulary): merge_symbols.
// O(n log n) per word of n bytes: symbols form a linked list and candidate pairs a binary heap with lazy deletion.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace attnscope::text::detail {

/// Merge rank and resulting token of one (left token, right token) pair.
struct BpeMerge {
  int rank;
  int merged_id;
};

/// The merge table: (left id, right id) -> (rank, merged id), an open-addressing hash table (linear probing,
/// Fibonacci hashing of the packed pair), plus the token of each single byte (-1: none).
class BpeMergeTable {
 public:
  std::array<int, 256> byte_token_id{};
  /// False when some byte has no token (byte_token_id -1): merge_word then drops those bytes.
  bool every_byte_has_token = true;

  /// Adds a merge unless the pair is already there (a repeated merge keeps its first, lowest rank); true if added.
  bool insert(int left_id, int right_id, BpeMerge merge) {
    if (2 * (count_ + 1) > slots_.size()) grow();
    const std::uint64_t packed = key(left_id, right_id);
    std::size_t index = slot_of(packed);
    for (; slots_[index].key != empty_key; index = (index + 1) & (slots_.size() - 1))
      if (slots_[index].key == packed) return false;
    slots_[index] = {packed, merge};
    ++count_;
    return true;
  }

  /// The merge of an adjacent pair, or nullptr.
  const BpeMerge* find(int left_id, int right_id) const {
    if (slots_.empty()) return nullptr;
    const std::uint64_t packed = key(left_id, right_id);
    for (std::size_t index = slot_of(packed);; index = (index + 1) & (slots_.size() - 1)) {
      if (slots_[index].key == packed) return &slots_[index].merge;
      if (slots_[index].key == empty_key) return nullptr;
    }
  }

  std::size_t size() const { return count_; }

  /// Calls visit(const BpeMerge&) for every merge (in no particular order).
  template <class Visit>
  void for_each(Visit&& visit) const {
    for (const Slot& slot : slots_)
      if (slot.key != empty_key) visit(slot.merge);
  }

 private:
  struct Slot {
    std::uint64_t key;
    BpeMerge merge;
  };
  static constexpr std::uint64_t empty_key = ~std::uint64_t{0};  // no pair of ids below 2^31 packs to this

  static std::uint64_t key(int left_id, int right_id) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left_id)) << 32) |
           static_cast<std::uint32_t>(right_id);
  }
  std::size_t slot_of(std::uint64_t packed) const {
    return static_cast<std::size_t>((packed * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  void grow() {
    std::vector<Slot> old(slots_.empty() ? 1024 : 2 * slots_.size(), Slot{empty_key, {0, 0}});
    old.swap(slots_);
    shift_ = 64;
    for (std::size_t size = slots_.size(); size > 1; size >>= 1) --shift_;
    for (const Slot& slot : old) {
      if (slot.key == empty_key) continue;
      std::size_t index = slot_of(slot.key);
      while (slots_[index].key != empty_key) index = (index + 1) & (slots_.size() - 1);
      slots_[index] = slot;
    }
  }

  std::vector<Slot> slots_;  // power-of-two size, at most half full
  std::size_t count_ = 0;
  int shift_ = 64;
};

/// Reusable buffers of merge_word (one per thread).
struct BpeMergeScratch {
  struct Symbol {
    int id;    // token id, -1 once merged into its left neighbour
    int prev;  // index of the previous live symbol, -1 at the start
    int next;  // index of the next live symbol, -1 at the end
  };
  struct Candidate {
    int rank;
    int left;  // index of the left symbol
    int left_id;
    int right_id;
    int merged_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

/// Merges the symbols already in scratch.symbols (ids >= 0, linked in order; at least one) and appends the resulting
/// token ids to `out`.
inline void merge_symbols(const BpeMergeTable& table, std::vector<int>& out, BpeMergeScratch& scratch) {
  auto& symbols = scratch.symbols;
  const int length = static_cast<int>(symbols.size());
  auto& heap = scratch.heap;
  heap.clear();
  // Min-heap on (rank, left position): std::push_heap builds a max-heap, so the comparison is reversed.
  const auto later = [](const BpeMergeScratch::Candidate& a, const BpeMergeScratch::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  const auto push_pair = [&](int left) {
    const int right = symbols[static_cast<std::size_t>(left)].next;
    if (right < 0) return;
    const int left_id = symbols[static_cast<std::size_t>(left)].id;
    const int right_id = symbols[static_cast<std::size_t>(right)].id;
    if (const BpeMerge* merge = table.find(left_id, right_id)) {
      heap.push_back({merge->rank, left, left_id, right_id, merge->merged_id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int i = 0; i + 1 < length; ++i) push_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeMergeScratch::Candidate candidate = heap.back();
    heap.pop_back();
    auto& left = symbols[static_cast<std::size_t>(candidate.left)];
    if (left.id != candidate.left_id || left.next < 0) continue;  // stale: the left symbol changed
    auto& right = symbols[static_cast<std::size_t>(left.next)];
    if (right.id != candidate.right_id) continue;  // stale: the right neighbour changed
    left.id = candidate.merged_id;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = candidate.left;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(candidate.left);
  }
  for (int i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) out.push_back(symbols[static_cast<std::size_t>(i)].id);
}

/// Starts a word of symbols in `scratch` (then call add_symbol for each and merge_symbols).
inline void begin_symbols(BpeMergeScratch& scratch) { scratch.symbols.clear(); }
/// Appends one symbol with token `id` to the word being built.
inline void add_symbol(BpeMergeScratch& scratch, int id) {
  const int index = static_cast<int>(scratch.symbols.size());
  if (index > 0) scratch.symbols.back().next = index;
  scratch.symbols.push_back({id, index - 1, -1});
}

/// Appends the BPE tokens of `word` (raw bytes) to `out`. Bytes without a token in `table` are dropped before merging,
/// so that their neighbours become adjacent (as Hugging Face's BPE does with a character that is not in the vocabulary
/// when it has no unk_token).
inline void merge_word(const BpeMergeTable& table, std::string_view word, std::vector<int>& out,
                       BpeMergeScratch& scratch) {
  const int length = static_cast<int>(word.size());
  if (length == 0) return;
  if (!table.every_byte_has_token) {
    begin_symbols(scratch);
    for (const char byte : word)
      if (const int id = table.byte_token_id[static_cast<unsigned char>(byte)]; id >= 0) add_symbol(scratch, id);
    if (!scratch.symbols.empty()) merge_symbols(table, out, scratch);
    return;
  }
  auto& symbols = scratch.symbols;
  symbols.resize(static_cast<std::size_t>(length));
  for (int i = 0; i < length; ++i)
    symbols[static_cast<std::size_t>(i)] = {table.byte_token_id[static_cast<unsigned char>(word[static_cast<std::size_t>(i)])],
                                            i - 1, i + 1 < length ? i + 1 : -1};
  merge_symbols(table, out, scratch);
}

}  // namespace attnscope::text::detail
