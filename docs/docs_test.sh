#!/usr/bin/env bash
# Runs every `ncclwatch COMMAND ...` line shown in the fenced code blocks of
# README.md and docs/*.md against a recording from testdata/, and fails on
# any that the command refuses: a usage error or an unusable input (exit
# status 2), a crash, or a command that could not run. So a flag renamed or
# removed in tools/cli.cc cannot stay in the documents. And every flag that
# a command's --help names must appear in docs/commands.md.
#
#   docs_test.sh NCCLWATCH REPO_ROOT      # (bazel test //:docs_test)
#
# The convention (CONTRIBUTING.md, "Commands in the documents"): a command
# is a line in a fenced block that holds `ncclwatch` followed by one of the
# commands (a prompt `$ ` and text before it, as in `srun ... ncclwatch
# summarize ...`, are allowed); it ends at the first unquoted `|`, `&`, `;`,
# `<`, `>`, `)` or ` #`, and a trailing `\` joins the next line. It runs in
# a folder where the documents' placeholder names exist:
#   traces/          a finished 4-rank job (testdata/gpu/skip)
#   summaries/       its per-node summary
#   fr/              PyTorch Flight Recorder dumps (testdata/gpu/torch_skip/fr)
#   trace.ncclwatch  one trace file of traces/
#   base.json, run1.json to run3.json   baselines: stats --format=json of traces/
#   testdata/        the repository's recordings
#   $NCCLWATCH_DIR and $TRACES (traces/), $NCCLWATCH_SUMMARIES (summaries/),
#   $NCCLWATCH_JOB_ID (empty: every job), $ask (empty)
# `watch` gets --interval=0.05 --timeout=30 before the document's own flags,
# so that it decides within a few polls on the finished recording, and ends
# even where the recording leaves it waiting. A fenced block right
# after a line `<!-- docs-test: no-run -->` is not run.
set -uo pipefail

ncclwatch_bin=$(realpath "$1")
root=$(realpath "$2")

work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/docs_test.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "docs_test: $*" >&2; exit 1; }

# The placeholders.
mkdir -p "$work/traces" "$work/summaries" "$work/out"
cp "$root"/testdata/gpu/skip/*.ncclwatch "$work/traces/" || fail "no recording in testdata/gpu/skip"
ln -s "$root/testdata" "$work/testdata"
ln -s "$root/testdata/gpu/torch_skip/fr" "$work/fr"
first=$(ls "$work"/traces/*.ncclwatch | head -1)
cp "$first" "$work/trace.ncclwatch"
(
  cd "$work" &&
    "$ncclwatch_bin" summarize -o summaries/node.ncclsummary traces/ > /dev/null 2>&1 &&
    "$ncclwatch_bin" stats --format=json -o base.json traces/ 2> /dev/null &&
    cp base.json run1.json && cp base.json run2.json && cp base.json run3.json
) || fail "could not make the placeholders with $ncclwatch_bin"

# The command lines: "FILE:LINE<TAB>ARGUMENTS" (the text after `ncclwatch`).
commands="$work/commands.tsv"
docs=("$root/README.md")
for f in "$root"/docs/*.md; do docs+=("$f"); done
awk '
  BEGIN { cmds = "diagnose|watch|merge|export|stats|check|summarize|dump|ras" }
  FNR == 1 { fence = 0; norun = 0; held = ""; name = FILENAME; sub(".*/", "", name)
             if (FILENAME ~ /\/docs\/[^\/]*$/) name = "docs/" name }
  /^[ \t]*```/ {
    if (!fence) { fence = 1; skip = norun } else { fence = 0; skip = 0 }
    norun = 0; next
  }
  !fence { norun = ($0 ~ /^<!-- docs-test: no-run -->[ \t]*$/); next }
  skip { next }
  {
    line = $0
    if (held != "") { line = held " " line; at = held_at } else { at = FNR }
    if (line ~ /\\$/) { held = substr(line, 1, length(line) - 1); held_at = at; next }
    held = ""
    rest = line
    while (match(rest, "(^|[^A-Za-z0-9_./-])ncclwatch[ \t]+(" cmds ")([ \t]|$)")) {
      # The command and its arguments, up to the first unquoted terminator.
      rest = substr(rest, RSTART)
      sub(/^[^A-Za-z0-9_.\/-]?ncclwatch[ \t]+/, "", rest)
      q = ""; depth = 0; out = ""
      for (i = 1; i <= length(rest); i++) {
        c = substr(rest, i, 1)
        if (q != "") { if (c == q) q = ""; out = out c; continue }
        if (c == "\"" || c == "\047") { q = c; out = out c; continue }
        if (c == "$" && substr(rest, i + 1, 1) == "(") { depth++; out = out "$("; i++; continue }
        if (c == ")" && depth > 0) { depth--; out = out c; continue }
        if (c ~ /[|&;<>)]/) break
        if (c == "#" && (i == 1 || substr(rest, i - 1, 1) ~ /[ \t]/)) break
        out = out c
      }
      print name ":" at "\t" out
      rest = substr(rest, i)
    }
  }
' "${docs[@]}" > "$commands"

count=$(wc -l < "$commands")
((count > 0)) || fail "no ncclwatch command found in README.md and docs/*.md"

failed=0
while IFS=$'\t' read -r where text; do
  # Expand the line as the shell would, with the placeholders' variables.
  if ! (cd "$work" && NCCLWATCH_DIR=traces TRACES=traces NCCLWATCH_SUMMARIES=summaries NCCLWATCH_JOB_ID= ask= \
    bash -c 'eval "set -- $1" && printf "%s\0" "$@"' _ "$text" > "$work/args"); then
    echo "$where: cannot be read as a shell command: ncclwatch $text" >&2
    failed=$((failed + 1))
    continue
  fi
  args=()
  mapfile -d '' -t args < "$work/args"
  if [[ "${args[0]:-}" == watch ]]; then args=(watch --interval=0.05 --timeout=30 "${args[@]:1}"); fi
  (cd "$work" && "$ncclwatch_bin" "${args[@]}" < /dev/null > out/stdout 2> out/stderr)
  rc=$?
  if ((rc == 2 || rc > 3)); then
    echo "$where: exit status $rc: ncclwatch $text" >&2
    head -5 "$work/out/stderr" | sed 's/^/    /' >&2
    failed=$((failed + 1))
  else
    echo "ok ($rc) $where: ncclwatch $text"
  fi
done < "$commands"

# Every flag a command's --help names is documented in docs/commands.md.
undocumented=0
for cmd in diagnose watch merge export stats check summarize dump ras; do
  "$ncclwatch_bin" "$cmd" --help > "$work/help" || fail "ncclwatch $cmd --help failed"
  for flag in $(grep -oE -- '--[a-z][a-z-]*[a-z]' "$work/help" | sort -u); do
    if ! grep -qE -- "\`$flag[ =\`]" "$root/docs/commands.md"; then
      echo "docs/commands.md: no row for ncclwatch $cmd $flag" >&2
      undocumented=$((undocumented + 1))
    fi
  done
done

echo "$count commands, $failed refused; $undocumented flags undocumented"
((failed == 0 && undocumented == 0))
