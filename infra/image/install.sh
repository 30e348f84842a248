#!/bin/sh
# Lays the project's image out inside a Debian bookworm root filesystem, as root.
#
#   sh install.sh CONTEXT
#
# CONTEXT is the directory `python -m platformctl image context` prepares
# (wheels/, requirements.lock, jars/, npm/). Both builds run this same script,
# so both give the same image: `docker build` / `podman build` of the
# Dockerfile beside it (a RUN on the pinned Debian base) and
# `python -m platformctl image build` (in an mmdebstrap chroot, no base image
# pulled).
set -eu
context=${1:?usage: install.sh CONTEXT}
export DEBIAN_FRONTEND=noninteractive

# Python 3.11 with its venv module, a Java 17 runtime for Spark, CA certificates
# (the JVM's truststore too, from ca-certificates-java), and tini as PID 1 (signals
# forwarded, the JVM's orphans reaped). The JRE's postinst links its manual page
# into /usr/share/man/man1, which a slim root filesystem leaves out.
mkdir -p /usr/share/man/man1
apt-get update
apt-get install -y --no-install-recommends \
    python3 python3-venv openjdk-17-jre-headless ca-certificates tini
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log

# Every process runs as this user: a fixed uid and gid (the ECS task definition's
# `user`), no login, HOME on /tmp, the one writable place of a read-only root.
groupadd --gid 1000 wap
useradd --uid 1000 --gid 1000 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin wap

# The project's environment: the locked requirements, each file checked against the
# lock's hashes, offline from the context's wheels; then the project's own wheel.
python3 -m venv /opt/wap/venv
/opt/wap/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-index \
    --find-links "$context/wheels" --require-hashes -r "$context/requirements.lock"
/opt/wap/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-index \
    --no-deps "$context"/wheels/web_activity_platform-*.whl

# Spark's connector jars and the analytics.js bundle the collector serves, laid out as
# under .platform locally: the image sets WAP_LOCAL__STATE_DIR=/opt/wap.
cp -R "$context/jars" "$context/npm" /opt/wap/
chown -R root:root /opt/wap
chmod -R u=rwX,go=rX /opt/wap
