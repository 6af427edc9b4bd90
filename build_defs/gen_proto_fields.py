#!/usr/bin/env python3
"""Writes a C++ header of field-number constants for a .proto file.

The plugin encodes trace.proto by hand (it links no libprotobuf); its field
numbers come from this header, generated from the schema at build time, so a
number is written in one place, the .proto. A test checks every constant
against libprotobuf's descriptors (proto/trace_fields_test.cc).

Handles what trace.proto uses: top-level messages, oneofs, enums (skipped),
comments. Nested messages are refused, not guessed.

    gen_proto_fields.py IN.proto OUT.h NAMESPACE
"""
import re
import sys


def camel(name):
    return "k" + "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def parse(text):
    text = re.sub(r"//[^\n]*", "", text)
    messages = []  # (name, [(field, number)])
    stack = []  # ("message", name) | ("oneof", _) | ("enum", _)
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        m = re.match(r"(message|enum|oneof)\s+(\w+)\s*\{$", line)
        if m:
            kind, name = m.groups()
            if kind == "message":
                if any(k == "message" for k, _ in stack):
                    sys.exit("gen_proto_fields: nested message %s is not supported" % name)
                messages.append((name, []))
            stack.append((kind, name))
            continue
        if line == "}":
            if not stack:
                sys.exit("gen_proto_fields: unbalanced braces")
            stack.pop()
            continue
        if stack and stack[-1][0] in ("message", "oneof"):
            f = re.match(r"(?:repeated\s+)?[\w.]+\s+(\w+)\s*=\s*(\d+)\s*;$", line)
            if f:
                messages[-1][1].append((f.group(1), int(f.group(2))))
            elif not line.startswith(("reserved", "option")):
                sys.exit("gen_proto_fields: cannot read line: %s" % line)
    if stack:
        sys.exit("gen_proto_fields: unbalanced braces")
    return messages


def main():
    src, out, namespace = sys.argv[1], sys.argv[2], sys.argv[3]
    messages = parse(open(src).read())
    guard = re.sub(r"[^A-Z0-9]", "_", out.upper().split("BIN/", 1)[-1]) + "_"
    lines = [
        "// Generated from %s by build_defs/gen_proto_fields.py. Do not edit." % src,
        "// Field numbers for hand-written encoders; proto/trace_fields_test.cc",
        "// checks each against libprotobuf's descriptors.",
        "",
        "#ifndef %s" % guard,
        "#define %s" % guard,
        "",
        "#include <stdint.h>",
        "",
        "namespace %s {" % namespace,
        "",
    ]
    for name, fields in messages:
        lines.append("struct %s {" % name)
        for field, number in fields:
            lines.append("  static constexpr uint32_t %s = %d;" % (camel(field), number))
        lines.append("};")
        lines.append("")
    lines.append("struct FieldEntry {")
    lines.append("  const char* message;")
    lines.append("  const char* field;")
    lines.append("  uint32_t number;")
    lines.append("};")
    lines.append("inline constexpr FieldEntry kAllFields[] = {")
    for name, fields in messages:
        for field, number in fields:
            lines.append('    {"%s", "%s", %d},' % (name, field, number))
    lines.append("};")
    lines.append("")
    lines.append("}  // namespace %s" % namespace)
    lines.append("")
    lines.append("#endif  // %s" % guard)
    open(out, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
