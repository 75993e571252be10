#!/bin/bash
# Build (once) a small Debian root file system holding a modern Slurm: 26.05 from sid or
# 24.11 from trixie, with slurmctld, slurmd, slurmrestd (+ JWT plugin), munge, slurm-client.
# The daemons run from it under chroot (up.sh); nothing is installed into the host.
# slurmbridge's own rig (slurmbridge.devtools.realslurm_modern, tests/real_slurm, .ci/install-real-slurm.sh).
#
# usage: install.sh [26.05|24.11|sid|trixie] [ROOTFS]      (as root, on Debian 12)
#   ROOTFS default: /var/tmp/slurm-modern/<suite>
#   env: MIRROR   Debian mirror URL (default: the one this host's apt uses for bookworm)
#        REBUILD=1  throw away an existing root file system and build it again
# Idempotent: a finished ROOTFS (marker file .slurm-modern) is left as it is.
set -euo pipefail

die() { echo "slurm-modern install: $*" >&2; exit 1; }

case "${1:-26.05}" in
  26.05|26|sid|unstable) SUITE=sid ;;
  24.11|24|trixie|13)    SUITE=trixie ;;
  *) die "unknown release '${1}': use 26.05 (sid) or 24.11 (trixie)" ;;
esac
ROOT=$(realpath -m "${2:-/var/tmp/slurm-modern/$SUITE}")
MARK="$ROOT/.slurm-modern"
PACKAGES=slurmctld,slurmd,slurmrestd,slurm-client,slurm-wlm-jwt-plugin,munge
# Satisfy slurm-wlm-basic-plugins' "systemd | systemd-standalone-sysusers" and
# "systemd | adduser" without pulling in systemd itself (saves ~17 MB).
PACKAGES+=,systemd-standalone-sysusers,adduser

[ "$(id -u)" = 0 ] || die "must run as root"
[ "$ROOT" != / ] || die "refusing ROOTFS=/"

if [ -f "$MARK" ] && [ "${REBUILD:-0}" != 1 ]; then
  echo "already installed: $ROOT"; cat "$MARK"; exit 0
fi

# Unmount anything left mounted below a directory (a killed mmdebstrap), deepest first.
unmount_below() {
  local d=$1 m
  awk -v d="$d" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" || true; done
}
# Remove a directory tree without ever crossing into a mounted file system.
remove_tree() {
  [ -e "$1" ] || return 0
  unmount_below "$1"
  rm -rf --one-file-system "$1"
}

if ! command -v mmdebstrap >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends mmdebstrap >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends mmdebstrap >/dev/null; }
fi

if [ -z "${MIRROR:-}" ]; then
  MIRROR=$(apt-get indextargets --format '$(REPO_URI)' 'Release: bookworm' 'Origin: Debian' \
             'Identifier: Packages' 2>/dev/null | head -n 1)
  [ -n "$MIRROR" ] || die "cannot tell this host's Debian mirror; set MIRROR=<url>"
fi

T0=$(date +%s.%N)
PART="$ROOT.partial"
remove_tree "$PART"
mkdir -p "$(dirname "$ROOT")"
# --variant=essential: only Essential:yes packages plus ours, resolved by the host's apt (no
#   apt inside). No recommends, no docs/man/locales.
# Check-Valid-Until=false: the mirror's sid Release file can be past its Valid-Until date
#   (a mirror that is not refreshed); signatures are still checked.
mmdebstrap --quiet --variant=essential --include="$PACKAGES" \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  "$SUITE" "$PART" "deb $MIRROR $SUITE main"

# localhost must resolve inside (SlurmctldHost=localhost); the host's /etc/hosts is not copied.
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$PART/etc/hosts"
# slurmrestd refuses to run as root or SlurmUser: it drops to this user.
chroot "$PART" getent passwd slurmrest >/dev/null ||
  chroot "$PART" useradd -r -M -d /nonexistent -s /usr/sbin/nologin slurmrest
# Every binary the scripts use must be there.
for b in munged slurmctld slurmd slurmrestd scontrol sinfo squeue scancel; do
  chroot "$PART" sh -c "command -v $b" >/dev/null || die "$b missing in $PART"
done
[ -n "$(find "$PART/usr/lib" -name auth_jwt.so -print -quit)" ] || die "auth_jwt.so missing"

VERSION=$(chroot "$PART" dpkg-query -W -f '${Version}' slurmctld)
{
  echo "SUITE=$SUITE"
  echo "SLURM_VERSION=$VERSION"
  echo "BUILT=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$PART/.slurm-modern"
remove_tree "$ROOT"
mv "$PART" "$ROOT"
T1=$(date +%s.%N)
echo "installed Slurm $VERSION ($SUITE) into $ROOT: $(du -sh --one-file-system "$ROOT" | cut -f1)," \
  "$(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.0f", b-a}') s"
