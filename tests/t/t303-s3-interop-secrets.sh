#!/usr/bin/env bash
# S3 interoperability and secrets: what dlk writes, the AWS CLI reads with
# identical bytes (the copy is a valid dataset that verifies); what the AWS
# CLI uploads, dlk reads.  No command ever prints the secret key, the key
# id or a session token: not on success, not on errors, not with
# DLK_IO_STATS, not in --json.  Then, against moto checking signatures, a
# wrong secret is refused clearly.  (moto's signature check mishandles
# ListObjectsV2 prefixes holding '/', which real S3 accepts, so the listing
# commands run against moto without signature checks.)
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
have_numpy || { skip "s3 interop" "numpy missing: python3 -m pip install numpy"; exit 0; }
s3_start
s3_mkbucket interop
aws_() { aws --endpoint-url "$AWS_ENDPOINT_URL" "$@"; }
export AWS_ACCESS_KEY_ID=AKIAMARKERKEYID0001 AWS_SECRET_ACCESS_KEY=MarkerSecret/0123456789abcdefghijklmnopqrstuvw
SECRET=$AWS_SECRET_ACCESS_KEY
python3 "$DLK_TESTS/../examples/sample_data.py" "$T/src" --samples 30 --size 16 >/dev/null

DS=s3://interop/written-by-dlk
all=$T/all-output
: > "$all"
runall() { # NAME EXPECTED_EXIT CMD... : every byte of output goes to $all
    local name=$1 want=$2; shift 2
    fails "$name" "$want" env DLK_IO_STATS=1 "$@"
    cat "$OUT" "$ERR" >> "$all"
}
runall "create" 0 "$DLK" create "$DS" --tensor images:u8:16x16x3:zstd --tensor labels:i32 --tensor 'boxes:f32:?x4' --chunk-size 4K --json
runall "ingest" 0 "$DLK" ingest "$DS" from-dir "$T/src" --json
runall "ls --json" 0 "$DLK" ls "$DS" --json
runall "cat" 0 "$DLK" cat "$DS" images 3 --json
runall "verify --deep --json" 0 "$DLK" verify "$DS" --deep --json
runall "commit" 0 "$DLK" commit "$DS" -m first --json
runall "log" 0 "$DLK" log "$DS" --json
runall "verify --all" 0 "$DLK" verify "$DS" --all --json
runall "gc --dry-run" 0 "$DLK" gc "$DS" --dry-run --json
runall "bench-stream" 0 "$DLK" bench-stream "$DS" --device cpu --json
aws_ s3api put-bucket-policy --bucket interop --policy '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::interop","arn:aws:s3:::interop/*"]}]}' >/dev/null 2>&1
runall "--no-sign-request reads a public dataset" 0 "$DLK" --no-sign-request ls "$DS" --json
runall "--s3-addressing path, anywhere on the line" 0 "$DLK" ls "$DS" --s3-addressing path
fails "a bad --s3-addressing is a usage error" 2 "$DLK" ls "$DS" --s3-addressing sideways
runall "a missing dataset names itself, not the key" 3 "$DLK" cat s3://interop/nothing-here images 0
runall "with a session token" 0 env AWS_SESSION_TOKEN=MARKER-SESSION-TOKEN-1234 "$DLK" ls "$DS" --json
# the settings come from the environment through the dlk command (the
# library reads none), read and checked where a dataset is remote only
runall "a bad DLK_S3_MAX_ATTEMPTS fails an s3:// command" 3 env DLK_S3_MAX_ATTEMPTS=0 "$DLK" ls "$DS" --json
check "the error names the variable" grep -q '"message": ".*DLK_S3_MAX_ATTEMPTS' "$OUT"
"$DLK" create "$T/plain" --tensor labels:i32 >/dev/null
ok "a local dataset is not stopped by bad S3 settings" env DLK_S3_MAX_ATTEMPTS=0 AWS_PROFILE=nosuch "$DLK" ls "$T/plain"
noprof=(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_PROFILE=nosuch
        AWS_SHARED_CREDENTIALS_FILE="$T/none" AWS_CONFIG_FILE="$T/none")
runall "a missing AWS_PROFILE is refused" 3 "${noprof[@]}" "$DLK" ls "$DS"
check "the refusal names the profile" grep -q "aws profile 'nosuch' not found" "$ERR"
runall "--no-sign-request looks no profile up" 0 "${noprof[@]}" "$DLK" ls "$DS" --no-sign-request

# what dlk wrote, the AWS CLI downloads with identical bytes
ok "aws s3 cp --recursive of the dataset" aws_ s3 cp --quiet --recursive "$DS" "$T/copy"
ok "the copy is a dataset that verifies deep" dlk verify "$T/copy" --all --deep
for i in 0 13 29; do
    "$DLK" cat "$DS" boxes $i --raw > "$T/a"; "$DLK" cat "$T/copy" boxes $i --raw > "$T/b"
    check "boxes $i identical through the AWS CLI" cmp "$T/a" "$T/b"
done
# what the AWS CLI uploads, dlk reads
"$DLK" create "$T/local" --tensor labels:i32 >/dev/null
mkdir -p "$T/labels" && cp "$T"/src/*.labels.npy "$T/labels/"
"$DLK" ingest "$T/local" from-dir "$T/labels" --quiet
"$DLK" commit "$T/local" -m local >/dev/null
ok "aws s3 cp --recursive of a local dataset" aws_ s3 cp --quiet --recursive "$T/local" s3://interop/uploaded
ok "dlk verifies the uploaded dataset" dlk verify s3://interop/uploaded --all --deep
"$DLK" cat "$T/local" labels 11 --raw > "$T/a"; "$DLK" cat s3://interop/uploaded labels 11 --raw --at main > "$T/b"
check "dlk reads what the AWS CLI uploaded, byte for byte" cmp "$T/a" "$T/b"

# a server that checks signatures: the right key works, a wrong one is
# refused with a clear message; neither prints a secret
s3_start --auth
s3_mkbucket signed
REAL=$AWS_SECRET_ACCESS_KEY
ok "upload a dataset with the AWS CLI" aws_ s3 cp --quiet --recursive "$T/local" s3://signed/ds
runall "signed requests with the right key" 0 "$DLK" ls s3://signed/ds --at main --json
runall "a wrong secret is refused" 3 env AWS_SECRET_ACCESS_KEY="WRONG${REAL}WRONG" "$DLK" ls s3://signed/ds
check "the refusal says access denied and why" grep -qiE "access denied|403.*(SignatureDoesNotMatch|InvalidAccessKeyId)" "$ERR"
runall "--no-sign-request on a private bucket is refused" 3 "$DLK" --no-sign-request ls s3://signed/ds
check "the refusal says the request was not signed" grep -qiE "access denied|403" "$ERR"
check "no output of any command holds a secret" sh -c "! grep -qF -- '$SECRET' '$all' && ! grep -qF -- '$REAL' '$all'"
check "nor the session token" sh -c "! grep -qF MARKER-SESSION-TOKEN '$all'"
check "nor a key id" sh -c "! grep -qF -- AKIAMARKERKEYID0001 '$all' && ! grep -qF -- '$AWS_ACCESS_KEY_ID' '$all'"
