// attnscope/text/bpe_merge.hpp — the BPE merge loop over one pre-tokenized word (Sennrich et al. 2016, "Neural
// Machine Translation of Rare Words with Subword Units", Algorithm 1 applied at encoding time; GPT-2 runs it on bytes).
//
// A word starts as one symbol per byte. While some adjacent pair of symbols is in the merge table, the pair with the
// lowest merge rank is replaced by its merged token; among equal ranks the leftmost pair goes first. This is the order
// of Hugging Face tokenizers' BPE (a priority queue keyed by (rank, position)); OpenAI's encoder.py merges every
// occurrence of the lowest-ranked bigram left to right per round, which yields the same tokens whenever every merged
// token is formed before any merge that uses it (true of merge lists produced by BPE training).
// O(n log n) per word of n bytes: symbols form a linked list and candidate pairs a binary heap with lazy deletion.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attnscope::text::detail {

/// Merge rank and resulting token of one (left token, right token) pair.
struct BpeMerge {
  int rank;
  int merged_id;
};

/// The merge table: (left id, right id) -> (rank, merged id), plus the token of each single byte (-1: none).
struct BpeMergeTable {
  std::unordered_map<std::uint64_t, BpeMerge> merges;
  std::array<int, 256> byte_token_id{};

  static std::uint64_t key(int left_id, int right_id) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left_id)) << 32) |
           static_cast<std::uint32_t>(right_id);
  }
  const BpeMerge* find(int left_id, int right_id) const {
    const auto found = merges.find(key(left_id, right_id));
    return found == merges.end() ? nullptr : &found->second;
  }
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

/// Appends the BPE tokens of `word` (raw bytes, every byte having a token in `table`) to `out`.
inline void merge_word(const BpeMergeTable& table, std::string_view word, std::vector<int>& out,
                       BpeMergeScratch& scratch) {
  const int length = static_cast<int>(word.size());
  if (length == 0) return;
  auto& symbols = scratch.symbols;
  symbols.resize(static_cast<std::size_t>(length));
  for (int i = 0; i < length; ++i)
    symbols[static_cast<std::size_t>(i)] = {table.byte_token_id[static_cast<unsigned char>(word[static_cast<std::size_t>(i)])],
                                            i - 1, i + 1 < length ? i + 1 : -1};
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

}  // namespace attnscope::text::detail
