#!/usr/bin/env bash
# Start a Docker engine for emucluster's cluster of containers, if none answers yet.
#
# Every address Docker hands out stays in 198.18.0.0/15 (RFC 2544's benchmarking range): the
# default bridge gets 198.19.0.1/24 and user networks (compose's, when the file gives no subnet)
# are carved as /24s out of 198.19.0.0/16; our compose file pins its own subnet in 198.18.0.0/16.
# Idempotent: when `docker info` already answers, it only checks the bridge and exits.
#
#   docker/dockerd-up.sh            # start (root), log in ${DOCKERD_LOG:-/var/log/emucluster-dockerd.log}
#   DOCKERD_TIMEOUT=120 docker/dockerd-up.sh
# On cgroup v1 kernels with RT group scheduling it also gives Docker's cgroup a real-time budget
# (DOCKERD_RT_RUNTIME_US, default 600000 us per second per CPU) for SCHED_FIFO nicds in containers.
set -euo pipefail

log="${DOCKERD_LOG:-/var/log/emucluster-dockerd.log}"
timeout_s="${DOCKERD_TIMEOUT:-90}"
bip="198.19.0.1/24"
pool="base=198.19.0.0/16,size=24"

if docker info >/dev/null 2>&1; then
    echo "dockerd-up: a Docker engine already answers"
    subnet="$(docker network inspect bridge --format '{{range .IPAM.Config}}{{.Subnet}}{{end}}' 2>/dev/null || true)"
    case "$subnet" in
        198.18.*|198.19.*|"") ;;
        *) echo "dockerd-up: WARNING: the running engine's default bridge is $subnet, outside 198.18.0.0/15;" \
                "restart it with: dockerd --bip $bip --default-address-pool $pool" >&2 ;;
    esac
    exit 0
fi

command -v dockerd >/dev/null || { echo "dockerd-up: dockerd not found (apt-get install -y docker.io)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "dockerd-up: dockerd must be started as root" >&2; exit 1; }

# overlay2 where the kernel has overlayfs, else the slow but universal vfs driver
driver="${DOCKERD_STORAGE_DRIVER:-}"
if [ -z "$driver" ]; then
    if grep -qw overlay /proc/filesystems; then driver=overlay2; else driver=vfs; fi
fi

# cgroup v1 with RT group scheduling: Docker's cgroup gets a real-time budget that containers
# can share (docker-compose.yml's EMU_RT_RUNTIME); without it SCHED_FIFO is refused in them
rt=()
if [ -f /sys/fs/cgroup/cpu/cpu.rt_runtime_us ]; then
    rt=(--cpu-rt-runtime "${DOCKERD_RT_RUNTIME_US:-600000}")
fi

# Pid files left by an engine that is gone (a machine restored from a snapshot, a killed
# dockerd): dockerd trusts containerd's pid file, and when that pid now names another process
# it waits for a containerd that never answers ("timeout waiting for containerd to start").
stale_pid_file() {  # FILE EXPECTED-COMM: remove FILE unless its pid runs EXPECTED-COMM
    local file="$1" comm="$2" pid
    [ -f "$file" ] || return 0
    pid="$(tr -dc 0-9 <"$file")"
    if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$comm" ]; then
        echo "dockerd-up: removing stale $file (pid ${pid:-none} is no $comm)"
        rm -f "$file"
    fi
}
stale_pid_file /var/run/docker.pid dockerd
stale_pid_file /var/run/docker/containerd/containerd.pid containerd

echo "dockerd-up: starting dockerd (storage $driver, bridge $bip, pool $pool ${rt[*]}), log $log"
mkdir -p "$(dirname "$log")"
nohup dockerd --bip "$bip" --default-address-pool "$pool" --storage-driver "$driver" "${rt[@]}" \
    >>"$log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 1 "$timeout_s"); do
    if docker info >/dev/null 2>&1; then
        echo "dockerd-up: dockerd (pid $pid) is up"
        exit 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "dockerd-up: dockerd exited; last lines of $log:" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    sleep 1
done
echo "dockerd-up: dockerd did not answer within ${timeout_s}s; see $log" >&2
exit 1
