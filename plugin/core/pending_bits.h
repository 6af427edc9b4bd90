// PendingBits: a fixed set of N flags that any thread raises and one thread
// collects, without a lock and without allocating.
//
// It carries the completions a thread could not put in a ring of its own
// (Profiler::MaybeComplete): the completing thread builds the record in the
// operation's slot, then raises the slot's flag; the writer collects the
// flags and reads the slots. A slot holds one operation at a time and stays
// live until its flag is collected, so a flag is never raised twice before
// it is collected, and there is nothing to fill: however many completions
// come between two collections, none is lost.
//
// Raise is two atomic stores (a fetch_or on the flag's word, a store of the
// summary word): what the raiser wrote before it is visible to the collector
// in Collect's callback. Not a queue: it keeps no order among flags, and a
// flag raised twice between collections is seen once.
//
// Thread safety: Raise from any thread; Collect from one thread at a time.

#ifndef PLUGIN_CORE_PENDING_BITS_H_
#define PLUGIN_CORE_PENDING_BITS_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>

namespace ncclwatch::plugin {

template <size_t N>
class PendingBits {
 public:
  static constexpr size_t kWords = (N + 63) / 64;

  // `i` < N.
  void Raise(size_t i) {
    words_[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_release);
    // After the word: a collector that sees the summary sees the word.
    any_.store(1, std::memory_order_release);
  }

  // Calls `f(i)` for every flag raised since the last Collect, clearing it.
  // Returns how many. A flag raised while this runs is seen now or by the
  // next Collect.
  template <typename F>
  size_t Collect(F f) {
    if (any_.load(std::memory_order_relaxed) == 0) return 0;
    any_.exchange(0, std::memory_order_acquire);
    size_t n = 0;
    for (size_t w = 0; w < kWords; ++w) {
      if (words_[w].load(std::memory_order_relaxed) == 0) continue;
      uint64_t bits = words_[w].exchange(0, std::memory_order_acquire);
      while (bits != 0) {
        const int b = __builtin_ctzll(bits);
        bits &= bits - 1;
        f(w * 64 + static_cast<size_t>(b));
        ++n;
      }
    }
    return n;
  }

 private:
  std::atomic<uint64_t> words_[kWords] = {};
  std::atomic<uint32_t> any_{0};
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_PENDING_BITS_H_
