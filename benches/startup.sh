#!/usr/bin/env bash
# Start-up cost of `pqos -d` and `pqos -s` on every built-in model of the simulated platform,
# both interfaces, in-process (`--sim MODEL`) and mounted (`rdt-sim mount` + `--sysroot`).
#
# Mounted: each command first runs on a fresh mount (the kernel has cached no name yet), and
# its FUSE requests are the sum of `DIR/.sim/stats` (crates/rdt-sim/src/fs/stats.rs: lookups,
# getattrs, opens, releases, reads, directory reads...) after the command; `writes` is its
# write(2) calls (strace, when installed). Wall times are the median of RUNS runs (the first,
# cold one included). In-process runs make no FUSE request: only their time is reported.
#
# Usage: benches/startup.sh [BINDIR] (default: target/debug; build first with
#        `cargo build -p pqos-cli -p rdt-sim --bins`, or target/release for release numbers).
# Env:   RUNS (default 5), MODELS (default: every built-in model).
# Needs root and /dev/fuse for the mounted runs (as crates/rdt-sim/tests/fuse.rs).
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
models=${MODELS:-$("$sim" models | sed 's/[: ].*//')}
work=$(mktemp -d /tmp/rdt-startup.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
sim_pid=
cleanup() {
    if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
    umount -l "$mnt" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mount_fresh() { # MODEL
    if [ -n "$sim_pid" ]; then
        kill "$sim_pid"; wait "$sim_pid" 2>/dev/null || true; sim_pid=
        umount -l "$mnt" 2>/dev/null || true
    fi
    "$sim" mount --model "$1" "$mnt" >/dev/null 2>&1 &
    sim_pid=$!
    for _ in $(seq 200); do [ -e "$mnt/.sim/stats" ] && return 0; sleep 0.05; done
    echo "error: rdt-sim mount --model $1 did not come up" >&2
    exit 1
}

ms_now() { date +%s%N; }

# median of the numbers on stdin
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# time_runs N CMD... -> median wall time of N runs in ms (one decimal)
time_runs() {
    local n=$1; shift
    for _ in $(seq "$n"); do
        local t0 t1
        t0=$(ms_now); "$@" >/dev/null 2>&1 || true; t1=$(ms_now)
        echo $(((t1 - t0) / 100000))
    done | median | awk '{printf "%.1f", $1 / 10}'
}

have_strace=false
command -v strace >/dev/null 2>&1 && have_strace=true

printf '| model | where | iface | command | FUSE requests | lookup | getattr | open | read | readdir | write(2) | wall ms (median of %s) |\n' "$runs"
printf '|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for model in $models; do
    for iface in os msr; do
        for cmd in -d -s; do
            mount_fresh "$model"
            echo reset > "$mnt/.sim/stats"
            writes=n/a
            if $have_strace; then
                strace -f -c -e trace=write -o "$work/strace" \
                    "$pqos" --sysroot "$mnt" --iface "$iface" "$cmd" >/dev/null 2>&1 || true
                writes=$(awk '$NF == "write" {print $4}' "$work/strace")
                writes=${writes:-0}
            else
                "$pqos" --sysroot "$mnt" --iface "$iface" "$cmd" >/dev/null 2>&1 || true
            fi
            stats=$(cat "$mnt/.sim/stats")
            get() { awk -v k="$1" '$1 == k {print $2}' <<<"$stats"; }
            total=$(awk '{s += $2} END {print s}' <<<"$stats")
            wall=$(time_runs "$runs" "$pqos" --sysroot "$mnt" --iface "$iface" "$cmd")
            printf '| %s | mounted | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
                "$model" "$iface" "$cmd" "$total" "$(get lookup)" "$(get getattr)" \
                "$(get open)" "$(get read)" "$(get readdir)" "$writes" "$wall"
        done
    done
    for iface in os msr; do
        for cmd in -d -s; do
            state=$work/state-$model.json
            wall=$(time_runs "$runs" "$pqos" --sim "$model" --sim-state "$state" --iface "$iface" "$cmd")
            printf '| %s | in-process | %s | %s | - | - | - | - | - | - | - | %s |\n' \
                "$model" "$iface" "$cmd" "$wall"
        done
    done
done
