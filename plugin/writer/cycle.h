// The writer's drain cycle as policy: how often it runs, and in which order
// one cycle writes what it writes. Writer::Loop and Writer::Cycle follow it
// (each step of a cycle names itself, and a step out of this order stops a
// debug build); the tools' test trace builder (tools/testing/trace_builder.cc)
// plays the writer by the same facts, so that a trace it builds is one the
// plugin could have written.
//
// Declarations only: no state, nothing allocates.

#ifndef PLUGIN_WRITER_CYCLE_H_
#define PLUGIN_WRITER_CYCLE_H_

#include <stdint.h>

namespace ncclwatch::plugin {

// The longest the writer waits between two drains of the rings.
inline constexpr uint64_t kMaxDrainPeriodNs = 10'000'000;

// How often the writer drains the rings: every NCCLWATCH_FLUSH_MS, and at
// least every kMaxDrainPeriodNs (a burst drains every millisecond besides).
constexpr uint64_t DrainPeriodNs(uint32_t flush_ms) {
  return uint64_t{flush_ms} * 1'000'000 < kMaxDrainPeriodNs ? uint64_t{flush_ms} * 1'000'000 : kMaxDrainPeriodNs;
}

// What one drain cycle writes, in the order it writes it.
enum class CycleStep : uint8_t {
  kMaskChange,         // NCCL's mask, read before the drain: what is drained now is judged by the newest
  kCommInit,           // communicators defined again after a lost write, then those noted up to the drain's end
  kRecords,            // what the rings held: Op (with its OpDone when drained together), OpDone, raw events
  kCommFinalize,       // after everything its communicator recorded
  kDrops,              // when the counts changed
  kHeartbeat,          // when due
  kLaunchCompletions,  // OpDone of the operations whose launch's CUDA events have passed
  kStuckReport,        // when an operation in flight passed the threshold (in_flight.h)
  kWrite,              // the cycle's write(2), when due or asked for (FlushNow)
  kFinalize,           // the last cycle only: the closing drops and the Finalize record
};

// A step's place in the cycle: a lower one is written first.
constexpr int CycleRank(CycleStep s) { return static_cast<int>(s); }

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_CYCLE_H_
