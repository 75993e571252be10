#!/bin/bash
# Stop the cluster that up.sh started in DIR. Only processes of that cluster are
# touched: the daemons by their pid files, then whatever else still lives in the cluster's
# own mount namespace (slurmstepd and job processes it started), never anything by name.
# The mounts (/proc and DIR inside the chroot) exist only in that namespace and vanish
# with its last process. Logs stay in DIR/log.
#
# slurmbridge's own rig: slurmbridge.devtools.realslurm_modern.ModernSlurm.stop runs it.
#
# usage: down.sh DIR        (as root; idempotent: a stopped cluster is left as it is)
set -euo pipefail

die() { echo "slurm-modern down: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: down.sh DIR"
D=$(realpath -m "$1")
[ "$(id -u)" = 0 ] || die "must run as root"
[ -f "$D/.slurm-modern-cluster" ] || { echo "no cluster in $D"; exit 0; }

NS=$(cat "$D/run/mntns" 2>/dev/null || true)   # e.g. mnt:[4026532301]

state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true; }
alive_pid() { local s; s=$(state "$1"); [ -n "$s" ] && [ "$s" != Z ]; }
# a pid from a pid file, only if that process still lives in the cluster's namespace
pid_of() {
  local pid; pid=$(cat "$1" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [ -n "$NS" ] && [ "$(readlink "/proc/$pid/ns/mnt" 2>/dev/null)" = "$NS" ] || return 1
  echo "$pid"
}
members() {  # every live process in the cluster's mount namespace (one stat for all)
  [ -n "$NS" ] || return 0
  local ino pid
  ino=${NS#mnt:[}; ino=${ino%]}
  stat -L -c '%i %n' /proc/[0-9]*/ns/mnt 2>/dev/null |
    awk -v i="$ino" '$1 == i {split($2, a, "/"); print a[3]}' |
    while read -r pid; do alive_pid "$pid" && echo "$pid"; done
  return 0
}

# 1. cancel jobs while slurmctld still answers, so slurmstepd and job processes end cleanly
if pid_of "$D/run/slurmctld.pid" >/dev/null && [ -x "$D/bin/slurm" ]; then
  ids=$(timeout 5 "$D/bin/slurm" squeue -h -o %i 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    timeout 10 "$D/bin/slurm" scancel $ids 2>/dev/null || true
    for _ in $(seq 1 50); do
      [ -z "$(timeout 5 "$D/bin/slurm" squeue -h -t R,CG,S -o %i 2>/dev/null || true)" ] && break
      sleep 0.1
    done
  fi
fi

# 2. daemons by pid file (SIGTERM), REST first, the namespace holder last
holder=$(pid_of "$D/run/ns.pid" || true)
stopped=()
for f in "$D/run/slurmrestd.pid" "$D"/run/slurmd-*.pid "$D/run/slurmctld.pid" "$D/run/munged.pid"; do
  pid=$(pid_of "$f") || continue
  kill "$pid" 2>/dev/null && stopped+=("$(basename "$f" .pid)=$pid")
done
for _ in $(seq 1 50); do
  left=$(members | grep -vx "${holder:-none}" || true)
  [ -z "$left" ] && break
  sleep 0.1
done

# 3. anything else still in the namespace (stray slurmstepd, job processes): SIGKILL
for pid in $(members | grep -vx "${holder:-none}" || true); do
  echo "KILL $pid ($(cat "/proc/$pid/comm" 2>/dev/null))"; kill -9 "$pid" 2>/dev/null || true
done
[ -n "$holder" ] && kill "$holder" 2>/dev/null && stopped+=("namespace=$holder")
for _ in $(seq 1 50); do [ -z "$(members)" ] && break; sleep 0.1; done
[ -z "$(members)" ] || die "processes left in the cluster's namespace: $(members | tr '\n' ' ')"

# 4. the empty mount point inside the root file system (never a parent of it)
ROOT=$(cat "$D/run/rootfs" 2>/dev/null || true)
if [ -n "$ROOT" ] && [ -d "$ROOT$D" ] && rmdir "$ROOT$D" 2>/dev/null; then
  # and the empty folders above it that up.sh created (up to the one it recorded)
  TOP=$(cat "$D/run/mountpoint-top" 2>/dev/null || true)
  p=$(dirname "$ROOT$D")
  case "$TOP" in
    "$ROOT"/?*)
      while [ "${#p}" -ge "${#TOP}" ] && [ "$p" != "$ROOT" ]; do
        rmdir "$p" 2>/dev/null || break
        p=$(dirname "$p")
      done ;;
  esac
fi
rm -f "$D"/run/*.pid
echo "stopped ${stopped[*]:-nothing (was not running)}"
