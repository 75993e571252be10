#!/usr/bin/env bash
# Install Debian's Slurm 22.05 + munge for the real_slurm test tier (tests/real_slurm).
#
# Idempotent: does nothing when every program is already there; otherwise runs apt-get update
# and apt-get install (about 15 s on a fresh Debian 12). Needs root (or password-less sudo).
# The packages start no daemon here; slurmbridge.realslurm brings up a private cluster per run.
# The same check lives in slurmbridge.realslurm.install (python -m slurmbridge.realslurm install).
set -euo pipefail

# openssl: the admission webhook tests make their TLS certificates with it.
packages=(slurmctld slurmd slurmrestd munge slurm-client openssl)
programs=(munged slurmctld slurmd slurmrestd scontrol sinfo squeue scancel openssl)
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

missing=()
for program in "${programs[@]}"; do
  command -v "$program" >/dev/null 2>&1 || missing+=("$program")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "real Slurm already installed: $(slurmctld -V 2>/dev/null || echo slurmctld)"
  exit 0
fi
echo "missing: ${missing[*]}; installing ${packages[*]}"

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "error: installing ${packages[*]} needs root (or password-less sudo)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: apt-get not found: this script supports Debian 12 (Slurm 22.05) only" >&2
  exit 1
fi

"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}"

for program in "${programs[@]}"; do
  if ! command -v "$program" >/dev/null 2>&1; then
    echo "error: $program still missing after apt-get install" >&2
    exit 1
  fi
done
echo "real Slurm installed: $(slurmctld -V)"
