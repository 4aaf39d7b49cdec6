#!/usr/bin/env bash
# t395-gpu-local-rank.sh - the GPU that bench-stream takes by default
# under a launcher: the local rank, modulo the GPUs the process sees.  A
# launcher that gives each process one GPU through CUDA_VISIBLE_DEVICES
# (Slurm's --gpus-per-task) then has every process on cuda:0, and local
# ranks past the GPUs take them in turn; an explicit --device is kept.
# Without a GPU: the run goes to the cpu with the reason, whatever the
# local rank.
. "$DLK_TESTS/lib.sh"

synth=$DLK_BUILD/tests/synth
if [ ! -x "$synth" ]; then
    skip "the default GPU under a launcher" "no $synth (make unit builds it)"
    exit 0
fi
ok "a dataset" "$synth" "$T/ds" 300 32 32
probe() { "$DLK" bench-stream "$T/ds" --device cuda:0 --epochs 1 >/dev/null 2>&1; }
if ! probe; then
    LOCAL_RANK=3 LOCAL_WORLD_SIZE=4 ok "no GPU, local rank 3: runs" \
        "$DLK" bench-stream "$T/ds" --epochs 1
    check "... on the cpu" grep -q "on cpu" "$OUT"
    check "... saying why" grep -q "no usable GPU" "$ERR"
    skip "the local rank's GPU, modulo the GPUs seen" "no GPU here"
    exit 0
fi
n=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$n" -ge 1 ] || n=1
CUDA_VISIBLE_DEVICES=0 LOCAL_RANK=3 LOCAL_WORLD_SIZE=4 \
    ok "one GPU of its own, local rank 3" "$DLK" bench-stream "$T/ds" --epochs 1
check "... on cuda:0" grep -q "on cuda:0 " "$OUT"
check "... checksums equal" grep -q "equal" "$OUT"
LOCAL_RANK=$n LOCAL_WORLD_SIZE=$((n + 1)) \
    ok "local rank $n of $n GPUs" "$DLK" bench-stream "$T/ds" --epochs 1
check "... takes cuda:0 in turn" grep -q "on cuda:0 " "$OUT"
CUDA_VISIBLE_DEVICES=0 LOCAL_RANK=3 \
    fails "an explicit cuda:1 that the process does not see" 3 \
    "$DLK" bench-stream "$T/ds" --device cuda:1 --epochs 1
check "... says how many it sees" grep -q "cuda:1: this machine has 1 CUDA device" "$ERR"
