#!/usr/bin/env bash
# A real single-node Slurm 22.05 cluster for the Slurm tests, from Debian's packages.
#
#   bash tests/slurm/cluster.sh up       # install (if missing) and start; waits until the node is idle
#   bash tests/slurm/cluster.sh status   # daemons, node state; exit 0 only when the cluster is usable
#   bash tests/slurm/cluster.sh down     # cancel all jobs, stop the daemons (by their own pid files)
#
# Partitions debug (default) and gpu; account "sweeper" and QOS normal/high for root, associations enforced.
# Daemons: munged, a private MariaDB, slurmdbd (accounting, so sacct and job states are real), slurmctld,
# slurmd. The node advertises fake GPUs (gres gpu:4, character-device symlinks to /dev/null) so Slurm sets
# CUDA_VISIBLE_DEVICES per job. All config, state, logs and pid files live under one folder,
# $SWEEPER_SLURM_ROOT (default /tmp/sweeper-slurm); clients find the config through the symlink
# /etc/slurm/slurm.conf -> $SWEEPER_SLURM_ROOT/etc/slurm.conf, made only where no slurm.conf exists.
# Needs root (it installs packages and runs the daemons as root). Ports 6817-6819 and the database's
# ($SWEEPER_SLURM_DB_PORT, default 6820) are fixed: one such cluster per machine.
# Knobs: SWEEPER_SLURM_CPUS (CPUs advertised, default max(nproc, 8)), SWEEPER_SLURM_GPUS (default 4).
set -euo pipefail

ROOT=${SWEEPER_SLURM_ROOT:-/tmp/sweeper-slurm}
DB_PORT=${SWEEPER_SLURM_DB_PORT:-6820}
NGPUS=${SWEEPER_SLURM_GPUS:-4}
CPUS=${SWEEPER_SLURM_CPUS:-$(( $(nproc) > 8 ? $(nproc) : 8 ))}
CLUSTER=sweeper
PARTITION=debug
ACCOUNT=sweeper     # the default account of root (associations enforced)
QOS=high            # a second QOS besides "normal", allowed for root
NODE=$(hostname -s)
CONF=$ROOT/etc/slurm.conf
SYSTEM_CONF=/etc/slurm/slurm.conf
SYSTEM_MUNGE_SOCKET=/run/munge/munge.socket.2   # some clients (sacctmgr) ignore AuthInfo=socket=
PACKAGES=(munge slurmctld slurmd slurmdbd slurm-client mariadb-server mariadb-client)
# daemon name -> pid file; started in this order, stopped in the reverse one
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)
declare -A PIDFILE=(
  [munged]=$ROOT/munge/munged.pid [mariadbd]=$ROOT/mysql/mariadbd.pid [slurmdbd]=$ROOT/run/slurmdbd.pid
  [slurmctld]=$ROOT/run/slurmctld.pid [slurmd]=$ROOT/run/slurmd.pid
)
MUNGE_SOCKET=$ROOT/munge/munge.socket.2
DB_SOCKET=$ROOT/mysql/mariadbd.sock
DB_PASS=sweeper-slurm-test   # private database bound to 127.0.0.1, test data only

say() { echo "[cluster.sh] $*"; }
die() { echo "[cluster.sh] ERROR: $*" >&2; exit 1; }
t0=$EPOCHREALTIME
elapsed() { awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# -- process helpers: a daemon is "running" when its pid file names a live process with its name ----------
pid_of() {  # pid_of NAME -> prints the live pid or nothing
  local f=${PIDFILE[$1]} pid
  [[ -s $f ]] || return 0
  pid=$(tr -dc '0-9' <"$f")
  [[ -n $pid && -r /proc/$pid/comm ]] || return 0
  [[ $(cat "/proc/$pid/comm") == "$1"* ]] && echo "$pid"
  return 0
}

LAST_PID=
wait_for() {  # wait_for SECONDS WHAT CMD... : poll CMD every 0.2 s; fail early if the last daemon died
  local limit=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || return 1
    if [[ -n $LAST_PID && ! -d /proc/$LAST_PID ]]; then say "  process $LAST_PID exited"; return 1; fi
    sleep 0.2
  done
  LAST_PID=
  say "  $what ($(elapsed) s)"
}

start_detached() {  # start_detached NAME LOGFILE CMD... : new session, stdio to LOGFILE
  local name=$1 log=$2; shift 2
  say "starting $name: $*"
  setsid "$@" </dev/null >>"$log" 2>&1 &
  LAST_PID=$!
}

# -- install -----------------------------------------------------------------------------------------------
install_packages() {
  local missing=()
  for bin in munged slurmctld slurmd slurmdbd sinfo sacct sacctmgr mariadbd mariadb-install-db mariadb; do
    command -v "$bin" >/dev/null 2>&1 || missing+=("$bin")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}; run as root to install ${PACKAGES[*]}"
  say "installing ${PACKAGES[*]} (missing: ${missing[*]})"
  # keep the packages' init scripts from starting system daemons: ours run from $ROOT
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; made_policy=1; fi
  local rc=0
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" \
      >"/tmp/sweeper-slurm-apt.log" 2>&1; then
    say "apt-get install failed; running apt-get update and retrying"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >>"/tmp/sweeper-slurm-apt.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" \
      >>"/tmp/sweeper-slurm-apt.log" 2>&1 || rc=$?
  fi
  (( made_policy )) && rm -f "$policy"
  (( rc == 0 )) || { tail -n 20 /tmp/sweeper-slurm-apt.log >&2; die "apt-get install failed (log: /tmp/sweeper-slurm-apt.log)"; }
  say "  installed ($(elapsed) s)"
}

# -- configuration -----------------------------------------------------------------------------------------
write_configs() {
  mkdir -p "$ROOT"/{etc,run,log,state,spool,dev,mysql}
  chmod 755 "$ROOT"
  local mem_mb
  mem_mb=$(awk '/MemAvailable/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
  for ((i = 0; i < NGPUS; i++)); do ln -sfn /dev/null "$ROOT/dev/nvidia$i"; done
  cat >"$CONF.tmp" <<EOF
# written by tests/slurm/cluster.sh: a single-node test cluster, state under $ROOT
ClusterName=$CLUSTER
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
MailProg=/bin/true
KillWait=5
MinJobAge=600
SchedulerParameters=sched_interval=5,bf_interval=5
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$ROOT/spool
SlurmctldPidFile=${PIDFILE[slurmctld]}
SlurmdPidFile=${PIDFILE[slurmd]}
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations,limits,qos
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$NODE CPUs=$CPUS RealMemory=$mem_mb Gres=gpu:$NGPUS State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE MaxTime=INFINITE State=UP
EOF
  mv "$CONF.tmp" "$CONF"
  cat >"$ROOT/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu File=$ROOT/dev/nvidia[0-$((NGPUS - 1))]
EOF
  (umask 077; cat >"$ROOT/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=localhost
DbdPort=6819
SlurmUser=root
PidFile=${PIDFILE[slurmdbd]}
LogFile=$ROOT/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
  )
  # clients (sinfo, sbatch, sacct, submitit) read the default path
  link_system_path "$SYSTEM_CONF" "$CONF"
}

link_system_path() {  # link_system_path LINK TARGET: make LINK -> TARGET unless LINK is someone else's
  local link=$1 target=$2
  if [[ -L $link && $(readlink "$link") == "$target" ]]; then
    return 0
  elif [[ -e $link || -L $link ]]; then
    die "$link exists and is not ours (a system Slurm/munge?); stop it or remove $link"
  fi
  mkdir -p "$(dirname "$link")"
  ln -s "$target" "$link"
  say "linked $link -> $target"
}

unlink_system_path() {  # unlink_system_path LINK TARGET: remove LINK only if it points at TARGET
  if [[ -L $1 && $(readlink "$1") == "$2" ]]; then rm -f "$1"; say "removed $1"; fi
}

# -- daemons -----------------------------------------------------------------------------------------------
start_munged() {
  if [[ -n $(pid_of munged) ]]; then
    say "munged already running"
  else
    mkdir -p "$ROOT/munge"
    if [[ ! -s $ROOT/munge/munge.key ]]; then
      dd if=/dev/urandom of="$ROOT/munge/munge.key" bs=1024 count=1 status=none
    fi
    chown -R munge:munge "$ROOT/munge"
    chmod 755 "$ROOT/munge"; chmod 400 "$ROOT/munge/munge.key"
    say "starting munged"   # it forks into the background itself
    runuser -u munge -- munged --key-file="$ROOT/munge/munge.key" --socket="$MUNGE_SOCKET" \
      --pid-file="${PIDFILE[munged]}" --log-file="$ROOT/munge/munged.log" \
      --seed-file="$ROOT/munge/munged.seed" \
      || die "munged failed to start: $(tail -n 3 "$ROOT/munge/munged.log" 2>/dev/null)"
  fi
  wait_for 10 "munged ready" munge -S "$MUNGE_SOCKET" -n || die "munge does not answer on $MUNGE_SOCKET"
  link_system_path "$SYSTEM_MUNGE_SOCKET" "$MUNGE_SOCKET"
}

start_mariadbd() {
  if [[ -n $(pid_of mariadbd) ]]; then
    say "mariadbd already running"
  else
    if [[ ! -d $ROOT/mysql/data/mysql ]]; then
      say "initialising the private MariaDB in $ROOT/mysql/data"
      mariadb-install-db --no-defaults --datadir="$ROOT/mysql/data" --user=root --skip-test-db \
        --auth-root-authentication-method=socket >"$ROOT/log/mariadb-install.log" 2>&1 \
        || { tail -n 20 "$ROOT/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    start_detached mariadbd "$ROOT/log/mariadbd.out" mariadbd --no-defaults --user=root \
      --datadir="$ROOT/mysql/data" --socket="$DB_SOCKET" --pid-file="${PIDFILE[mariadbd]}" \
      --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --log-error="$ROOT/log/mariadbd.log" \
      --skip-log-bin --innodb-buffer-pool-size=128M --innodb-log-file-size=64M --innodb-lock-wait-timeout=900
  fi
  wait_for 60 "mariadbd ready" mariadb --no-defaults -S "$DB_SOCKET" -u root -e 'SELECT 1' \
    || { tail -n 20 "$ROOT/log/mariadbd.log" >&2; die "mariadbd did not come up"; }
  mariadb --no-defaults -S "$DB_SOCKET" -u root -e "
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || die "could not create the database user"
}

start_slurmdbd() {
  if [[ -n $(pid_of slurmdbd) ]]; then
    say "slurmdbd already running"
  else  # slurmdbd reads slurmdbd.conf from the folder of $SLURM_CONF
    SLURM_CONF=$CONF start_detached slurmdbd "$ROOT/log/slurmdbd.out" slurmdbd -D
  fi
  wait_for 60 "slurmdbd ready" sacctmgr -n list cluster \
    || { tail -n 20 "$ROOT/log/slurmdbd.out" "$ROOT/log/slurmdbd.log" >&2; die "slurmdbd did not come up"; }
  if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster $CLUSTER failed"
    say "  registered cluster $CLUSTER in accounting"
  fi
  # associations are enforced (as on real clusters): account $ACCOUNT and QOS normal + $QOS for root
  if ! sacctmgr -n -P list qos format=name | grep -qx "$QOS"; then
    sacctmgr -i add qos "$QOS" >/dev/null || die "sacctmgr add qos $QOS failed"
  fi
  if ! sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT"; then
    sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description=tests Organization=tests >/dev/null \
      || die "sacctmgr add account $ACCOUNT failed"
  fi
  if [[ -z $(sacctmgr -n -P list assoc where user=root account="$ACCOUNT" format=user) ]]; then
    sacctmgr -i add user root Account="$ACCOUNT" >/dev/null || die "sacctmgr add user root to $ACCOUNT failed"
  fi
  if [[ $(sacctmgr -n -P list user root format=defaultaccount) != "$ACCOUNT" ]]; then
    sacctmgr -i modify user root set DefaultAccount="$ACCOUNT" >/dev/null || die "sacctmgr: default account failed"
  fi
  if [[ $(sacctmgr -n -P list assoc where user=root account="$ACCOUNT" format=qos) != *"$QOS"* ]]; then
    sacctmgr -i modify user root where account="$ACCOUNT" set QOS=normal,"$QOS" DefaultQOS=normal >/dev/null \
      || die "sacctmgr modify user root (QOS) failed"
    say "  accounting: user root, account $ACCOUNT, QOS normal,$QOS"
  fi
}

start_slurmctld() {
  if [[ -n $(pid_of slurmctld) ]]; then
    say "slurmctld already running"
  else
    SLURM_CONF=$CONF start_detached slurmctld "$ROOT/log/slurmctld.out" slurmctld -D -i -f "$CONF"
  fi
  wait_for 30 "slurmctld ready" scontrol ping \
    || { tail -n 20 "$ROOT/log/slurmctld.out" "$ROOT/log/slurmctld.log" >&2; die "slurmctld did not come up"; }
}

start_slurmd() {
  if [[ -n $(pid_of slurmd) ]]; then
    say "slurmd already running"
  else
    SLURM_CONF=$CONF start_detached slurmd "$ROOT/log/slurmd.out" slurmd -D -f "$CONF"
  fi
}

node_state() { sinfo -h -N -n "$NODE" -o %T 2>/dev/null | head -1; }

node_usable() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }

up() {
  install_packages
  [[ $(id -u) -eq 0 ]] || die "run as root (the daemons run as SlurmUser=root)"
  getent hosts "$NODE" >/dev/null || die "hostname -s ($NODE) does not resolve; add it to /etc/hosts"
  write_configs
  start_munged
  start_mariadbd
  start_slurmdbd
  start_slurmctld
  start_slurmd
  if ! wait_for 60 "node $NODE usable" node_usable; then
    tail -n 20 "$ROOT/log/slurmd.out" "$ROOT/log/slurmd.log" >&2
    die "node $NODE is '$(node_state)', not idle (logs in $ROOT/log)"
  fi
  say "cluster up in $(elapsed) s: node state $(node_state), partitions $PARTITION (default) and gpu, account $ACCOUNT, QOS normal/$QOS, node $NODE, CPUs=$CPUS, gres gpu:$NGPUS, root $ROOT"
}

stop_daemon() {
  local name=$1 pid
  pid=$(pid_of "$name")
  if [[ -z $pid ]]; then say "$name not running"; return; fi
  say "stopping $name (pid $pid)"
  kill -TERM "$pid"
  for _ in $(seq 100); do [[ -d /proc/$pid ]] || break; sleep 0.2; done
  if [[ -d /proc/$pid ]]; then say "  $name still alive after 20 s: SIGKILL"; kill -KILL "$pid"; fi
  rm -f "${PIDFILE[$name]}"
}

down() {
  if [[ -n $(pid_of slurmctld) ]] && command -v squeue >/dev/null; then
    local jobs
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
    if [[ -n ${jobs// /} ]]; then
      say "cancelling jobs: $jobs"
      scancel $jobs || true
      wait_for 30 "jobs gone" bash -c '[[ -z $(squeue -h -o %A 2>/dev/null) ]]' || say "WARNING: jobs still listed"
    fi
  fi
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do stop_daemon "${DAEMONS[$i]}"; done
  unlink_system_path "$SYSTEM_CONF" "$CONF"
  unlink_system_path "$SYSTEM_MUNGE_SOCKET" "$MUNGE_SOCKET"
  say "cluster down (state kept in $ROOT; delete it for a fresh cluster)"
}

status() {
  local ok=0 pid
  for name in "${DAEMONS[@]}"; do
    pid=$(pid_of "$name")
    if [[ -n $pid ]]; then say "$name running (pid $pid)"; else say "$name NOT running"; ok=1; fi
  done
  if node_usable; then
    say "node $NODE $(node_state)"; sinfo
  else
    say "node $NODE not usable: '$(node_state)'"; ok=1
  fi
  return $ok
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: bash $0 up|down|status" >&2; exit 2 ;;
esac
