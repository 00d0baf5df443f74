#!/usr/bin/env bash
# Makes tollgate's Debian package with cargo-deb (Cargo.toml, [package.metadata.deb]).
#
#   contrib/deb/build.sh           a release build: the package operators install
#   contrib/deb/build.sh --dev     packages target/debug/tollgate as `cargo test` left it, with
#                                  no release build (CI: contrib/deb/check.sh)
#
# Prints the path of the .deb on its last line. The man page and the shell completions are
# written by the binary being packaged (`tollgate man`, `tollgate completions SHELL`), so they
# always match its flags.
set -euo pipefail
cd "$(dirname "$0")/../.."

profile=release
if [ "${1:-}" = "--dev" ]; then
  profile=dev
fi

command -v cargo-deb >/dev/null || {
  echo "build.sh: cargo-deb is not installed (cargo install cargo-deb --locked)" >&2
  exit 1
}

if [ "$profile" = release ]; then
  cargo build --release --locked --bin tollgate
  bin=target/release/tollgate
else
  # `cargo test` builds the binary too (with the library's `testing` feature, which makes
  # modules public and changes no behaviour); a plain build only if there is none.
  bin=target/debug/tollgate
  [ -x "$bin" ] || cargo build --locked --bin tollgate
fi

# The man page and completions, from the binary itself.
assets=target/deb-assets
rm -rf "$assets"
mkdir -p "$assets"
for sub in man "completions bash"; do
  # shellcheck disable=SC2086 # $sub is a command and its argument
  if ! "$bin" $sub >/dev/null 2>&1; then
    echo "build.sh: \`$bin $sub\` failed: this binary has no \`tollgate $sub\`, which the package's" >&2
    echo "man page and completions are made from" >&2
    exit 1
  fi
done
"$bin" man | gzip -9n >"$assets/tollgate.1.gz"
"$bin" completions bash >"$assets/tollgate.bash"
"$bin" completions zsh >"$assets/_tollgate"
"$bin" completions fish >"$assets/tollgate.fish"

# --no-build: the binary above is packaged as it is. `--profile dev` maps the asset
# target/release/tollgate to target/debug/tollgate (cargo-deb warns that it means this for
# releases; it strips the debug info all the same). --fast: lighter compression, for CI.
args=(--no-build --locked)
if [ "$profile" = dev ]; then
  args+=(--profile dev --fast)
fi
cargo deb "${args[@]}" | tail -n 1
