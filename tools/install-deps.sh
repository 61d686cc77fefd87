#!/bin/sh
# Installs what pardo's build needs on Debian or Ubuntu: gcc, make,
# pkg-config, cJSON and Check. As root it runs apt-get; otherwise it prints
# the command to run and fails, so `make` stops with a clear message.
set -e
PKGS="gcc make pkg-config libcjson-dev check"
if [ "$(id -u)" = 0 ]; then
    echo "pardo: installing build dependencies: $PKGS" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq $PKGS >&2
else
    echo "pardo: missing build dependencies. Run:" >&2
    echo "    sudo apt-get install -y $PKGS" >&2
    exit 1
fi
