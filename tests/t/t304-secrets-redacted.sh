#!/usr/bin/env bash
# No message names a secret (dlk(1)): not a password in an endpoint or
# dataset URL (http://user:pass@host, s3://KEY:SECRET@bucket,
# AWS_ENDPOINT_URL with user information), not the credentials of a
# pre-signed URL's query (X-Amz-Signature, X-Amz-Credential,
# X-Amz-Security-Token), and not what a server's error text quotes of
# the request: servers on loopback that echo the caller's access key id,
# secret key and session token (S3) or bearer token (GCS) into the fields
# dlk quotes.  Neither on stderr nor in --json.
. "$DLK_TESTS/lib.sh"

PASS=PassWord0123456789Marker
all=$T/all-output
: > "$all"
run() { # NAME EXIT CMD...: every byte of output also to $all
    local name=$1 want=$2; shift 2
    fails "$name" "$want" "$@"
    cat "$OUT" "$ERR" >> "$all"
}
# the previous command's output names none of the words given
clean() {
    local w
    for w in "$@"; do
        if grep -qF -- "$w" "$OUT" "$ERR"; then
            grep -F -- "$w" "$OUT" "$ERR" | head -3
            return 1
        fi
    done
}
valid_json() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT"; }

export AWS_ACCESS_KEY_ID=AKIAREDACTMARKER0001 AWS_SECRET_ACCESS_KEY=SecretMarker/0123456789abcdefghijklmnopqrs
run "an endpoint with a password" 3 env AWS_ENDPOINT_URL="http://user:$PASS@127.0.0.1:1" "$DLK" ls s3://bucket/ds
check "the password is not shown" clean "$PASS"
check "the endpoint is still named" grep -q "endpoint url 'http://\*\*\*@127.0.0.1:1'" "$ERR"
run "the same with --json" 3 env AWS_ENDPOINT_URL="http://user:$PASS@127.0.0.1:1" "$DLK" ls s3://bucket/ds --json
check "--json: valid, no password" sh -c 'python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$1" && ! grep -qF "$2" "$1"' _ "$OUT" "$PASS"
run "AWS_ENDPOINT_URL_S3 with a password" 3 env AWS_ENDPOINT_URL_S3="https://AKID:$PASS@127.0.0.1:1" "$DLK" cat s3://bucket/ds x 0
check "not shown" clean "$PASS"
run "a dataset url with credentials" 3 "$DLK" ls "s3://AKIDINURL:$PASS@bucket/ds"
check "neither the key id nor the secret is shown" clean "$PASS" AKIDINURL
run "a gs url with credentials" 3 "$DLK" ls "gs://me:$PASS@bucket/ds" --json
check "not shown" clean "$PASS"
SIG=0123456789abcdef0123456789abcdefSIGMARK
run "a pre-signed query in the url" 3 env AWS_ENDPOINT_URL=http://127.0.0.1:1 DLK_S3_MAX_ATTEMPTS=1 "$DLK" ls "s3://bucket/ds?X-Amz-Credential=AKIDQUERY%2F20260101&X-Amz-Signature=$SIG&X-Amz-Security-Token=TOKQUERYMARKER"
check "its signature, credential and token are not shown" clean "$SIG" AKIDQUERY TOKQUERYMARKER
run "an endpoint with a pre-signed query" 3 env AWS_ENDPOINT_URL="http://127.0.0.1:1/?X-Amz-Signature=$SIG" "$DLK" ls s3://bucket/ds
check "not shown" clean "$SIG"

# servers whose error text quotes the request's credentials
cat > "$T/echo.py" <<'PY'
import http.server, json, re, sys
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        auth = self.headers.get("Authorization", "")
        if self.server.kind == "s3":
            akid = re.search(r"Credential=([^/]+)", auth)
            tok = self.headers.get("x-amz-security-token", "")
            body = ("<?xml version=\"1.0\"?><Error><Code>%s</Code><Message>m</Message>"
                    "<RequestId>%s %s</RequestId></Error>" % (
                        akid.group(1) if akid else "NoKey", tok, sys.argv[3])).encode()
            ctype = "application/xml"
        else:
            tok = auth.split(" ", 1)[-1]
            body = json.dumps({"error": {"code": 401, "message":
                               "token %s is not valid" % tok}}).encode()
            ctype = "application/json"
        self.send_response(403 if self.server.kind == "s3" else 401)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = answer
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.kind = sys.argv[1]
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
start_echo() { # KIND -> ECHO_PORT
    rm -f "$T/port"
    python3 "$T/echo.py" "$1" "$T/port" "$AWS_SECRET_ACCESS_KEY" &
    local pid=$! i
    at_exit "stop_pid $pid"
    for ((i = 0; i < 100; i++)); do [ -s "$T/port" ] && break; sleep 0.1; done
    ECHO_PORT=$(cat "$T/port")
}
start_echo s3
TOKEN=SessionTokenMarker0123456789ABCDEFGH
run "S3 answers 403 quoting the key id, the token and the secret" 3 env AWS_ENDPOINT_URL="http://127.0.0.1:$ECHO_PORT" AWS_SESSION_TOKEN="$TOKEN" "$DLK" ls s3://bucket/ds
check "the error is an HTTP 403 naming the object" grep -q "cannot read 's3://bucket/ds/dlk.json': HTTP 403" "$ERR"
check "none of the three is shown" clean "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$TOKEN" "${TOKEN:0:16}"
run "the same with --json" 3 env AWS_ENDPOINT_URL="http://127.0.0.1:$ECHO_PORT" AWS_SESSION_TOKEN="$TOKEN" "$DLK" ls s3://bucket/ds --json
check "--json: valid" valid_json
check "--json: none shown" clean "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$TOKEN"
run "a write refused so" 3 env AWS_ENDPOINT_URL="http://127.0.0.1:$ECHO_PORT" AWS_SESSION_TOKEN="$TOKEN" "$DLK" create s3://bucket/new --tensor x:i32
check "none shown" clean "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$TOKEN"

start_echo gcs
GTOKEN=ya29.GcsBearerMarker0123456789abcdef
run "GCS answers 401 quoting the bearer token" 3 env STORAGE_EMULATOR_HOST="127.0.0.1:$ECHO_PORT" GOOGLE_OAUTH_ACCESS_TOKEN="$GTOKEN" "$DLK" ls gs://bucket/ds
check "the error is an HTTP 401 naming the object" grep -q "cannot read 'gs://bucket/ds/dlk.json': HTTP 401" "$ERR"
check "the token is not shown" clean "$GTOKEN" "${GTOKEN:0:16}"

check "no secret in any output above" sh -c '! grep -qF -e "$2" -e "$3" -e "$4" -e "$5" -e "$6" "$1"' _ "$all" "$PASS" "$AWS_SECRET_ACCESS_KEY" "$TOKEN" "$GTOKEN" "$SIG"
