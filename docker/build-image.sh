#!/usr/bin/env bash
# Build emucluster's container image with nothing pulled from a container registry.
#
#   1. base image (once, cached): a minimal Debian rootfs made by debootstrap from Debian's
#      package mirror, with python3 + python3-venv, tarred into the cache and `docker import`ed
#      as $BASE_TAG. Skipped when BASE_IMAGE names another image (e.g. python:3.11-slim for
#      users who can pull from a registry).
#   2. wheels: the dependency wheels for the image's Python (downloaded once per dependency set,
#      cached) and this checkout's own wheel, staged in build/docker/wheels, the only thing the
#      build context holds (.dockerignore).
#   3. the image: `docker build` of the top-level Dockerfile, tagged $IMAGE and labelled with a
#      hash of what it is made of; when that hash is unchanged steps 2-3 are skipped.
#
# Idempotent; a run with nothing changed takes ~1 s (steps 1-3 skip what exists). Run from anywhere:
#   docker/build-image.sh                         # -> emucluster:local
#   BASE_IMAGE=python:3.11-slim docker/build-image.sh
#   EMUCLUSTER_DOCKER_REBUILD_BASE=1 docker/build-image.sh   # redo the rootfs and base image
#
# Environment: IMAGE (emucluster:local), BASE_IMAGE (emucluster-base:bookworm, made here),
# IMAGE_PYTHON (3.11: the Python of the base image, for the dependency wheels), DEBIAN_SUITE
# (bookworm), DEBIAN_MIRROR (first deb.debian.org-style URI of apt's sources, else
# http://deb.debian.org/debian), EMUCLUSTER_DOCKER_CACHE (~/.cache/emucluster-docker), PYTHON.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${EMUCLUSTER_DOCKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/emucluster-docker}"
suite="${DEBIAN_SUITE:-bookworm}"
base_tag="emucluster-base:$suite"
base_image="${BASE_IMAGE:-$base_tag}"
image="${IMAGE:-emucluster:local}"
image_python="${IMAGE_PYTHON:-3.11}"
python="${PYTHON:-python3}"
stage="$repo/build/docker"
started=$SECONDS

say() { echo "build-image: $*"; }

debian_mirror() {
    if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
    local uri
    uri="$(grep -hoE '(URIs:|^deb) +https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/* \
        2>/dev/null | grep -E '/debian/?$' | head -n 1 | awk '{print $2}' || true)"
    echo "${uri:-http://deb.debian.org/debian}"
}

build_rootfs() {  # -> $cache/rootfs-$suite.tar
    local tar="$cache/rootfs-$suite.tar"
    if [ -s "$tar" ] && [ -z "${EMUCLUSTER_DOCKER_REBUILD_BASE:-}" ]; then
        say "rootfs cached: $tar"
        return
    fi
    command -v debootstrap >/dev/null || { say "debootstrap not found (apt-get install -y debootstrap)" >&2; exit 1; }
    [ "$(id -u)" = 0 ] || { say "debootstrap needs root" >&2; exit 1; }
    local mirror tmp
    mirror="$(debian_mirror)"
    tmp="$(mktemp -d "$cache/rootfs.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    say "debootstrap $suite from $mirror (a few minutes, once)"
    debootstrap --variant=minbase --include=python3,python3-venv,iproute2 \
        "$suite" "$tmp/root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
        || { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
    rm -rf "$tmp/root/var/lib/apt/lists/"* "$tmp/root/var/cache/apt/"*.bin \
        "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/log/"*.log
    tar --numeric-owner -C "$tmp/root" -cf "$tmp/rootfs.tar" .
    mv "$tmp/rootfs.tar" "$tar"
    rm -rf "$tmp"
    trap - EXIT
    say "rootfs: $tar ($(du -h "$tar" | cut -f1))"
}

import_base() {
    if docker image inspect "$base_tag" >/dev/null 2>&1 && [ -z "${EMUCLUSTER_DOCKER_REBUILD_BASE:-}" ]; then
        say "base image present: $base_tag"
        return
    fi
    build_rootfs
    say "docker import -> $base_tag"
    docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' \
        --message "emucluster base: debootstrap --variant=minbase $suite + python3, python3-venv" \
        "$cache/rootfs-$suite.tar" "$base_tag" >/dev/null
}

dependency_wheels() {  # -> $cache/deps-<key>/ with every runtime dependency for the image's Python
    local arch key deps
    arch="$(uname -m)"
    deps="$("$python" - "$repo/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["dependencies"]))
PY
)"
    key="$(printf '%s\n%s\n%s\n' "$deps" "$image_python" "$arch" | sha256sum | cut -c1-16)"
    deps_dir="$cache/deps-$key"
    if [ -f "$deps_dir/.complete" ]; then
        say "dependency wheels cached: $deps_dir"
        return
    fi
    rm -rf "$deps_dir" && mkdir -p "$deps_dir"
    say "downloading dependency wheels for CPython $image_python/$arch (once per dependency set)"
    printf '%s\n' "$deps" >"$deps_dir/requirements.txt"
    # binary wheels for the image's interpreter and glibc (bookworm: 2.36), whatever runs this;
    # every manylinux tag up to glibc 2.36 is listed (pip does not expand a perennial tag)
    local platforms=() minor
    for minor in $(seq 36 -1 5); do platforms+=(--platform "manylinux_2_${minor}_$arch"); done
    platforms+=(--platform "manylinux2014_$arch" --platform "manylinux2010_$arch" --platform "manylinux1_$arch")
    # one requirement at a time: a pure-Python one published only as an sdist (python-hostlist)
    # is built into a wheel here (py3-none-any: the same in the image)
    : >"$cache/pip-download.log"
    local req
    while IFS= read -r req; do
        [ -n "$req" ] || continue
        if ! "$python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
                --implementation cp --python-version "$image_python" "${platforms[@]}" \
                -d "$deps_dir" "$req" >>"$cache/pip-download.log" 2>&1; then
            say "no binary wheel for '$req': building a pure-Python wheel from its sdist"
            "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps \
                -w "$deps_dir" "$req" >>"$cache/pip-download.log" 2>&1 \
                || { cat "$cache/pip-download.log" >&2; exit 1; }
        fi
    done <"$deps_dir/requirements.txt"
    if ls "$deps_dir"/*.whl | grep -v -e '-none-any\.whl$' -e "cp${image_python/./}" -e 'abi3' \
            | grep -q .; then
        say "a dependency wheel does not fit CPython $image_python:" >&2
        ls "$deps_dir" >&2
        exit 1
    fi
    touch "$deps_dir/.complete"
}

stage_wheels() {
    rm -rf "$stage/wheels" && mkdir -p "$stage/wheels"
    cp -l "$deps_dir"/*.whl "$stage/wheels/" 2>/dev/null || cp "$deps_dir"/*.whl "$stage/wheels/"
    say "building this checkout's wheel"
    # from a copy: an in-tree build would rewrite build/ and *.egg-info under a running checkout
    local tmp
    tmp="$(mktemp -d)"
    mkdir "$tmp/src"
    cp -r "$repo/pyproject.toml" "$repo/README.md" "$repo/nicd" "$repo/emucluster" \
        "$repo/launcher" "$repo/emubench" "$repo/emutrace" "$tmp/src/"
    find "$tmp/src" -name __pycache__ -prune -exec rm -rf {} +
    "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
        -w "$tmp/out" "$tmp/src" >/dev/null 2>&1 \
        || "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$tmp/out" "$tmp/src"
    mv "$tmp"/out/emucluster-*.whl "$stage/wheels/"
    rm -rf "$tmp"
}

content_key() {  # what the image is made of: base image, Dockerfile, dependencies, our sources
    {
        docker image inspect --format '{{.Id}}' "$base_image" 2>/dev/null || echo "$base_image"
        cat "$repo/Dockerfile" "$repo/.dockerignore"
        ls "$deps_dir"
        "$python" - "$repo" <<'PY'
import hashlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
files = [root / "pyproject.toml", root / "README.md"]
for package in ("nicd", "emucluster", "launcher", "emubench", "emutrace"):
    files += (p for p in (root / package).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
for path in sorted(files):
    print(path.relative_to(root), hashlib.sha256(path.read_bytes()).hexdigest())
PY
    } | sha256sum | cut -c1-32
}

mkdir -p "$cache" "$stage"
docker info >/dev/null 2>&1 || { say "no Docker engine answers (start one: docker/dockerd-up.sh)" >&2; exit 1; }
if [ "$base_image" = "$base_tag" ]; then import_base; fi
dependency_wheels
key="$(content_key)"
if [ "$(docker image inspect --format '{{index .Config.Labels "emucluster.content"}}' "$image" 2>/dev/null)" = "$key" ]; then
    say "image up to date: $image (same base, Dockerfile, dependencies and sources)"
else
    stage_wheels
    say "docker build -> $image (BASE_IMAGE=$base_image)"
    # the classic builder sees local images (BuildKit with another driver would pull the base)
    DOCKER_BUILDKIT=0 docker build --quiet --build-arg "BASE_IMAGE=$base_image" \
        --label "emucluster.content=$key" -t "$image" "$repo" >"$cache/build.log" 2>&1 \
        || { cat "$cache/build.log" >&2; exit 1; }
fi
say "done: $image in $((SECONDS - started)) s"
