# tests/bench/moto_bench.sh - sourced by the benchmarks that stream from
# the tests' S3 server (tests/s3lib.sh: moto, or a Ceph RGW with
# DLK_S3_SERVER=rgw), which takes writes (an ingest to s3://, a tree of
# files put), where tests/bench/link.sh's serve only reads a folder.
#   root=...; . "$root/tests/bench/moto_bench.sh"
# sets build (DLK_BUILD, default build/) and dlk, DLK_TESTS, and the
# helpers of tests/lib.sh ($T, at_exit) and tests/s3lib.sh; then
#   moto_bench_start NOTE   builds dlk if it is missing, prints the
#                           machine line ending in NOTE, starts the
#                           server (stopped at exit) with a bucket "bench"
build=${DLK_BUILD:-$root/build}
dlk=$build/dlk
export DLK_TESTS=$root/tests
. "$root/tests/lib.sh"
. "$root/tests/s3lib.sh"
set +u

moto_bench_start() { # NOTE
    [ -x "$dlk" ] || make -s -C "$root" "$dlk" >/dev/null
    echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1); $1"
    s3_start
    s3_mkbucket bench
}
