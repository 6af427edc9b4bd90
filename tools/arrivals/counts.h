// What the straggler finders count (tools/diagnose/find_stragglers.h) and
// a per-node summary keeps of it (DigestArrivals, digest.h): each process's arrivals
// at the collectives seen on every rank, late or not, over the windows or
// over the samples the summaries took across the job, and the times its
// kernels were held on its GPU behind other work.
//
// The counts read only the model and the options: Diagnose makes them on
// a thread of its own beside the other finders, since at 16,384 ranks they
// were half the diagnosis (BENCHMARKS.md, "The 16k merge on more than one
// core").
//
// Thread safety: functions of their const arguments; any thread.

#ifndef TOOLS_ARRIVALS_COUNTS_H_
#define TOOLS_ARRIVALS_COUNTS_H_

#include <stddef.h>
#include <stdint.h>

#include <map>
#include <utility>
#include <vector>

#include "tools/arrivals/options.h"
#include "tools/model/model.h"

namespace ncclwatch::tools::arrivals {

// The median of `v` (0 when empty), by selection, not a full sort: it runs
// once per collective over every rank (10 M values for 1,024 ranks x
// 10,000 collectives).
double MedianOf(std::vector<double> v);

// Each process's arrivals at the collectives of `m` seen complete on every
// rank: how many, how often last and late, and its lags behind the median
// rank, in all and per (communicator, function).
struct Row {
  uint32_t total = 0, late = 0;
  std::vector<double> lags;
  void Reserve(size_t more) { lags.reserve(lags.size() + more); }
};
struct Tally {
  std::vector<uint32_t> total, late;
  std::vector<std::vector<double>> lags;
  std::vector<std::map<uint32_t, uint32_t>> late_comm;
  // Per process and (communicator, function): a rank late at only one of
  // the step's functions (it sleeps before each all_reduce) is late at a
  // minority of all its collectives, and a straggler all the same.
  std::vector<std::map<std::pair<uint32_t, uint16_t>, Row>> rows;
  // Counted with each collective's weight: 1 for whole arrivals, the
  // stride for samples (each stands for that many of its communicator's),
  // so that a communicator sampled one in 4 does not weigh as much as one
  // sampled one in 16 in a rank's share of late arrivals.
  std::vector<uint64_t> weighted_total, weighted_late;
};

// How late (s) the last arriver must be behind the median rank to be late:
// the option's threshold, or across hosts the clock alignment's error.
double Threshold(const Model& m, const StragglerOptions& o);

// The arrivals at the windows' collectives seen complete on every rank.
// `thr`: Threshold; `fraction`: StragglerOptions::straggler_duration_fraction.
Tally Count(const Model& m, double thr, double fraction);
// The sampled arrivals (Model::sampled) judged as Count judges whole ones,
// on the aligned clock (each member's start plus its Proc::offset_ns).
Tally CountSampled(const Model& m, double thr, double fraction);

// Processes whose arrivals the windows do not hold whole: theirs lacks
// some collectives (let go by a summary or cut by its cap, or put back from
// summaries: AskedOp), or a peer's on one of their communicators does,
// since a collective counts only where every rank holds it (a trace file
// read whole beside other nodes' summaries is judged over their windows).
std::vector<bool> WindowLacks(const Model& m);
// Which processes the summaries' arrival samples judge (Model::sampled):
// those each of whose communicators is covered by them.
std::vector<bool> SampledProcs(const Model& m);
// How many sampled collectives CountSampled judges per process (its
// Tally::total), without judging them.
std::vector<uint32_t> SampledTotals(const Model& m);
// Each process's sampled communicators (Model::sampled indices, those
// with positions), listed once: looked up per process and communicator,
// 'world' of 16,384 members made this quadratic.
std::vector<std::vector<uint32_t>> SampledOf(const Model& m);
// A summary's process judged from its digest (all its collectives), not
// from its window, when the digest was made with the thresholds used now.
bool UsesDigest(const Proc& p, double thr, double fraction);

// The GPU-held finder's rows (FindGpuHeld), per process and (communicator,
// function): collectives whose every rank's held time is known, those where
// it was held longest and past the bar, its held lags and its host's
// arrival lags behind the median rank's.
struct HeldRow {
  uint32_t total = 0, late = 0;
  std::vector<double> lags, host_lags;
  void Reserve(size_t more) {
    lags.reserve(lags.size() + more);
    host_lags.reserve(host_lags.size() + more);
  }
};
using HeldRows = std::vector<std::map<std::pair<uint32_t, uint16_t>, HeldRow>>;

// Late on the GPU means held more than the median rank by more than the
// threshold and two polling intervals (a held time is known to one).
double HeldBar(double thr);
// Over the windows' collectives seen on every rank. `bar`: HeldBar.
HeldRows CountHeld(const Model& m, double bar);
// Over the summaries' samples (SampledComm::held_ns), on the aligned clock.
HeldRows CountHeldSampled(const Model& m, double bar);

// A row's counts and lags (s): what the finder reads, from rows counted
// here or from a summary's digest.
struct HeldJudged {
  uint32_t total = 0, late = 0;
  double median_lag = 0, max_lag = 0, host_lag = 0;
};
HeldJudged Judged(const HeldRow& r);

// Everything the straggler finders count, made once per diagnosis.
struct StragglerCounts {
  Tally window, sampled;               // arrivals on the host
  HeldRows held_window, held_sampled;  // GPU-held times (FindGpuHeld)
};
StragglerCounts CountForStragglers(const Model& m, const StragglerOptions& o);

}  // namespace ncclwatch::tools::arrivals

#endif  // TOOLS_ARRIVALS_COUNTS_H_
