// The plugin's defaults that the command's readers must know too: a
// watch while the job runs counts an operation as hung after the stuck
// threshold the files' headers give, and this one where none does.

#ifndef PLUGIN_CORE_DEFAULTS_H_
#define PLUGIN_CORE_DEFAULTS_H_

namespace ncclwatch::plugin {

// NCCLWATCH_STUCK_SEC's default: an operation in flight this long makes the
// writer's stuck report.
inline constexpr double kDefaultStuckSec = 60.0;

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_DEFAULTS_H_
