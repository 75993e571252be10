#!/usr/bin/env bash
# Install real Slurm for the real_slurm test tier (tests/real_slurm):
#   22.05  Debian 12's own Slurm + munge, via apt-get (slurmbridge.devtools.realslurm)
#   24.11  a Debian trixie root file system with Slurm 24.11 (slurmbridge.devtools.realslurm_modern)
#   26.05  a Debian sid root file system with Slurm 26.05 (slurmbridge.devtools.realslurm_modern)
#
# env: SLURMBRIDGE_REAL_SLURM_RELEASES  which releases to install (default "22.05 24.11 26.05")
#
# Idempotent: 22.05 does nothing when every program is already there (otherwise apt-get update
# and apt-get install, about 15 s on a fresh Debian 12); 24.11 and 26.05 return at once when
# their root file system is built (marker /var/tmp/slurm-modern/<suite>/.slurm-modern),
# otherwise slurmbridge/devtools/rigs/slurm-modern/install.sh builds it with mmdebstrap (installed here
# with apt-get if missing; about 60 s and ~100 MB each). Needs root (or password-less sudo).
# Nothing starts a daemon here; the tests bring up private clusters per run. The same checks
# live in slurmbridge.devtools.realslurm.install and slurmbridge.devtools.realslurm_modern.install.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
RIG="$REPO/slurmbridge/devtools/rigs/slurm-modern"
releases=${SLURMBRIDGE_REAL_SLURM_RELEASES:-"22.05 24.11 26.05"}
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

for release in $releases; do
  case "$release" in
    22.05|24.11|26.05) ;;
    *) echo "error: unknown Slurm release '$release' in SLURMBRIDGE_REAL_SLURM_RELEASES" \
         "(use 22.05, 24.11, 26.05)" >&2; exit 1 ;;
  esac
done
wants() { [[ " $releases " == *" $1 "* ]]; }

as_root=()
need_root() {  # sets as_root for what needs root (apt-get, install.sh)
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "error: $1 needs root (or password-less sudo)" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: apt-get not found: this script supports Debian 12 only" >&2
    exit 1
  fi
}
apt_updated=0
apt_update() {
  [ "$apt_updated" = 1 ] && return 0
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  apt_updated=1
}

# --------------------------------------------------------------------------- 22.05 (apt)
if wants 22.05; then
  # openssl: the admission webhook tests make their TLS certificates with it.
  packages=(slurmctld slurmd slurmrestd munge slurm-client openssl)
  programs=(munged slurmctld slurmd slurmrestd scontrol sinfo squeue scancel openssl)
  missing=()
  for program in "${programs[@]}"; do
    command -v "$program" >/dev/null 2>&1 || missing+=("$program")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    echo "real Slurm 22.05 already installed: $(slurmctld -V 2>/dev/null || echo slurmctld)"
  else
    echo "missing: ${missing[*]}; installing ${packages[*]}"
    need_root "installing ${packages[*]}"
    apt_update
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}"
    for program in "${programs[@]}"; do
      if ! command -v "$program" >/dev/null 2>&1; then
        echo "error: $program still missing after apt-get install" >&2
        exit 1
      fi
    done
    echo "real Slurm 22.05 installed: $(slurmctld -V)"
  fi
fi

# --------------------------------------------------------------- 24.11, 26.05 (root fs)
modern=()
for release in $releases; do
  case "$release" in
    24.11) suite=trixie ;;
    26.05) suite=sid ;;
    *) continue ;;
  esac
  if [ -f "/var/tmp/slurm-modern/$suite/.slurm-modern" ]; then
    echo "real Slurm $release already installed: /var/tmp/slurm-modern/$suite" \
      "($(grep '^SLURM_VERSION=' "/var/tmp/slurm-modern/$suite/.slurm-modern" || true))"
  else
    modern+=("$release")
  fi
done
if [ "${#modern[@]}" -gt 0 ]; then
  need_root "building the Slurm ${modern[*]} root file systems"
  if ! command -v mmdebstrap >/dev/null 2>&1; then
    apt_update
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends mmdebstrap
  fi
  # install.sh takes the Debian mirror from apt's lists: make sure there are some.
  if [ -z "$(apt-get indextargets --format '$(REPO_URI)' 'Origin: Debian' 2>/dev/null | head -n 1)" ]
  then
    apt_update
  fi
  for release in "${modern[@]}"; do
    echo "building the Slurm $release root file system (about 60 s)"
    "${as_root[@]}" bash "$RIG/install.sh" "$release"
  done
fi
