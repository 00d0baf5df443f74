#!/usr/bin/env bash
# The package's install test (.ci/run, after `cargo test`): builds the .deb from the debug
# binary (contrib/deb/build.sh --dev), installs it with dpkg on this machine, checks what it
# put in place, that the shipped configuration loads as the service's user and runs as the unit
# runs it (reloaded and stopped by `tollgate reload` and `tollgate stop`), then purges it
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

# Run as the unit runs it: the user, and port 80 by the one capability it is given. Then the
# operator's commands: a reload read back from the admin API, and a stop that drains.
setpriv --reuid=tollgate --regid=tollgate --init-groups --inh-caps=+net_bind_service \
  --ambient-caps=+net_bind_service /usr/bin/tollgate -c /etc/tollgate/gateway.toml \
  2>/tmp/tollgate-check.log &
gateway=$!
trap 'kill $gateway 2>/dev/null; rm -rf /run/tollgate; dpkg --purge tollgate >/dev/null 2>&1 || true' EXIT
for _ in $(seq 50); do
  [ -s /run/tollgate/tollgate.pid ] && break
  sleep 0.1
done
[ -s /run/tollgate/tollgate.pid ] || fail "the gateway wrote no pid file: $(cat /tmp/tollgate-check.log)"
status=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:80/) || true
[ "$status" = 502 ] || fail "port 80 answered $status, not 502 (no application runs behind it)"
out=$(tollgate reload -c /etc/tollgate/gateway.toml 2>&1) || fail "tollgate reload: $out"
case "$out" in *"generation 2"*) ;; *) fail "tollgate reload printed: $out" ;; esac
out=$(tollgate stop -c /etc/tollgate/gateway.toml 2>&1) || fail "tollgate stop: $out"
wait $gateway || fail "the gateway exited with $? after tollgate stop: $(cat /tmp/tollgate-check.log)"
[ ! -e /run/tollgate/tollgate.pid ] || fail "the pid file is left after the stop"
[ -s /var/log/tollgate/access.log ] || fail "the access log under /var/log/tollgate is empty"

rm -rf /run/tollgate
dpkg --purge tollgate
trap - EXIT
for gone in /usr/bin/tollgate /etc/tollgate /var/log/tollgate /var/lib/tollgate \
  /usr/lib/systemd/system/tollgate.service; do
  [ ! -e "$gone" ] || fail "$gone is left after purge"
done
! getent passwd tollgate >/dev/null || fail "the tollgate user is left after purge"
! getent group tollgate >/dev/null || fail "the tollgate group is left after purge"
echo "check.sh: the package installs, checks its configuration, serves, reloads and stops as its user, and purges cleanly"
