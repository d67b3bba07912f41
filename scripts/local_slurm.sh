#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, to run `preschool launch --slurm` for real
# (tests/cluster/test_local_slurm.py). Needs root and the Debian/Ubuntu packages:
#   apt-get update && apt-get install -y slurm-wlm munge
#
#   scripts/local_slurm.sh start DIR   # munged + slurmctld + slurmd, config and state in DIR
#   export SLURM_CONF=DIR/slurm.conf   # what sbatch/squeue/scancel read
#   scripts/local_slurm.sh stop DIR    # stops the three daemons by the PIDs recorded in DIR
#
# The node is this host with all its CPUs in partition `cpu`, no GPUs; TaskPlugin=task/affinity
# (tasks are bound to the CPUs they were given, as on most clusters), proctrack/linuxproc (no
# cgroups needed, so it runs in a container). Ports: SLURMCTLD_PORT / SLURMD_PORT (6817 / 6818).
# GPUS=N gives the node N fake GPUs: device files made with mknod in DIR (character device 1:3, as
# /dev/null is), so Slurm's gres/gpu hands a job that asks for them CUDA_VISIBLE_DEVICES and
# SLURM_GPUS_ON_NODE as on a GPU node, though nothing can compute on them (where mknod is not
# allowed, the node has none and the script says so).
set -euo pipefail

cmd=${1:?usage: local_slurm.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: local_slurm.sh start|stop DIR}")

stop() {
  # slurmd first (it reports to slurmctld), then slurmctld, then munged; each by its own PID file
  for name in slurmd slurmctld munged; do
    pidfile="$dir/$name.pid"
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    rm -f "$pidfile"
  done
}

case $cmd in
start)
  for exe in munged slurmctld slurmd sinfo; do
    command -v "$exe" >/dev/null || { echo "local_slurm.sh: $exe not found (apt-get install -y slurm-wlm munge)" >&2; exit 2; }
  done
  mkdir -p "$dir"/munge "$dir"/state "$dir"/spool "$dir"/log
  chmod 700 "$dir" "$dir/munge"
  head -c 1024 /dev/urandom > "$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
  host=$(hostname -s)
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc obeys OMP_NUM_THREADS: count the CPUs
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  gres="" gpus=${GPUS:-0}
  : > "$dir/gres.conf"
  for ((k = 0; k < gpus; k++)); do
    rm -f "$dir/fakegpu$k"
    if ! mknod "$dir/fakegpu$k" c 1 3 2>/dev/null; then
      echo "local_slurm.sh: mknod is not allowed here: the node gets no fake GPUs" >&2
      : > "$dir/gres.conf"; gpus=0; break
    fi
    echo "Name=gpu File=$dir/fakegpu$k" >> "$dir/gres.conf"
  done
  [ "$gpus" -gt 0 ] && gres="Gres=gpu:$gpus"
  cat > "$dir/slurm.conf" <<EOF
ClusterName=preschool-local
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem $gres State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  for _ in $(seq 100); do
    if sinfo -h -o %t 2>/dev/null | grep -qx idle; then
      echo "export SLURM_CONF=$SLURM_CONF"
      exit 0
    fi
    sleep 0.3
  done
  echo "local_slurm.sh: the node did not become idle; logs in $dir/log" >&2
  sinfo >&2 || true
  stop
  exit 1
  ;;
stop)
  stop
  ;;
*)
  echo "usage: local_slurm.sh start|stop DIR" >&2
  exit 2
  ;;
esac
