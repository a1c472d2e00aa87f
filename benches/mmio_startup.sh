#!/usr/bin/env bash
# Start-up cost of `pqos --iface=mmio` beside `--iface=msr` on the simulated RDT 1.3 Xeon
# (`xeon-rdt13`), FUSE-mounted (`rdt-sim mount` + `--sysroot`: every register access is a
# pread/pwrite of DIR/dev/cpu/N/msr or DIR/dev/mem) and in-process (`--sim`): the median wall
# time of RUNS runs of each command, and (mounted, with strace) the system calls of one run
# (`strace -f -c`: total calls, and the pread64/pwrite64 among them). Then the MMIO
# register dumps (`--dump`, `--dump-rmid-regs`), mounted, the same columns: a dump reads each
# contiguous run of registers in one pread (`rdt_mmio::MmioIo::read_range`).
#
# Usage: benches/mmio_startup.sh [BINDIR] (default target/debug; build first with
#        `cargo build -p pqos-cli -p rdt-sim --bins`).
# Env:   RUNS (default 5). Needs root and /dev/fuse for the mounted runs.
set -euo pipefail
unset RUST_BACKTRACE

cd "$(dirname "$0")/.."
bin=${1:-target/debug}
runs=${RUNS:-5}
pqos=$bin/pqos
sim=$bin/rdt-sim
for b in "$pqos" "$sim"; do
    [ -x "$b" ] || { echo "error: $b is missing (cargo build -p pqos-cli -p rdt-sim --bins)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/rdt-mmio-startup.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
sim_pid=
cleanup() {
    if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
    umount -l "$mnt" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$sim" mount --model xeon-rdt13 "$mnt" >/dev/null 2>&1 &
sim_pid=$!
for _ in $(seq 200); do [ -e "$mnt/.sim/stats" ] && break; sleep 0.05; done
[ -e "$mnt/.sim/stats" ] || { echo "error: rdt-sim mount did not come up" >&2; exit 1; }

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_runs() { # N CMD... -> median ms, one decimal
    local n=$1; shift
    for _ in $(seq "$n"); do
        local t0 t1
        t0=$(date +%s%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s%N)
        echo $(((t1 - t0) / 100000))
    done | median | awk '{printf "%.1f", $1 / 10}'
}

syscalls() { # CMD... -> `total | pread64 | pwrite64` of one run (strace -f -c), or n/a
    if ! command -v strace >/dev/null 2>&1; then echo 'n/a | n/a | n/a'; return; fi
    strace -f -c -o "$work/strace" "$@" >/dev/null 2>&1 || true
    awk '$NF == "total" {t = $4} $NF == "pread64" {r = $4} $NF == "pwrite64" {w = $4}
         END {printf "%s | %d | %d", t, r, w}' "$work/strace"
}

printf '| where | iface | command | wall ms (median of %s) | syscalls | pread64 | pwrite64 |\n' "$runs"
printf '|---|---|---|---:|---:|---:|---:|\n'
for cmd in "-s" "-e llc:1=0xf" "-m all:2-10 -t 1 -i 1"; do
    for iface in msr mmio; do
        # shellcheck disable=SC2086 # the command's words
        ms=$(time_runs "$runs" "$pqos" --sysroot "$mnt" --iface "$iface" $cmd)
        # shellcheck disable=SC2086
        printf '| mounted | %s | `%s` | %s | %s |\n' "$iface" "$cmd" "$ms" \
            "$(syscalls "$pqos" --sysroot "$mnt" --iface "$iface" $cmd)"
    done
done
for cmd in "-s" "-e llc:1=0xf"; do
    for iface in msr mmio; do
        # shellcheck disable=SC2086
        ms=$(time_runs "$runs" "$pqos" --sim xeon-rdt13 --sim-state "$work/state.json" --iface "$iface" $cmd)
        printf '| in-process | %s | `%s` | %s | | | |\n' "$iface" "$cmd" "$ms"
    done
done
for cmd in "--dump --dump-domain-id=0 --space=mmrc" "--dump --dump-domain-id=0,1 --space=cmrc" \
    "--dump-rmid-regs --dump-rmids=0-127 --dump-rmid-domain-ids=0 --dump-rmid-type=mbm --dump-rmid-mem-regions=0,1" \
    "--dump-rmid-regs --dump-rmids=0-127 --dump-rmid-domain-ids=0 --dump-rmid-type=l3"; do
    # shellcheck disable=SC2086
    ms=$(time_runs "$runs" "$pqos" --sysroot "$mnt" --iface mmio $cmd)
    # shellcheck disable=SC2086
    printf '| mounted | mmio | `%s` | %s | %s |\n' "$cmd" "$ms" \
        "$(syscalls "$pqos" --sysroot "$mnt" --iface mmio $cmd)"
done
