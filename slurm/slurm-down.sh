#!/usr/bin/env bash
# Stop the test Slurm that slurm/slurm-up.sh started in DIR (default $SLURM_UP_DIR or
# /tmp/emucluster-slurm): SIGTERM to the pids in its pid files, SIGKILL after 10 s. Jobs still
# running are ended with their daemons (slurmstepd gets the same treatment). Keeps the logs.
set -euo pipefail
dir="${1:-${SLURM_UP_DIR:-/tmp/emucluster-slurm}}"
pids=()
for file in "$dir"/slurmctld.pid "$dir"/slurmd-*.pid; do
    [ -f "$file" ] || continue
    pid="$(tr -dc 0-9 <"$file")"
    comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
    case "$comm" in
        slurmctld|slurmd) kill -TERM "$pid" && pids+=("$pid") ;;
    esac
    rm -f "$file"
done
for _ in $(seq 1 20); do
    left=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    [ "${#left[@]}" = 0 ] && { echo "slurm-down: stopped ${#pids[@]} daemons in $dir"; exit 0; }
    sleep 0.5
done
kill -KILL "${left[@]}" 2>/dev/null || true
echo "slurm-down: killed ${#left[@]} daemons in $dir that ignored SIGTERM"
