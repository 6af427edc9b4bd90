// What the writer's source files share: the generated field numbers and a
// few helpers. Only writer*.cc include it.

#ifndef PLUGIN_WRITER_INTERNAL_H_
#define PLUGIN_WRITER_INTERNAL_H_

#include <stdint.h>
#include <string.h>

#include <string>

#include "plugin/event_kind.h"
#include "proto/trace_fields.h"

namespace ncclwatch::plugin::writer_internal {

// Field numbers come from the schema (generated; proto/trace_fields_test).
namespace tf = ::ncclwatch::trace_fields;

// trace.proto OpKind of an event kind.
inline uint32_t OpKindOf(uint32_t etype) { return etype == kEvP2p ? 1 : 0; }

// Reads a NUL-terminated string NCCL handed us, bounded.
inline std::string SafeString(const char* s) {
  if (s == nullptr) return "";
  return std::string(s, strnlen(s, 256));
}

}  // namespace ncclwatch::plugin::writer_internal

#endif  // PLUGIN_WRITER_INTERNAL_H_
