#!/bin/bash
# Start a throw-away Slurm cluster on loopback from a root file system built by
# install.sh: munged, slurmctld, NNODES emulated slurmd (n1..nN, one port each) and
# slurmrestd with JWT auth, all chrooted into ROOTFS inside a private mount namespace.
#
# slurmbridge's own rig: slurmbridge.devtools.realslurm_modern.ModernSlurm runs it.
#
# usage: up.sh [26.05|24.11|sid|trixie] DIR        (as root)
#   DIR: the cluster's own directory (config, keys, state, logs, pid files, token). It is
#        bind-mounted at the same path inside the chroot, so every path in slurm.conf is
#        valid on the host too. Must be empty, missing, or a cluster of ours.
# env: SLURM_ROOTFS (default /var/tmp/slurm-modern/<suite>), CTLD_PORT, REST_PORT,
#      NODE_PORT0 (NNODES consecutive ports; all ports default to free random ones),
#      NNODES (4), NODE_CPUS (2), NODE_MEMORY (1000 MiB), SLURMD_TIMEOUT (30), MAX_DYNAMIC_NODES (16), TOKEN_USER (root),
#      TOKEN_LIFESPAN (86400 s), REST_ARGS (extra slurmrestd arguments), UP_TIMEOUT (60 s),
#      TOPOLOGY (unset; "block": a topology.yaml with topology "topo1" of blocks b1 = n1 and
#      b2 = n2, so dynamic nodes may take Topology=topo1:b1 — Slurm 25.05+),
#      GPUS (0; N > 0: every static node has Gres=gpu:<GPU_TYPE>:N backed by dummy device
#      files, see the gres.conf comment below), GPU_TYPE (nvidia; the GRES type, e.g.
#      gpu-nvidia, the type of slurmbridge's DRA device profile).
# Prints the REST URL and the token file; writes DIR/slurm.env. DIR/bin/slurm CMD ... runs
# a Slurm command (scontrol, sinfo, squeue, scancel ...) against the cluster.
# Idempotent: a cluster already up in DIR is reported, not restarted.
set -euo pipefail

die() { echo "slurm-modern up: $*" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)

case "${1:-}" in
  26.05|26|sid|unstable) SUITE=sid ;;
  24.11|24|trixie|13)    SUITE=trixie ;;
  *) die "usage: up.sh 26.05|24.11 DIR" ;;
esac
[ $# -ge 2 ] || die "usage: up.sh 26.05|24.11 DIR"
D=$(realpath -m "$2")
ROOT=$(realpath -m "${SLURM_ROOTFS:-/var/tmp/slurm-modern/$SUITE}")
NNODES=${NNODES:-4}
NODE_CPUS=${NODE_CPUS:-2}
NODE_MEMORY=${NODE_MEMORY:-1000}
TOKEN_USER=${TOKEN_USER:-root}
TIMEOUT=${UP_TIMEOUT:-60}
MARK="$D/.slurm-modern-cluster"

[ "$(id -u)" = 0 ] || die "must run as root"
[ -f "$ROOT/.slurm-modern" ] || die "no Slurm root file system at $ROOT: run $HERE/install.sh ${1}"
[ "$NNODES" -ge 2 ] || die "NNODES must be >= 2 (partition gpu is n1-n2)"
case "$D" in /|/proc*|/sys*|/dev*|"$ROOT"|"$ROOT"/*) die "unusable cluster directory $D" ;; esac

alive() {  # pid from a file runs and is not a zombie
  local pid st
  pid=$(cat "$1" 2>/dev/null) || return 1
  st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}
in_cluster() {  # ... and lives in this cluster's mount namespace (not a reused pid)
  local pid; pid=$(cat "$1" 2>/dev/null) || return 1
  [ -s "$D/run/mntns" ] && [ "$(readlink "/proc/$pid/ns/mnt" 2>/dev/null)" = "$(cat "$D/run/mntns")" ] &&
    alive "$1"
}

# --- idempotence: already up? stale? -----------------------------------------------------
if [ -f "$MARK" ]; then
  if [ -f "$D/slurm.env" ] && in_cluster "$D/run/ns.pid" && in_cluster "$D/run/slurmctld.pid" &&
     in_cluster "$D/run/slurmrestd.pid"; then
    echo "already up in $D"; grep -E '^export SLURM_(REST|REST_TOKEN_FILE|VERSION)=' "$D/slurm.env"
    exit 0
  fi
  bash "$HERE/down.sh" "$D" >/dev/null   # leftovers of a cluster that is partly down
  for f in etc munge state spool run bin log token slurm.env dev; do
    rm -rf --one-file-system "${D:?}/$f"
  done
elif [ -e "$D" ] && [ -n "$(ls -A "$D")" ]; then
  die "$D is not empty and not a cluster directory of ours"
fi

T0=$(date +%s.%N)
# --- ports -------------------------------------------------------------------------------
port_used() {  # any socket (listening or connected) with this local or remote port
  local hex; hex=$(printf ':%04X ' "$1")
  grep -qi "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
pick_ports() {  # pick_ports N: N consecutive free ports below the ephemeral range
  local n=$1 p i ok
  for _ in $(seq 1 500); do
    p=$((20000 + RANDOM % 12000)); ok=1
    for i in $(seq 0 $((n - 1))); do port_used $((p + i)) && { ok=0; break; }; done
    [ $ok = 1 ] && { echo "$p"; return 0; }
  done
  return 1
}
CTLD_PORT=${CTLD_PORT:-$(pick_ports 1)}
REST_PORT=${REST_PORT:-$(pick_ports 1)}
NODE_PORT0=${NODE_PORT0:-$(pick_ports "$NNODES")}
for p in "$CTLD_PORT" "$REST_PORT" $(seq "$NODE_PORT0" $((NODE_PORT0 + NNODES - 1))); do
  port_used "$p" && die "port $p is in use"
done
[ "$CTLD_PORT" != "$REST_PORT" ] || die "CTLD_PORT = REST_PORT"

# --- files ---------------------------------------------------------------------------------
mkdir -p "$D"/{etc,munge,state,log,run,bin}
touch "$MARK"
echo "$ROOT" > "$D/run/rootfs"   # for down.sh (the mount point inside ROOT)
chmod 755 "$D" "$D/etc" "$D/log" "$D/run" "$D/bin"   # slurmrestd (a plain user) reads etc/
chmod 700 "$D/munge"
for i in $(seq 1 "$NNODES"); do mkdir -p "$D/spool/n$i"; done
. "$ROOT/.slurm-modern"   # SUITE, SLURM_VERSION
dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
dd if=/dev/urandom of="$D/etc/jwt.key" bs=32 count=1 status=none
chmod 600 "$D/munge/munge.key" "$D/etc/jwt.key"

LAST=$NNODES
GPUS=${GPUS:-0}
GPU_TYPE=${GPU_TYPE:-nvidia}
case "$GPU_TYPE" in *[!A-Za-z0-9_-]*|'') echo "up.sh: bad GPU_TYPE '$GPU_TYPE'" >&2; exit 2;; esac
GRES_TYPES= NODE_GRES=
if [ "$GPUS" -gt 0 ]; then
  GRES_TYPES=$'GresTypes=gpu\n'
  NODE_GRES="Gres=gpu:$GPU_TYPE:$GPUS "
fi
cat > "$D/etc/slurm.conf" <<EOF
# throw-away cluster on loopback (slurmbridge rigs/slurm-modern/up.sh); Slurm $SLURM_VERSION from $ROOT
ClusterName=modern
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$D/etc/jwt.key
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=${SLURMD_TIMEOUT:-30}
InactiveLimit=0
KillWait=2
MinJobAge=60
SchedulerParameters=sched_interval=1,bf_interval=1
# dynamic nodes (scontrol create / POST new/node/): room for them, and partitions that take
# a dynamic node by its features (Feature=batch / Feature=gpu)
MaxNodeCount=$((NNODES + ${MAX_DYNAMIC_NODES:-16}))
TreeWidth=65533
${GRES_TYPES}NodeName=n[1-$LAST] NodeHostname=localhost NodeAddr=127.0.0.1 Port=$NODE_PORT0-$((NODE_PORT0 + NNODES - 1)) CPUs=$NODE_CPUS RealMemory=$NODE_MEMORY ${NODE_GRES}State=UNKNOWN
NodeSet=ns_batch Feature=batch
NodeSet=ns_gpu Feature=gpu
PartitionName=batch Nodes=n[1-$LAST],ns_batch Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=n[1-2],ns_gpu MaxTime=60 State=UP
EOF
if [ "${TOPOLOGY:-}" = block ]; then
  # topology.yaml (Slurm 25.05+) is read by slurmctld from beside slurm.conf; without one a
  # dynamic node's Topology= is refused with 2178.
  cat > "$D/etc/topology.yaml" <<EOF
---
- topology: topo1
  cluster_default: true
  block:
    block_sizes:
      - 1
    blocks:
      - block: b1
        nodes: n1
      - block: b2
        nodes: n2
EOF
  chmod 644 "$D/etc/topology.yaml"
fi
if [ "$GPUS" -gt 0 ]; then
  # GPUs for GRES (what real slurmd 24.11/26.05 needs, found on the daemons):
  # * a gpu GRES with File= is what gives out indices: gres_detail "gpu:nvidia:2(IDX:0-1)",
  #   scontrol -d show job "GRES=gpu:nvidia:2(IDX:1-2)". Without File= Slurm counts GPUs
  #   but has no index to give.
  # * AutoDetect=off: the chroot has no NVML/RSMI library and no GPU.
  # * each File= must exist inside the chroot (slurmd stats it at start); DIR is bound at
  #   the same path there, so the files live in DIR/dev, shared by every emulated slurmd.
  # * a regular file is accepted but slurmd logs, once per file: "error: DIR/dev/nvidia0
  #   is not a valid character or block device, fix your gres.conf" — so they are character
  #   devices with NVIDIA's major number 195 (Linux Documentation/admin-guide/devices.txt),
  #   minor = index. Nothing ever opens them (task/none, no cgroup device constraint). Where
  #   mknod is refused (an unprivileged container) a regular file still works, with that
  #   error in the log.
  mkdir -p "$D/dev"
  for i in $(seq 0 $((GPUS - 1))); do
    mknod -m 0666 "$D/dev/nvidia$i" c 195 "$i" 2>/dev/null || : > "$D/dev/nvidia$i"
  done
  cat > "$D/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=n[1-$LAST] Name=gpu Type=$GPU_TYPE File=$D/dev/nvidia[0-$((GPUS - 1))]
EOF
  chmod 644 "$D/etc/gres.conf"
fi
# No cgroup file system inside the chroot: slurmd must not try to use one.
echo "CgroupPlugin=disabled" > "$D/etc/cgroup.conf"
chmod 644 "$D/etc/slurm.conf" "$D/etc/cgroup.conf"

# --- private mount namespace: /proc and DIR inside the chroot -----------------------------
# A holder process keeps the namespace; every daemon is started inside it, so the mounts
# vanish by themselves when the last process of the cluster exits (nothing is mounted on the
# host). The namespace id also tells which processes belong to this cluster (down.sh).
# The mount point of DIR inside ROOT; down.sh removes it and the empty folders above it
# that this run created (never one the root file system had: /tmp stays).
TOP=$ROOT$D
while [ ! -e "$(dirname "$TOP")" ]; do TOP=$(dirname "$TOP"); done
[ -e "$TOP" ] || echo "$TOP" > "$D/run/mountpoint-top"
mkdir -p "$ROOT$D"
# From here on a failure stops whatever this run started.
on_exit() { local rc=$?; [ "$rc" = 0 ] || bash "$HERE/down.sh" "$D" >/dev/null 2>&1 || true; }
trap on_exit EXIT
# The host's device nodes are bound over the root file system's own, which do not work where
# ROOTFS lies on a file system mounted nodev.
# Inside a bare chroot "/" is not a mount point and no private namespace can be made (EINVAL).
PROPAGATION=${SLURM_MOUNT_PROPAGATION:-private}
if [ "$PROPAGATION" = private ] && ! unshare --mount --propagation private true 2>/dev/null; then
  die "cannot create a private mount namespace ('/' is not a mount point: a chroot?). Run in a" \
    "VM or container, bind-mount the chroot onto itself before entering it, or set" \
    "SLURM_MOUNT_PROPAGATION=unchanged if no mount above $ROOT is shared"
fi
setsid unshare --mount --propagation "$PROPAGATION" -- /bin/sh -c '
  mount -t proc proc "$1/proc" || exit 1
  for n in null zero full random urandom tty; do mount --bind "/dev/$n" "$1/dev/$n" || exit 1; done
  mount --bind "$2" "$1$2" || exit 1
  exec sleep infinity' sh "$ROOT" "$D" </dev/null >"$D/log/namespace.log" 2>&1 &
NSPID=$!
echo "$NSPID" > "$D/run/ns.pid"
for _ in $(seq 1 200); do
  grep -q " $ROOT$D " "/proc/$NSPID/mountinfo" 2>/dev/null && break
  kill -0 "$NSPID" 2>/dev/null || die "cannot create a mount namespace: $(cat "$D/log/namespace.log")"
  sleep 0.02
done
grep -q " $ROOT$D " "/proc/$NSPID/mountinfo" || die "bind mount of $D did not appear"
readlink "/proc/$NSPID/ns/mnt" > "$D/run/mntns"

ENVV=(/usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
      SLURM_CONF="$D/etc/slurm.conf")
in_ns() { nsenter --target "$NSPID" --mount --root -- chroot "$ROOT" "${ENVV[@]}" "$@"; }

# the wrapper for people and tests: DIR/bin/slurm scontrol show nodes
cat > "$D/bin/slurm" <<EOF
#!/bin/bash
# Run a Slurm command (as root) against the cluster in $D, e.g.: $D/bin/slurm sinfo -N
set -euo pipefail
pid=\$(cat "$D/run/ns.pid")
[ "\$(readlink /proc/\$pid/ns/mnt 2>/dev/null)" = "\$(cat "$D/run/mntns")" ] ||
  { echo "cluster in $D is not running" >&2; exit 1; }
cd /
exec nsenter --target "\$pid" --mount --root -- chroot "$ROOT" /usr/bin/env -i \\
  PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SLURM_CONF="$D/etc/slurm.conf" "\$@"
EOF
chmod 755 "$D/bin/slurm"

fail() {
  { echo "slurm-modern up: $*"
    for f in "$D"/log/*.log "$D"/log/*.out; do
      [ -s "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }
    done; } >&2
  exit 1
}
wait_for() {  # wait_for DESCRIPTION COMMAND...: poll every 50 ms up to TIMEOUT s (COMMAND quiet)
  local what=$1; shift
  local end=$(( $(date +%s) + TIMEOUT ))
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || fail "timed out waiting for $what"
    sleep 0.05
  done
}

# --- munged (its own key and socket) -------------------------------------------------------
# Daemons get /dev/null and a log file as stdio: one that inherits the caller's pipe keeps
# e.g. subprocess.run(capture_output=True) waiting for ever.
out() { echo "$D/log/$1.out"; }
in_ns munged --force --origin=127.0.0.1 --socket="$D/munge/munge.socket" \
    --key-file="$D/munge/munge.key" --pid-file="$D/run/munged.pid" --log-file="$D/log/munged.log" \
    --seed-file="$D/munge/munged.seed" </dev/null >>"$(out munged)" 2>&1 || fail "munged did not start"
wait_for "munged's socket" test -S "$D/munge/munge.socket"
chmod 755 "$D/munge"   # slurmrestd (a plain user) must reach the socket; the key stays 0600

# --- slurmctld, slurmd per node ------------------------------------------------------------
in_ns slurmctld -i </dev/null >>"$(out slurmctld)" 2>&1 || fail "slurmctld did not start"
ctld_up() { in_ns sinfo -h >/dev/null 2>&1; }
wait_for "slurmctld" ctld_up
for i in $(seq 1 "$NNODES"); do
  in_ns slurmd -N "n$i" </dev/null >>"$(out "slurmd-n$i")" 2>&1 || fail "slurmd n$i did not start"
done
all_idle() { [ "$(in_ns sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -ge "$NNODES" ]; }
wait_for "$NNODES idle nodes" all_idle

# --- slurmrestd (foreground; drops to user slurmrest, which it needs: it refuses root) -----
# 24.11 also loads openapi/slurmdbd by default and dies without accounting ("Failure loading
# plugin path bindings"): name the plugin. 26.05's default set (slurmctld + util) works.
PLUGINS=
[ "$SUITE" = trixie ] && PLUGINS="-s openapi/slurmctld"
( exec setsid nsenter --target "$NSPID" --mount --root -- chroot "$ROOT" "${ENVV[@]}" \
    SLURM_JWT=daemon slurmrestd -a rest_auth/jwt -u slurmrest $PLUGINS ${REST_ARGS:-} "127.0.0.1:$REST_PORT" ) \
  </dev/null >"$D/log/slurmrestd.log" 2>&1 &
echo $! > "$D/run/slurmrestd.pid"

# --- token ---------------------------------------------------------------------------------
TOKEN=$(in_ns scontrol token username="$TOKEN_USER" lifespan="${TOKEN_LIFESPAN:-86400}") ||
  fail "scontrol token failed"
TOKEN=${TOKEN#SLURM_JWT=}
( umask 077; printf '%s\n' "$TOKEN" > "$D/token" )

http_get() {  # http_get PATH: the raw answer (bash's /dev/tcp: no curl needed)
  ( exec 3<>"/dev/tcp/127.0.0.1/$REST_PORT" || exit 1
    printf 'GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-SLURM-USER-TOKEN: %s\r\n\r\n' \
      "$1" "$TOKEN" >&3
    timeout 20 cat <&3 ) 2>/dev/null
}
rest_ready() {
  alive "$D/run/slurmrestd.pid" || fail "slurmrestd exited"
  [[ $(http_get /openapi/v3 | head -n 1) == "HTTP/1."?" 200"* ]]
}
wait_for "slurmrestd on 127.0.0.1:$REST_PORT" rest_ready
VERSIONS=$(http_get /openapi/v3 | grep -oE 'slurm\\?/v0\.0\.[0-9]+' | grep -oE 'v0\.0\.[0-9]+' |
  sort -uV | tr '\n' ' ' || true)  # paths are written "\/slurm\/v0.0.45\/..."

cat > "$D/slurm.env" <<EOF
# source me; the token itself is in SLURM_REST_TOKEN_FILE (never export it as SLURM_JWT)
export SLURM_VERSION=$SLURM_VERSION
export SLURM_ROOTFS=$ROOT
export SLURM_CONF=$D/etc/slurm.conf
export SLURM_REST=http://127.0.0.1:$REST_PORT
export SLURM_REST_USER=$TOKEN_USER
export SLURM_REST_TOKEN_FILE=$D/token
export SLURM_REST_VERSIONS="${VERSIONS% }"
export SLURM_CTLD_PORT=$CTLD_PORT
export SLURM_NODE_PORT0=$NODE_PORT0
EOF
T1=$(date +%s.%N)
echo "Slurm $SLURM_VERSION up in $(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.1f", b-a}') s: $NNODES nodes, API ${VERSIONS% }"
echo "SLURM_REST=http://127.0.0.1:$REST_PORT"
echo "SLURM_REST_TOKEN_FILE=$D/token   (user $TOKEN_USER)"
echo "admin commands: $D/bin/slurm scontrol|sinfo|squeue|scancel ...; stop: $HERE/down.sh $D"
