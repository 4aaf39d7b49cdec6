# tests/bench/link.sh - sourced by the S3 benchmarks: serve a folder as
# S3 on loopback the way a case names it.
#   serve CASE SRV ROOT     CASE is "D" (s3_dir_server holds every answer
#                           D ms before its first byte: 0 is bare
#                           loopback) or "link:D:R" (bare s3_dir_server
#                           behind tests/bench/link_proxy: D ms each way,
#                           a handshake's round trip more on a new
#                           connection, R MB/s a connection, as S3 is
#                           reached over a real network)
# sets AWS_ENDPOINT_URL (and the bench credentials) and `pids`;
# serve_stop ends them.  LINK_PROXY names the proxy binary (default:
# beside SRV).
serve_stop() {
    local p
    for p in ${pids:-}; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
    pids=""
}
serve_wait() { # FILE WORD: until FILE has a line "WORD PORT"; prints PORT
    local i
    for i in $(seq 100); do
        grep -q "^$2 " "$1" 2>/dev/null && break
        sleep 0.1
    done
    awk -v w="$2" '$1 == w {print $2; exit}' "$1"
}
serve() {
    local case=$1 srv=$2 root=$3 hold=$1 dir
    dir=$(mktemp -d "${TMPDIR:-/tmp}/dlk-serve.XXXXXX")
    serve_stop
    case $case in link:*) hold=0 ;; esac
    S3_DIR_SERVER_DELAY_MS=$hold "$srv" "$root" 64 > "$dir/srv" 2> "$dir/srv.err" &
    pids=$!
    local port
    port=$(serve_wait "$dir/srv" port)
    case $case in
    link:*)
        local d r proxy=${LINK_PROXY:-$(dirname "$srv")/link_proxy}
        IFS=: read -r _ d r <<< "$case"
        "$proxy" 0 "$port" "$d" "$r" > "$dir/proxy" 2> "$dir/proxy.err" &
        pids="$pids $!"
        port=$(serve_wait "$dir/proxy" listening)
        ;;
    esac
    rm -rf "$dir"
    export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_REGION=us-east-1 \
        AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
}
# serve_label CASE: how a report names the case
serve_label() {
    case $1 in
    link:*) local d r; IFS=: read -r _ d r <<< "$1"
            echo "link of $d ms each way, $r MB/s a connection" ;;
    *) echo "$1 ms to first byte" ;;
    esac
}
