#!/usr/bin/env bash
# The cost of one monitoring poll of 160 single-CPU groups (LLC occupancy, local, total and
# remote bandwidth) through the libpqos C ABI (`pqos_mon_poll`, crates/rdt-capi) beside the
# Rust library (`Backend::poll`), on both interfaces, on a FUSE-mounted simulated Sapphire
# Rapids (`rdt-sim mount`, 160 CPUs): the MSR interface reads DIR/dev/cpu/N/msr, the OS
# interface DIR/sys/fs/resctrl, with real system calls.
#
# For each of the four (interface × API): the test `poll_cost_of_160_groups`
# (crates/rdt-capi/tests/values.rs, ignored by default) prints the mean time of a poll and
# its read/write system calls (/proc/self/io); then `strace -f -c` counts every system call
# of two runs, of R1 and R2 polls, and their difference / (R2 - R1) is the calls of one
# poll, by kind.
#
# Usage: benches/capi_poll.sh (build first: cargo test -p rdt-capi --no-run and
#        cargo build -p rdt-sim --bins). Needs root and /dev/fuse; strace for the counts.
# Env:   R1 (default 10), R2 (default 60).
set -euo pipefail
unset RUST_BACKTRACE

cd "$(dirname "$0")/.."
r1=${R1:-10}
r2=${R2:-60}
sim=target/debug/rdt-sim
test=$(ls -t target/debug/deps/values-* 2>/dev/null | grep -v '\.d$' | head -1 || true)
[ -x "$sim" ] || { echo "error: $sim is missing (cargo build -p rdt-sim --bins)" >&2; exit 1; }
[ -n "$test" ] || { echo "error: no values test binary (cargo test -p rdt-capi --no-run)" >&2; exit 1; }
work=$(mktemp -d /tmp/rdt-capi-poll.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
"$sim" mount --model sapphire-rapids "$mnt" >/dev/null 2>&1 &
sim_pid=$!
cleanup() {
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    umount -l "$mnt" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 200); do [ -e "$mnt/.sim/stats" ] && break; sleep 0.05; done
[ -e "$mnt/.sim/stats" ] || { echo "error: rdt-sim mount did not come up" >&2; exit 1; }

run() { # WHAT ROUNDS [strace output]
    local env=(env RDT_SYSROOT="$mnt" XDG_RUNTIME_DIR="$work" CAPI_BENCH_ONLY="$1" CAPI_BENCH_ROUNDS="$2")
    if [ $# -eq 3 ]; then
        strace -f -c -o "$3" "${env[@]}" "$test" --ignored --exact poll_cost_of_160_groups --nocapture --test-threads=1 >/dev/null 2>&1
    else
        "${env[@]}" "$test" --ignored --exact poll_cost_of_160_groups --nocapture --test-threads=1 2>/dev/null | grep 'of 160 groups'
    fi
}

# "SYSCALL CALLS" of one strace -c table (% time, seconds, usecs/call, calls, [errors,]
# syscall), and "total CALLS"
calls() { awk '$1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ { print $NF, $4 }' "$1"; }

for what in msr-c msr-rust os-c os-rust; do
    run "$what" "$r2"
    if command -v strace >/dev/null; then
        run "$what" "$r1" "$work/a"
        run "$what" "$r2" "$work/b"
        join -a2 -e0 -o 0,1.2,2.2 <(calls "$work/a" | sort) <(calls "$work/b" | sort) |
            awk -v d=$((r2 - r1)) -v w="$what" '{ c = ($3 - $2) / d; if (c >= 0.5) printf "  %s: %.1f %s per poll\n", w, c, $1 }' |
            sort -t: -k2 -rn
    fi
done
