"""cc_proto: C++ code for a .proto file via the system protoc (no rules_proto).

Usage (in proto/BUILD):

    load("//build_defs:proto.bzl", "cc_proto")

    cc_proto(name = "trace_cc_proto", src = "trace.proto")
    cc_proto(
        name = "report_cc_proto",
        src = "report.proto",              # may `import "proto/trace.proto";`
        deps = [":trace_cc_proto"],        # cc_proto targets of imported files
        visibility = ["//visibility:public"],
    )

Then `deps = ["//proto:trace_cc_proto"]` and `#include "proto/trace.pb.h"`.

Details:
  * protoc runs with -I at the workspace root, so imports are written
    workspace-relative ("proto/trace.proto"); only imports of our own protos
    (listed in `deps`) and of protobuf's well-known types (google/protobuf/*.proto,
    found by /usr/bin/protoc in /usr/include) are supported.
  * Outputs are named after the .proto file: trace.proto -> trace.pb.h,
    trace.pb.cc, in the same package.
  * `deps` must be labels of other cc_proto targets in "//pkg:name" or ":name"
    form (the macro appends "_proto_srcs" to find their .proto files).
  * The generated code is compiled without -Werror.
"""

_PROTOC = "/usr/bin/protoc"

def _srcs_label(label):
    return label + "_proto_srcs"

def cc_proto(name, src, deps = [], visibility = None, testonly = None, **kwargs):
    """Generates <src>.pb.{h,cc} with protoc and wraps them in a cc_library.

    Args:
      name: name of the resulting cc_library.
      src: the .proto file (in this package).
      deps: other cc_proto targets whose .proto files `src` imports.
      visibility: visibility of the cc_library (and of the .proto filegroup).
      testonly: passed through.
      **kwargs: passed to the cc_library (e.g. tags).
    """
    if not src.endswith(".proto"):
        fail("cc_proto: src must be a .proto file, got " + src)
    base = src[:-len(".proto")]
    pb_h = base + ".pb.h"
    pb_cc = base + ".pb.cc"

    # This .proto plus (transitively) the .proto files it imports.
    native.filegroup(
        name = name + "_proto_srcs",
        srcs = [src] + [_srcs_label(d) for d in deps],
        visibility = visibility,
        testonly = testonly,
    )

    native.genrule(
        name = name + "_genproto",
        srcs = [src, name + "_proto_srcs"],
        outs = [pb_h, pb_cc],
        # Paths are relative to the execroot, which is the workspace root for
        # the main repository; $(GENDIR) is bazel-out/<cfg>/bin, so
        # proto/trace.proto lands at $(GENDIR)/proto/trace.pb.{h,cc}.
        cmd = "%s -I. --cpp_out=$(GENDIR) $(location %s)" % (_PROTOC, src),
        message = "protoc %s" % src,
        testonly = testonly,
    )

    native.cc_library(
        name = name,
        srcs = [pb_cc],
        hdrs = [pb_h],
        deps = deps + ["@system//:protobuf"],
        visibility = visibility,
        testonly = testonly,
        **kwargs
    )
