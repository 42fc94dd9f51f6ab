#!/usr/bin/env bash
# Start a private test Slurm on this machine: one slurmctld and SLURM_NODES (default 3) slurmd
# in Slurm's multiple-slurmd mode (nodes n1..nN, all this machine at 127.0.0.1, one port each),
# from slurm/slurm.conf.in. No systemd is assumed: the daemons run in the foreground (-D) under
# nohup, and slurm/slurm-down.sh stops them by the pids in their pid files.
#
#   slurm/slurm-up.sh                  # prints: export SLURM_CONF=<dir>/slurm.conf
#   SLURM_UP_DIR=/tmp/x SLURM_NODES=2 SLURM_NODE_CPUS=8 slurm/slurm-up.sh
#   eval "$(slurm/slurm-up.sh | tail -n 1)"; salloc -N2 emurun python app.py
#
# Idempotent: when the directory's slurmctld answers (`sinfo`), it only prints the export line.
# Free ports are chosen at start (the controller's and N consecutive ones for the nodes), so
# several test clusters (one per directory) can run side by side. Needs root (slurmd runs as
# root, as on every Slurm node) and Debian's slurmctld, slurmd and slurm-client.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
dir="${SLURM_UP_DIR:-/tmp/emucluster-slurm}"
nodes="${SLURM_NODES:-3}"
cpus="${SLURM_NODE_CPUS:-8}"
timeout_s="${SLURM_UP_TIMEOUT:-60}"
conf="$dir/slurm.conf"
export SLURM_CONF="$conf"

for tool in slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || {
        echo "slurm-up: $tool not found (apt-get install -y slurmctld slurmd slurm-client)" >&2
        exit 1
    }
done
[ "$(id -u)" = 0 ] || { echo "slurm-up: slurmd must run as root" >&2; exit 1; }

alive() {  # PIDFILE COMM: the pid file names a running COMM
    local pid
    [ -f "$1" ] || return 1
    pid="$(tr -dc 0-9 <"$1")"
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

if [ -f "$conf" ] && alive "$dir/slurmctld.pid" slurmctld && sinfo -h >/dev/null 2>&1; then
    echo "slurm-up: the test Slurm in $dir already answers"
    echo "export SLURM_CONF=$conf"
    exit 0
fi
"$here/slurm-down.sh" "$dir" >/dev/null 2>&1 || true  # leftovers of a half-started one

# free TCP ports: one for slurmctld, then $nodes consecutive ones for the slurmd
read -r ctld_port first_port < <(python3 - "$nodes" <<'PY'
import socket, sys
n = int(sys.argv[1])
def free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    ctld = s.getsockname()[1]
for first in range(17001, 60000, n + 1):
    if all(free(p) for p in range(first, first + n)) and ctld not in range(first, first + n):
        print(ctld, first)
        break
PY
)
last_port=$((first_port + nodes - 1))

mkdir -p "$dir/ctld" "$dir/spool"
chmod 755 "$dir"
sed -e "s|@DIR@|$dir|g" -e "s|@NODES@|$nodes|g" -e "s|@CPUS@|$cpus|g" \
    -e "s|@CTLD_PORT@|$ctld_port|g" -e "s|@PORT_FIRST@|$first_port|g" \
    -e "s|@PORT_LAST@|$last_port|g" -e "s|@USER@|$(id -un)|g" \
    "$here/slurm.conf.in" >"$conf"
# slurm.conf may name a cgroup.conf; task/none and proctrack/linuxproc use no cgroups

echo "slurm-up: starting slurmctld (port $ctld_port) and slurmd n1..n$nodes (ports $first_port-$last_port) in $dir"
nohup slurmctld -D -i -f "$conf" >>"$dir/slurmctld.out" 2>&1 </dev/null &
for i in $(seq 1 "$nodes"); do
    mkdir -p "$dir/spool/n$i"
    nohup slurmd -D -N "n$i" -f "$conf" >>"$dir/slurmd-n$i.out" 2>&1 </dev/null &
done

for _ in $(seq 1 "$((timeout_s * 2))"); do
    idle="$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)"
    if [ "$idle" -ge "$nodes" ]; then
        echo "slurm-up: $nodes nodes idle"
        echo "export SLURM_CONF=$conf"
        exit 0
    fi
    sleep 0.5
done
echo "slurm-up: the nodes did not become idle within ${timeout_s}s; sinfo says:" >&2
sinfo -N >&2 || true
tail -n 20 "$dir/slurmctld.log" "$dir"/slurmd-n1.log >&2 || true
exit 1
