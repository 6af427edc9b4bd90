// The API events NCCL 2.28 and later send around every call whatever the
// plugin's mask (docs/nccl_call_order.md), as the launch benchmarks play
// them (plugin/core/launch_benchmark.cc on the CPU, gpu/events_check.cc on
// a GPU): GroupApi start and its GroupStartApiStop state, CollApi start and
// stop, then GroupEndApiStart. The plan's KernelLaunch takes the GroupApi
// handle as its parent, its Coll the CollApi's; the GroupApi stops last.
// Header only: events_check is built on the GPU hosts without Bazel.

#ifndef PLUGIN_TESTING_API_EVENTS_H_
#define PLUGIN_TESTING_API_EVENTS_H_

#include "plugin/abi/profiler_common.h"

namespace ncclwatch::testing {

// `table`: the plugin's ncclProfiler_vN (N >= 5), D its descriptor type;
// `captured`: NCCL's graphCaptured for the call. The handles come back in
// *group_api and *coll_api.
template <typename D, typename T>
inline void StartCallApiEvents(T* table, void* ctx, void* stream, bool captured, void** group_api, void** coll_api) {
  D ga{};
  ga.type = nccl::kGroupApi;
  ga.groupApi.graphCaptured = captured;
  ga.groupApi.groupDepth = 1;
  table->startEvent(ctx, group_api, &ga);
  table->recordEventState(*group_api, nccl::kGroupStartApiStop, nullptr);
  D ca{};
  ca.type = nccl::kCollApi;
  ca.parentObj = *group_api;
  ca.collApi.func = "AllReduce";
  ca.collApi.count = 2;
  ca.collApi.datatype = "ncclFloat32";
  ca.collApi.stream = stream;
  ca.collApi.graphCaptured = captured;
  table->startEvent(ctx, coll_api, &ca);
  table->stopEvent(*coll_api);
  table->recordEventState(*group_api, nccl::kGroupEndApiStart, nullptr);
}

}  // namespace ncclwatch::testing

#endif  // PLUGIN_TESTING_API_EVENTS_H_
