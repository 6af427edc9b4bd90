#ifndef PLUGIN_CORE_VERSION_H_
#define PLUGIN_CORE_VERSION_H_

// The release, written into every trace header (ProcessHeader.plugin_version)
// and printed by `ncclwatch --version`.
namespace ncclwatch::plugin {
inline constexpr const char kPluginVersion[] = "0.1.0";
}

#endif  // PLUGIN_CORE_VERSION_H_
