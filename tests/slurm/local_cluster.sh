#!/usr/bin/env bash
# A real single-node Slurm cluster on 127.0.0.1 for the Slurm suite (docs/slurm.md, "Testing"):
# munged, slurmctld and slurmd in the foreground as children of this script's caller, private
# ports, GRES gpu on character devices made here. Needs root (slurmd runs jobs as their users)
# and Debian 12's slurmctld, slurmd, slurm-client and munge.
#
#   local_cluster.sh start DIR [PLUGSTACK_LINE]   configure and start; prints `export SLURM_CONF=...`
#   local_cluster.sh restart-slurmd DIR           kill slurmd with SIGKILL and start it again
#   local_cluster.sh stop DIR                     stop every daemon started from DIR
#
# Exit status 77 with the reason on stderr when Slurm cannot start here (not root, a package
# missing, no character devices), so that callers can skip.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop|restart-slurmd DIR [PLUGSTACK_LINE]" >&2; exit 2; }

skip() { echo "local_cluster: cannot start Slurm here: $*" >&2; exit 77; }

node=$(hostname -s)
gpus=${ZEUS_TEST_SLURM_GPUS:-4}
ctld_port=${ZEUS_TEST_SLURMCTLD_PORT:-16817}
slurmd_port=${ZEUS_TEST_SLURMD_PORT:-16818}

start_slurmd() {
  slurmd -D -f "$dir/slurm.conf" -N "$node" >>"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/run/slurmd.child"
}

wait_idle() {
  local deadline=$((SECONDS + 30))
  while ((SECONDS < deadline)); do
    state=$(SLURM_CONF="$dir/slurm.conf" sinfo -h -n "$node" -o %t 2>/dev/null || true)
    [[ "$state" == idle* || "$state" == mix* || "$state" == alloc* ]] && return 0
    sleep 0.2
  done
  echo "local_cluster: the node is not idle after 30 s (state '${state:-none}'); see $dir/log" >&2
  tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
  return 1
}

case "$cmd" in
  start)
    [[ $(id -u) == 0 ]] || skip "not root (slurmd must run as root to start jobs as their users)"
    for tool in munged slurmctld slurmd srun sbatch scontrol sinfo; do
      command -v "$tool" >/dev/null || skip "$tool is not installed (apt install slurmctld slurmd slurm-client munge)"
    done
    id munge >/dev/null 2>&1 || skip "no user munge (apt install munge)"
    mkdir -p "$dir"/{dev,log,run,spool,state,munge,mrun}
    for ((i = 0; i < gpus; i++)); do
      [[ -c "$dir/dev/nvidia$i" ]] || mknod "$dir/dev/nvidia$i" c 195 "$i" 2>/dev/null ||
        skip "mknod cannot make character devices in $dir (GRES needs them)"
    done
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chown -R munge:munge "$dir/munge" "$dir/mrun"
    chmod 700 "$dir/munge"
    chmod 755 "$dir/mrun"  # every user's srun and sbatch reach munged through it
    chmod 600 "$dir/munge/munge.key"
    su -s /bin/sh munge -c "exec munged --foreground -f --key-file=$dir/munge/munge.key \
      --socket=$dir/mrun/munge.socket --pid-file=$dir/mrun/munged.pid \
      --log-file=$dir/log/munged.log --seed-file=$dir/mrun/munged.seed" >>"$dir/log/munged.out" 2>&1 &
    echo $! >"$dir/run/munged.child"
    for _ in $(seq 100); do [[ -S "$dir/mrun/munge.socket" ]] && break; sleep 0.05; done
    [[ -S "$dir/mrun/munge.socket" ]] || skip "munged did not start (see $dir/log/munged.log)"
    last=$((gpus - 1))
    cat >"$dir/gres.conf" <<GRES
Name=gpu File=$dir/dev/nvidia[0-$last]
GRES
    : >"$dir/plugstack.conf"
    [[ -n "${3:-}" ]] && printf '%s\n' "$3" >"$dir/plugstack.conf"
    cat >"$dir/slurm.conf" <<CONF
ClusterName=zeustest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/mrun/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
PrologFlags=Contain
KillWait=2
MessageTimeout=10
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
PlugStackConfig=$dir/plugstack.conf
Epilog=$dir/epilog.sh
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 Gres=gpu:$gpus State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
    [[ -x "$dir/epilog.sh" ]] || { printf '#!/bin/sh\nexit 0\n' >"$dir/epilog.sh"; chmod 755 "$dir/epilog.sh"; }
    slurmctld -D -i -f "$dir/slurm.conf" >>"$dir/log/slurmctld.out" 2>&1 &
    echo $! >"$dir/run/slurmctld.child"
    start_slurmd
    wait_idle || exit 1
    echo "export SLURM_CONF=$dir/slurm.conf"
    ;;
  restart-slurmd)
    kill -KILL "$(cat "$dir/run/slurmd.child")" 2>/dev/null || true
    sleep 0.2
    start_slurmd
    wait_idle
    ;;
  stop)
    for d in slurmd slurmctld; do
      [[ -f "$dir/run/$d.child" ]] && kill -TERM "$(cat "$dir/run/$d.child")" 2>/dev/null || true
    done
    sleep 0.5
    for d in slurmd slurmctld; do
      [[ -f "$dir/run/$d.child" ]] && kill -KILL "$(cat "$dir/run/$d.child")" 2>/dev/null || true
    done
    # slurmstepds of this cluster left over from killed jobs (only those whose SLURM_CONF is ours)
    for pid in $(pgrep -x slurmstepd || true); do
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_CONF=$dir/slurm.conf" &&
        kill -KILL "$pid" 2>/dev/null || true
    done
    [[ -f "$dir/mrun/munged.pid" ]] && kill -TERM "$(cat "$dir/mrun/munged.pid")" 2>/dev/null || true
    ;;
  *) echo "usage: $0 start|stop|restart-slurmd DIR" >&2; exit 2 ;;
esac
