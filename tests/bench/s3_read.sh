#!/usr/bin/env bash
# Benchmark: reading a set of objects (1 GiB by default: 128 x 8 MiB) from
# a local S3 server (moto), measured in one run:
#   dlk      libdlk's store API, 64 threads, the default in-flight limit
#   dlk-seq  libdlk, one thread: one GET at a time
#   aws      aws s3 cp --recursive (the AWS CLI's defaults)
# first straight to moto, then through tests/faultproxy.py adding 50 ms to
# the first byte of every answer (a remote store's latency), no faults.
# Prints MB/s (10^6 bytes) of each and dlk's ratios to the others.
#   tests/bench/s3_read.sh [OBJECTS] [MIB_EACH]
# DLK_S3_SERVER=rgw DLK_RGW_ENV=FILE runs it against a Ceph RGW instead
# (tests/servers/ceph-rgw.sh start DIR writes DIR/env).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
nobj=${1:-128}
mib=${2:-8}
build=${DLK_BUILD:-$root/build}
export DLK_TESTS=$root/tests
. "$root/tests/lib.sh"
. "$root/tests/s3lib.sh"
set +u

make -s -C "$root" "$build/libdlk.a" >/dev/null
bin=$T/s3_get_bench
cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -I"$root/lib" -o "$bin" \
    "$root/tests/bench/s3_get_bench.c" "$root/env/store_env.c" "$build/libdlk.a" \
    $(pkg-config --libs jansson libxxhash libzstd libcurl expat libcrypto) -lpthread -lm

echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo); curl $(curl --version | head -n1 | cut -d' ' -f2); $(s3_server_name)"
s3_start
s3_mkbucket bench
mkdir -p "$T/src"
for ((i = 0; i < nobj; i++)); do
    head -c $((mib << 20)) /dev/urandom > "$T/src/obj$(printf %04d $i)"
done
aws --endpoint-url "$AWS_ENDPOINT_URL" s3 cp --recursive --quiet \
    "$T/src" s3://bench/set/
bytes=$((nobj * mib << 20))
echo "data: $nobj objects of $mib MiB ($bytes bytes) in $(s3_server_name) at $AWS_ENDPOINT_URL"

mbps() { # BYTES START END
    echo "$1 $2 $3" | awk '{printf "%.1f", $1/($3-$2)/1e6}'
}

run_aws() { # ENDPOINT -> MB/s
    rm -rf "$T/dst"
    local s e
    s=$(date +%s.%N)
    aws --endpoint-url "$1" s3 cp --recursive --quiet s3://bench/set/ "$T/dst"
    e=$(date +%s.%N)
    local got
    got=$(find "$T/dst" -type f -printf "%s\n" | awk "{s += \$1} END {print s}")
    [ "$got" -eq "$bytes" ] || { echo "aws: got $got of $bytes bytes" >&2; exit 1; }
    rm -rf "$T/dst"
    mbps "$bytes" "$s" "$e"
}

run_dlk() { # ENDPOINT THREADS -> MB/s
    local out
    out=$(AWS_ENDPOINT_URL=$1 "$bin" s3://bench/set "$2")
    case $out in
        *"bytes=$bytes "*) ;;
        *) echo "dlk: $out (expected $bytes bytes)" >&2; exit 1 ;;
    esac
    echo "$out" | sed 's/.*mbps=//'
}

report() { # LABEL ENDPOINT
    local d q a
    d=$(run_dlk "$2" 64)
    q=$(run_dlk "$2" 1)
    a=$(run_aws "$2")
    printf '%-28s dlk %8s MB/s | dlk-seq %8s MB/s | aws %8s MB/s | dlk/seq %5sx | dlk/aws %5sx\n' \
        "$1" "$d" "$q" "$a" \
        "$(echo "$d $q" | awk '{printf "%.2f", $1/$2}')" \
        "$(echo "$d $a" | awk '{printf "%.2f", $1/$2}')"
}

report "$(s3_server_name) direct:" "$AWS_ENDPOINT_URL"
s3_proxy_start --delay-ms 50
report "$(s3_server_name) + 50 ms first byte:" "http://127.0.0.1:$S3_PROXY_PORT"
