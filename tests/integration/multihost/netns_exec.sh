#!/bin/sh
# An ssh-like launcher for emurun --launcher exec: netns_exec.sh HOST COMMAND [ARGS...]
# runs COMMAND inside the network namespace ${EMU_NETNS_PREFIX}HOST, in a pid namespace of its
# own (COMMAND is its pid 1, with a private /proc) and with a private /dev/shm: a host of its
# own, as far as emucluster can tell. stdin (the job's token) passes through.
host=$1
shift
exec ip netns exec "${EMU_NETNS_PREFIX:?}${host}" \
    unshare --pid --fork --mount-proc \
    sh -c 'mount -t tmpfs -o size=256m tmpfs /dev/shm && exec "$@"' sh "$@"
