// Whether a summary record's bytes could be what `ncclwatch summarize`
// wrote, judged from its wire format before it is parsed: what reading a
// summary costs must follow its bytes (docs/security.md).
//
// Parsed, every element of a repeated message field is an object of a
// hundred bytes or more, and the merge makes more of each (a stats row
// becomes a model row of five sketches, about 560 bytes), while an empty
// element is two bytes on the wire: 4 MB of empty rows took 1.6 GB. The
// checksums do not help, since whoever builds such a file computes them.
// So before a record is parsed, its repeated fields are scanned (nothing
// is allocated) and each element is held to the fewest bytes summarize
// ever writes for it, from the fields it always sets (a window record
// carries its trace record, a stats row its communicator and count, a
// prefix its communicator's hash, ...); a process must name its trace file
// and hold at least one window record (its trace's header, which a window
// never lets go). Where summarize can write one smaller element (the
// prefix of the unhashed communicators, a function whose name the trace
// never defined), one is allowed. Fields the rules do not name (a newer
// writer's) are skipped unread; summary_shape_test checks that every
// repeated field of the schema has a rule.
//
// Not for: judging what the values mean (the merge does), or bounding a
// record's length (the reader does).
//
// Thread safety: a pure function.

#ifndef TOOLS_MODEL_SUMMARY_SHAPE_H_
#define TOOLS_MODEL_SUMMARY_SHAPE_H_

#include <stddef.h>

#include <string>

namespace ncclwatch::tools {

// Whether the `size` bytes at `data`, a SummaryRecord's body, hold only
// elements summarize could have written (see above). False with `why`, a
// phrase naming the field and the element ("rows[12] is 0 bytes, ..."),
// at the first that is not, or where the bytes are no protobuf message.
bool PlausibleSummaryRecord(const char* data, size_t size, std::string* why);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_SUMMARY_SHAPE_H_
