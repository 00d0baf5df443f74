#!/usr/bin/env bash
# The package's install test (.ci/run, after `cargo test`): builds the .deb from the debug
# binary (contrib/deb/build.sh --dev), installs it with dpkg on this machine, checks what it
# put in place, that the shipped configuration loads as the service's user, then purges it
# and checks nothing is left. Needs root and a Debian system; no running systemd (the
# maintainer scripts must work without it, as in a container).
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() {
  echo "check.sh: $*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || fail "must run as root (it installs the package)"
if dpkg -s tollgate >/dev/null 2>&1; then
  fail "a tollgate package is already installed; this test installs and purges its own"
fi

deb=$(contrib/deb/build.sh --dev | tail -n 1)
[ -f "$deb" ] || fail "build.sh printed no package path (got: $deb)"
echo "check.sh: installing $deb"
# Purge whatever happens next, so a failed check leaves no package behind.
trap 'dpkg --purge tollgate >/dev/null 2>&1 || true' EXIT
dpkg -i "$deb"

for file in /usr/bin/tollgate /etc/tollgate/gateway.toml /etc/logrotate.d/tollgate \
  /usr/lib/systemd/system/tollgate.service /usr/share/man/man1/tollgate.1.gz \
  /usr/share/bash-completion/completions/tollgate /usr/share/zsh/vendor-completions/_tollgate \
  /usr/share/fish/vendor_completions.d/tollgate.fish /usr/share/doc/tollgate/LICENSE-MIT \
  /usr/share/doc/tollgate/LICENSE-APACHE /usr/share/doc/tollgate/copyright; do
  [ -e "$file" ] || fail "$file is not installed"
done
grep -qx /etc/tollgate/gateway.toml /var/lib/dpkg/info/tollgate.conffiles ||
  fail "/etc/tollgate/gateway.toml is not a conffile"
getent passwd tollgate >/dev/null || fail "postinst made no tollgate user"
[ "$(stat -c %U /var/log/tollgate)" = tollgate ] || fail "/var/log/tollgate is not the user's"

tollgate --version | grep -q "^tollgate " || fail "tollgate --version: $(tollgate --version 2>&1)"
# As the service runs it (ExecStartPre): the user, the installed file, and /run/tollgate for
# the pid file, which the unit's RuntimeDirectory makes (no systemd here: made by hand).
install -d -o tollgate -g tollgate /run/tollgate
trap 'rm -rf /run/tollgate; dpkg --purge tollgate >/dev/null 2>&1 || true' EXIT
out=$(runuser -u tollgate -- /usr/bin/tollgate -t -c /etc/tollgate/gateway.toml 2>&1) ||
  fail "tollgate -t as the tollgate user failed: $out"
[ "$out" = "configuration ok" ] || fail "tollgate -t printed: $out"
gzip -dc /usr/share/man/man1/tollgate.1.gz | grep -q '^\.TH' || fail "the man page is not roff"

rm -rf /run/tollgate
dpkg --purge tollgate
trap - EXIT
for gone in /usr/bin/tollgate /etc/tollgate /var/log/tollgate /var/lib/tollgate \
  /usr/lib/systemd/system/tollgate.service; do
  [ ! -e "$gone" ] || fail "$gone is left after purge"
done
! getent passwd tollgate >/dev/null || fail "the tollgate user is left after purge"
! getent group tollgate >/dev/null || fail "the tollgate group is left after purge"
echo "check.sh: the package installs, checks its configuration and purges cleanly"
