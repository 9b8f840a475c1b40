// attnscope/text/detail/word_cache.hpp — the tokenizer's cache of word -> token ids (internal to
// ByteLevelBpeTokenizer).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace attnscope::text::detail {

/// Cache word -> token ids, shared by the calls of one tokenizer and guarded by a mutex. Copies start empty.
/// An open-addressing table (linear probing, stored hashes) over two arenas, one for the words' bytes and one for
/// their ids, so a lookup touches one slot and one arena range instead of a chain of nodes.
class WordCache {
 public:
  static constexpr std::size_t max_entries = 1 << 18;            // cleared when full, so memory stays bounded
  static constexpr std::size_t max_arena_bytes = 64 << 20;       // (and when the words' bytes pass 64 MiB)
  static constexpr std::size_t max_cached_piece_bytes = 1024;    // longer pieces are not cached
  WordCache() = default;
  WordCache(const WordCache&) {}
  /// The cached ids belong to the old tokenizer: assignment empties the cache.
  WordCache& operator=(const WordCache&) {
    std::lock_guard<std::mutex> lock(mutex_);
    clear();
    return *this;
  }

  /// Appends the cached ids of `word` (non-empty) to `out` and returns true, or returns false when it is not cached.
  bool append(std::string_view word, std::size_t hash, std::vector<int>& out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (slots_.empty()) return false;
    for (std::size_t index = hash & (slots_.size() - 1);; index = (index + 1) & (slots_.size() - 1)) {
      const Slot& slot = slots_[index];
      if (slot.id_count == 0) return false;
      if (slot.hash == hash && slot.word_length == word.size() &&
          std::string_view(words_).substr(slot.word_offset, slot.word_length) == word) {
        out.insert(out.end(), ids_.begin() + static_cast<std::ptrdiff_t>(slot.id_offset),
                   ids_.begin() + static_cast<std::ptrdiff_t>(slot.id_offset + slot.id_count));
        return true;
      }
    }
  }

  /// Caches the ids of `word` (count > 0); a word already cached keeps its first entry.
  void insert(std::string_view word, std::size_t hash, const int* ids, std::size_t count) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_ >= max_entries || words_.size() + word.size() > max_arena_bytes) clear();
    if (slots_.empty()) slots_.resize(1024);
    if (2 * (entries_ + 1) > slots_.size()) grow();
    std::size_t index = hash & (slots_.size() - 1);
    for (; slots_[index].id_count != 0; index = (index + 1) & (slots_.size() - 1))
      if (slots_[index].hash == hash && std::string_view(words_).substr(slots_[index].word_offset, slots_[index].word_length) == word)
        return;
    slots_[index] = {hash, words_.size(), word.size(), ids_.size(), count};
    words_.append(word.data(), word.size());
    ids_.insert(ids_.end(), ids, ids + count);
    ++entries_;
  }

 private:
  struct Slot {
    std::size_t hash;
    std::size_t word_offset, word_length;
    std::size_t id_offset, id_count;  // id_count 0 marks an empty slot (a cached word has at least one token)
  };
  void clear() const {
    slots_.clear();
    words_.clear();
    ids_.clear();
    entries_ = 0;
  }
  void grow() const {
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    for (const Slot& slot : old) {
      if (slot.id_count == 0) continue;
      std::size_t index = slot.hash & (slots_.size() - 1);
      while (slots_[index].id_count != 0) index = (index + 1) & (slots_.size() - 1);
      slots_[index] = slot;
    }
  }
  mutable std::mutex mutex_;
  mutable std::vector<Slot> slots_;  // power-of-two size, at most half full
  mutable std::string words_;
  mutable std::vector<int> ids_;
  mutable std::size_t entries_ = 0;
};

}  // namespace attnscope::text::detail
