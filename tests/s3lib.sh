# tests/s3lib.sh - a local S3 server (moto) for the test scripts.
#
#   . "$DLK_TESTS/lib.sh"
#   . "$DLK_TESTS/s3lib.sh"
#   s3_start [--auth] [--atomic]
#                          start moto_server on a free loopback port and
#                          point the AWS variables at it; it is stopped at
#                          exit (at_exit), also when a test fails.
#                          --auth: the server checks SigV4 signatures; an
#                          IAM user with an access key is made and its key
#                          exported (the secret in AWS_SECRET_ACCESS_KEY)
#                          --atomic: one PUT at a time (tests/moto_atomic.py:
#                          moto's conditional PUTs are not atomic), for
#                          tests of racing writers
#   s3_mkbucket NAME       create a bucket on the last started server
#   s3_put_tree DIR URL    upload every file under DIR to URL (s3://B/P),
#                          16 at a time through boto3 (no AWS CLI needed)
#   s3_server_name         "moto 5.2.1" or "ceph rgw 16.2.15" (for reports)
#   s3_proxy_start ARGS    start tests/faultproxy.py in front of the last
#                          server with ARGS (--rate-500 0.1 ...); sets
#                          S3_PROXY_PORT, S3_PROXY_LOG; the AWS variables
#                          keep naming the server itself
#
# With DLK_S3_SERVER=rgw (set by t311-rgw.sh), s3_start starts nothing: it
# points the AWS variables at the Ceph RGW whose settings are in the file
# $DLK_RGW_ENV (written by tests/servers/ceph-rgw.sh; RGW always checks
# signatures, so --auth changes nothing there), and s3_mkbucket takes a
# bucket that the same user already has (one cluster serves many tests).
#
# After s3_start: AWS_ENDPOINT_URL=http://127.0.0.1:PORT, S3_PORT,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and
# AWS_DEFAULT_REGION (the AWS CLI v1 reads only the latter), and shared
# config files that do not exist, so ~/.aws never leaks in.  moto_server
# missing: it is installed with pip, or the test fails naming the command.


# s3_server_name: the server the AWS variables name, with its version, for
# benchmark reports ("moto 5.2.1", "ceph rgw 16.2.15")
s3_server_name() {
    if [ "${DLK_S3_SERVER:-moto}" = rgw ]; then
        echo "ceph rgw $(radosgw --version 2>/dev/null | awk '{print $3}')"
    else
        echo "moto $(python3 -c 'import moto; print(moto.__version__)')"
    fi
}

_s3_need_moto() {
    command -v moto_server >/dev/null 2>&1 && return 0
    echo "# moto_server not found: pip install 'moto[server]'" >&2
    pip install --quiet 'moto[server]' >&2 || true
    hash -r
    command -v moto_server >/dev/null 2>&1 && return 0
    echo "not ok - moto_server is missing: run pip install 'moto[server]'"
    exit 1
}

_s3_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# _s3_wait_http URL SECONDS: until something answers HTTP there.
_s3_wait_http() {
    local url=$1 n=$(( $2 * 10 )) i
    for ((i = 0; i < n; i++)); do
        curl -s -o /dev/null --max-time 2 "$url" && return 0
        sleep 0.1
    done
    return 1
}


_s3_env() { # PORT
    export S3_PORT=$1
    export AWS_ENDPOINT_URL=http://127.0.0.1:$1
    export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
    export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
    export AWS_SHARED_CREDENTIALS_FILE=$T/.aws-no-credentials
    export AWS_CONFIG_FILE=$T/.aws-no-config
    unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE \
          AWS_ENDPOINT_URL_S3 DLK_S3_NO_SIGN DLK_S3_ADDRESSING
}

# The IAM user, policy and access key that moto's first requests make
# (INITIAL_NO_AUTH_ACTION_COUNT=4: exactly these four go unchecked).
_s3_make_user() {
    python3 - "$AWS_ENDPOINT_URL" <<'EOF'
import json, sys, boto3
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="testing",
                   aws_secret_access_key="testing")
iam.create_user(UserName="dlk")
arn = iam.create_policy(PolicyName="dlk-all", PolicyDocument=json.dumps({
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
))["Policy"]["Arn"]
iam.attach_user_policy(UserName="dlk", PolicyArn=arn)
k = iam.create_access_key(UserName="dlk")["AccessKey"]
print(k["AccessKeyId"], k["SecretAccessKey"])
EOF
}

_s3_start_rgw() {
    local f=${DLK_RGW_ENV:-}
    if [ -z "$f" ] || [ ! -s "$f" ]; then
        echo "not ok - DLK_S3_SERVER=rgw but DLK_RGW_ENV names no settings file"
        exit 1
    fi
    local RGW_ENDPOINT RGW_ACCESS_KEY RGW_SECRET_KEY
    . "$f"
    _s3_env "${RGW_ENDPOINT##*:}"
    export AWS_ENDPOINT_URL=$RGW_ENDPOINT
    export AWS_ACCESS_KEY_ID=$RGW_ACCESS_KEY
    export AWS_SECRET_ACCESS_KEY=$RGW_SECRET_KEY
}

s3_start() {
    if [ "${DLK_S3_SERVER:-moto}" = rgw ]; then
        _s3_start_rgw
        return
    fi
    local auth=0 server=(moto_server) a
    for a in "$@"; do
        case $a in
        --auth) auth=1 ;;
        --atomic) server=(python3 "$DLK_TESTS/moto_atomic.py") ;;
        esac
    done
    _s3_need_moto
    local port pid try
    for try in 1 2 3; do
        port=$(_s3_free_port)
        if [ $auth = 1 ]; then
            INITIAL_NO_AUTH_ACTION_COUNT=4 "${server[@]}" -H 127.0.0.1 \
                -p "$port" >"$T/moto-$port.log" 2>&1 &
        else
            "${server[@]}" -H 127.0.0.1 -p "$port" \
                >"$T/moto-$port.log" 2>&1 &
        fi
        pid=$!
        at_exit "stop_pid $pid"
        # moto-api/ is not an AWS action: it uses none of the unchecked ones
        if _s3_wait_http "http://127.0.0.1:$port/moto-api/data.json" 30; then
            break
        fi
        stop_pid "$pid"
        pid=
    done
    if [ -z "$pid" ]; then
        echo "not ok - moto_server did not start"
        sed 's/^/#   /' "$T/moto-$port.log" | tail -n 20
        exit 1
    fi
    _s3_env "$port"
    if [ $auth = 1 ]; then
        local keys
        if ! keys=$(_s3_make_user 2>"$T/moto-user.err"); then
            echo "not ok - cannot make an IAM user on moto"
            sed 's/^/#   /' "$T/moto-user.err" | tail -n 20
            exit 1
        fi
        export AWS_ACCESS_KEY_ID=${keys% *} AWS_SECRET_ACCESS_KEY=${keys#* }
    fi
}

s3_mkbucket() {
    python3 - "$1" <<'EOF' || { echo "not ok - cannot create bucket $1"; exit 1; }
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  region_name="us-east-1")
try:
    s3.create_bucket(Bucket=sys.argv[1])
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
EOF
}

s3_put_tree() {
    python3 - "$1" "$2" <<'EOF' || { echo "not ok - cannot upload $1 to $2"; exit 1; }
import os, sys, boto3
from concurrent.futures import ThreadPoolExecutor
src, url = sys.argv[1], sys.argv[2]
bucket, _, prefix = url[len("s3://"):].partition("/")
prefix = prefix.strip("/")
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  region_name="us-east-1")
def put(p):
    rel = os.path.relpath(p, src)
    s3.upload_file(p, bucket, prefix + "/" + rel if prefix else rel)
files = [os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs]
with ThreadPoolExecutor(16) as ex:
    list(ex.map(put, files))
EOF
}

s3_proxy_start() {
    fault_proxy_start "$AWS_ENDPOINT_URL" "$@"
    S3_PROXY_PORT=$FAULT_PROXY_PORT
    S3_PROXY_LOG=$FAULT_PROXY_LOG
    S3_PROXY_PID=$FAULT_PROXY_PID
}
