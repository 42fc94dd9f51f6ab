# emucluster's image: one image for the head (emurun) and the nodes (emuproxy + nicd + hosts).
# Built by docker/build-image.sh, which makes everything this file needs without a registry:
# the base image (a debootstrap'ed Debian with python3, `docker import`ed as
# emucluster-base:bookworm) and build/docker/wheels (this checkout's wheel + its dependencies).
# With a registry at hand, any Python 3.11 image works as the base:
#   BASE_IMAGE=python:3.11-slim docker/build-image.sh
# (no "syntax" directive on purpose: it would pull a frontend image)
ARG BASE_IMAGE=emucluster-base:bookworm
FROM ${BASE_IMAGE}
COPY build/docker/wheels /tmp/wheels
RUN python3 -m venv /opt/emucluster \
    && /opt/emucluster/bin/pip install --no-index --no-cache-dir --disable-pip-version-check \
        --find-links /tmp/wheels emucluster \
    && rm -rf /tmp/wheels
ENV PATH=/opt/emucluster/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8
CMD ["emurun", "--help"]
