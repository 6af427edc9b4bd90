#!/usr/bin/env bash
# The release's .deb as Debian's lintian judges it: no error and no warning
# (overrides, each with its reason, in packaging/debian/). Then what a user
# of the package sees: the man page, the completions, the copyright, the
# changelog, and every file dated after 1970. An aarch64 package
# (--config=aarch64) runs its command under qemu-user.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v lintian > /dev/null || fail "no lintian (scripts/install_deps.sh)"
deb=$PWD/release/ncclwatch.deb
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/lintian_test.XXXXXX")

# lintian refuses nothing as root but says so; its tags are what counts.
report=$(lintian --allow-root --fail-on none --display-level '>=warning' "$deb" 2>&1) || fail "lintian: $report"
tags=$(grep -E '^[EW]: ' <<< "$report" || true)
[[ -z "$tags" ]] || fail "lintian: $tags"

case $(dpkg-deb -f "$deb" Architecture) in
  arm64) multiarch=aarch64-linux-gnu run=(qemu-aarch64 -L /) ;;
  *) multiarch=x86_64-linux-gnu run=() ;;
esac
dpkg-deb -x "$deb" "$tmp/root"
for f in usr/share/man/man1/ncclwatch.1.gz usr/share/bash-completion/completions/ncclwatch \
  usr/share/zsh/vendor-completions/_ncclwatch usr/share/doc/ncclwatch/copyright \
  usr/share/doc/ncclwatch/changelog.gz usr/share/lintian/overrides/ncclwatch; do
  [[ -s "$tmp/root/$f" ]] || fail "the package lacks $f"
done
zcat "$tmp/root/usr/share/man/man1/ncclwatch.1.gz" | grep -q '^\.SS diagnose$' || fail "the man page has no diagnose"
# The binaries are stripped: no symbol table.
for f in usr/bin/ncclwatch "usr/lib/$multiarch/libnccl-profiler-ncclwatch.so"; do
  if readelf -S "$tmp/root/$f" | grep -q '\.symtab'; then fail "$f is not stripped"; fi
done
old=$(find "$tmp/root" -not -newermt '1980-01-02' | head -3)
[[ -z "$old" ]] || fail "files dated before 1980: $old"
# And the stripped command still runs.
"${run[@]}" "$tmp/root/usr/bin/ncclwatch" --version | grep -q '^ncclwatch ' || fail "the stripped command does not run"
echo PASS
