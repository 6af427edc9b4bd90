// NCCL's network plugin event payloads, as its profiler ABI hands them on
// (v3 on): the NetPlugin descriptor's `data`, identified by its 64-bit `id`,
// whose low 16 bits are the payload's version and the next 16 bits the
// network type. Only the version-1 payloads of the IB and socket transports
// are declared; any other is kept as its id alone.
//
// Declarations only, as profiler_common.h.

#ifndef PLUGIN_ABI_PROFILER_NET_H_
#define PLUGIN_ABI_PROFILER_NET_H_

#include <stddef.h>
#include <stdint.h>

namespace ncclwatch::nccl {

inline constexpr int64_t kNetTypeIb = int64_t{1} << 16;
inline constexpr int64_t kNetTypeSocket = int64_t{2} << 16;
inline constexpr int64_t kNetVersionMask = 0xffff;
inline constexpr int64_t kNetTypeMask = int64_t{0xffff} << 16;

struct NetIbDescrV1 {
  uint8_t type;  // 1: QP event
  struct {
    int device;
    uint64_t wr_id;
    int opcode;
    int qpNum;
    size_t length;
  } qp;
};

struct NetSocketDescrV1 {
  uint8_t type;  // 1: socket event
  struct {
    int fd;
    int op;
    size_t length;
  } sock;
};

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_NET_H_
