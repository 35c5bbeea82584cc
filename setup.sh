#!/usr/bin/env bash
# Set up workbench on a fresh Debian 12 machine and run the main job (the two-host lab).
#   ./setup.sh            install everything, then run `workbench lab` (as root: the lab needs namespaces)
#   ./setup.sh --no-run   install everything only (CI)
# Installs: the Debian packages of the real servers and native reference clients, and a virtual
# environment .venv/ with workbench and its test tools. Touches no system-wide configuration.
set -euo pipefail
cd "$(dirname "$0")"

run_lab=1
[[ "${1:-}" == "--no-run" ]] && run_lab=0

DEBIAN_PACKAGES=(
  openssh-server openssh-client   # sshd for SFTP and rsync over SSH; the OpenSSH sftp reference client
  samba smbclient                 # smbd; Samba's smbclient reference client
  rsync                           # rsync client and daemon (and rrsync)
  iperf3 curl                     # raw-TCP cross-check; HTTP/FTP reference client
  sshfs fuse3                     # mounted SFTP (the mount family)
  iproute2 procps                 # ip netns for the lab; ps/pgrep
  chromium                        # headless browser: the HTML report's test renders it (tests/browser.py)
  python3-venv
)

if [[ $(id -u) -ne 0 ]]; then
  echo "setup.sh: run as root (apt-get, and the lab needs network namespaces): sudo ./setup.sh" >&2
  exit 1
fi

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup.sh: installing Debian packages: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The Debian samba package enables system services; workbench runs its own smbd with private state.

# AFP: netatalk 4 from this host's Debian (13 on), else a Debian 13 root for it (Debian 12: about a minute
# and 420 MB in /var/cache/workbench/afp-root, once). Without it setup goes on and AFP rows say why;
# CI, where every server is expected, stops here instead.
if ! scripts/afp_root.sh >/dev/null; then
  echo "setup.sh: no AFP server (netatalk) could be prepared: AFP rows will say unavailable" >&2
  [[ "${CI:-}" == "true" || "${WORKBENCH_TESTS_STRICT:-0}" != "0" ]] && exit 1
fi

PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The distribution was called `workbench` before it became filecopy-workbench: a .venv made then still
# holds it, and both would install the same `workbench` command and package.
if .venv/bin/python -m pip show -q workbench >/dev/null 2>&1; then
  .venv/bin/python -m pip uninstall -q -y workbench
fi
.venv/bin/python -m pip install -q -e '.[stock,test]'
echo "setup.sh: workbench installed in .venv (run it as .venv/bin/workbench)"

if ((run_lab)); then
  exec .venv/bin/workbench lab
fi
