// The reconstructed cross-rank order of operations (`ncclwatch merge`).
//
// Each matched operation (a collective across its communicator's ranks, or a
// send with its receive) is one node; an operation no other rank matched is a
// node of its own. Each rank's program order adds an edge between the nodes
// of its consecutive operations. A topological order of that graph respects
// every rank's program order and every collective and send/recv dependency;
// among the nodes ready at a time, the earliest (aligned enqueue time) goes
// first. Ranks that issued the same operations in different orders make the
// graph cyclic: the strongly connected components are reported, and their
// nodes placed by time.
//
// Thread safety: pure functions of the model.

#ifndef TOOLS_ORDER_ORDER_H_
#define TOOLS_ORDER_ORDER_H_

#include <ostream>
#include <string>
#include <vector>

#include "proto/order.pb.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

// The global order as node lists: each entry is the Model::ops indices of one
// node, in order. `in_cycle` (same length) marks nodes of a cycle.
struct GlobalOrder {
  std::vector<std::vector<uint32_t>> nodes;
  std::vector<bool> in_cycle;
  std::vector<std::vector<size_t>> cycles;  // positions of each cycle's nodes
};

GlobalOrder ComputeOrder(const Model& m);

report::MergeReport MergeReportOf(const Model& m, const GlobalOrder& order);

// A readable table of the report.
void PrintMergeText(const report::MergeReport& r, std::ostream& out);


}  // namespace ncclwatch::tools

#endif  // TOOLS_ORDER_ORDER_H_
