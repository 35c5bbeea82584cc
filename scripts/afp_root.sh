#!/usr/bin/env bash
# Prepare netatalk 4 (afpd, and netatalk's own AFP test clients) for workbench's AFP server, once.
#   scripts/afp_root.sh            prepare or check; prints "host" or the root filesystem's folder
#   scripts/afp_root.sh --check    only say whether a usable netatalk is there (exit 0) or not (exit 1)
# A host whose Debian has netatalk >= 4 (Debian 13 on) gets the packages installed. Older hosts (Debian 12:
# glibc 2.36, no netatalk) get a Debian 13 root filesystem at $WORKBENCH_AFP_ROOT (default
# /var/cache/workbench/afp-root) made by debootstrap from the Debian registry this machine is configured for,
# with netatalk installed inside it; workbench runs afpd there with chroot. About a minute and 420 MB, once:
# a root with a valid marker (package versions, afpd answering --version) is reused.
set -euo pipefail

ROOT=${WORKBENCH_AFP_ROOT:-/var/cache/workbench/afp-root}
MARKER=.workbench-afp-root
STEP_TIMEOUT_S=${WORKBENCH_AFP_TIMEOUT_S:-900}
check_only=0
[[ "${1:-}" == "--check" ]] && check_only=1

say() { echo "afp_root.sh: $*" >&2; }

host_netatalk_major() {
  # afpd prints "afpd 4.2.3 - ..." on its first line
  command -v afpd >/dev/null 2>&1 || { echo 0; return; }
  afpd -V 2>/dev/null | head -n1 | sed -n 's/^afpd \([0-9]*\)\..*/\1/p' | grep . || echo 0
}

root_valid() {
  [[ -f "$ROOT/$MARKER" ]] || return 1
  timeout 30 chroot "$ROOT" /usr/sbin/afpd -V >/dev/null 2>&1 || return 1
  [[ -x "$ROOT/usr/bin/afp_speedtest" ]] || return 1
}

if (( $(host_netatalk_major) >= 4 )); then
  echo host
  exit 0
fi
if root_valid; then
  echo "$ROOT"
  exit 0
fi
((check_only)) && { say "no netatalk 4 on this host and no prepared root at $ROOT"; exit 1; }

. /etc/os-release
if (( ${VERSION_ID:-0} >= 13 )) 2>/dev/null; then
  say "installing netatalk and netatalk-tests from this host's Debian"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive timeout "$STEP_TIMEOUT_S" apt-get install -y -q --no-install-recommends \
    netatalk netatalk-tests
  # The package enables a system service; workbench runs its own afpd with private config and state.
  systemctl disable --now netatalk >/dev/null 2>&1 || true
  (( $(host_netatalk_major) >= 4 )) || { say "netatalk installed but afpd -V does not say version 4"; exit 1; }
  echo host
  exit 0
fi

# The mirror this machine's apt uses for Debian (deb822 "URIs:" or one-line "deb URL suite").
mirror=$(
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'; } |
    grep -m1 -E '/debian/?$' || true
)
mirror=${mirror:-http://deb.debian.org/debian}

if ! command -v debootstrap >/dev/null 2>&1; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
fi

mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock -w "$STEP_TIMEOUT_S" 9 || { say "another preparation holds $ROOT.lock"; exit 1; }
if root_valid; then  # prepared by whoever held the lock before us
  echo "$ROOT"
  exit 0
fi

work="$ROOT.new"
proc_mounted=0
cleanup() {
  ((proc_mounted)) && umount -l "$work/proc" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
umount -l "$work/proc" 2>/dev/null || true  # left mounted by a run killed with SIGKILL
rm -rf --one-file-system "$work"
started=$(date +%s)
say "debootstrap trixie (Debian 13) into $work from $mirror"
timeout "$STEP_TIMEOUT_S" debootstrap --variant=minbase trixie "$work" "$mirror" >"$ROOT.log" 2>&1 ||
  { say "debootstrap failed; see $ROOT.log"; exit 1; }
mount -t proc proc "$work/proc" || { say "cannot mount /proc inside $work"; exit 1; }
proc_mounted=1
# No daemon starts inside the root while packages are installed.
printf '#!/bin/sh\nexit 101\n' >"$work/usr/sbin/policy-rc.d" && chmod 755 "$work/usr/sbin/policy-rc.d"
say "installing netatalk and netatalk-tests inside it"
DEBIAN_FRONTEND=noninteractive timeout "$STEP_TIMEOUT_S" chroot "$work" apt-get install -y -q \
  --no-install-recommends netatalk netatalk-tests >>"$ROOT.log" 2>&1 ||
  { say "apt-get install inside the root failed; see $ROOT.log"; exit 1; }
chroot "$work" apt-get clean >/dev/null 2>&1 || true
umount "$work/proc" || { say "cannot unmount $work/proc"; exit 1; }
proc_mounted=0
versions=$(chroot "$work" dpkg-query -W -f='${Package} ${Version}\n' netatalk netatalk-tests libc6)
afpd_version=$(timeout 30 chroot "$work" /usr/sbin/afpd -V 2>&1 | head -n1)
[[ "$afpd_version" == afpd\ 4* ]] || { say "afpd in the new root does not answer --version: $afpd_version"; exit 1; }
printf '%s\n%s\n' "$versions" "$afpd_version" >"$work/$MARKER"
rm -rf --one-file-system "$ROOT"
mv "$work" "$ROOT"
say "prepared $ROOT in $(($(date +%s) - started)) s ($(du -sh --one-file-system "$ROOT" | cut -f1))"
echo "$ROOT"
