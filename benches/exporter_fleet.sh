#!/usr/bin/env bash
# rdt-exporter at fleet scale on the mounted simulated platform, under `ulimit -n 1024` (a
# host's default; NOFILE below): N monitor groups on a model, the exporter scraped SCRAPES times one after
# another across several rescans (--rescan-interval 2), then ROUNDS rounds of 20 concurrent
# scrapes. Reported per case:
# - whether every group was in every scrape and every scrape said rdt_scrape_complete 1;
# - FUSE reads per (group, L3 domain, event) per scrape, from DIR/.sim/stats (every read of
#   the sequential scrapes, cpus_list/tasks/schemata and rescans included, over
#   groups x domains x events x scrapes; target <= 1.1);
# - sequential scrape wall time p50/p99 (curl's time_total), the exporter's VmRSS and VmHWM;
# - p99 of the concurrent scrapes, and its ratio to the sequential p50 (target <= 1.5).
#
# Usage: benches/exporter_fleet.sh [BINDIR] (default target/debug; build first with
#        `cargo build -p rdt-exporter -p rdt-sim --bins`, or use target/release).
# Env:   CASES (default "turin-dump:6.17:1000 turin-dump:6.17:4000 genoa:6.19:255",
#        MODEL:KERNEL:GROUPS),
#        SCRAPES (default 20), ROUNDS (default 5), NOFILE (default 1024: the `ulimit -n`;
#        a higher one, up to the caller's hard limit, keeps more files open, to compare).
# Measured (release, 2 shared cores, SCRAPES=3 ROUNDS=1, a build running alongside; the
# 64-CPU Turin model was then named `turin`, and genoa's CPUs were numbered CCD by CCD): turin
# 1000 groups p50 5.1 s, 4000 groups 31.5 s, genoa 255 groups 6.8 s; reads per (group,
# domain, event) 1.08, 1.08, 1.03; 20 concurrent p99 / p50 0.95, 1.07, 1.18. The simulated
# platform's FUSE service dominates (its lookups listed every group before: 1000 groups took
# 39.7 s and 4000 did not finish in 300 s).
# Needs root, /dev/fuse and curl. Not a CI test: it reports numbers.
set -euo pipefail
unset RUST_BACKTRACE

cd "$(dirname "$0")/.."
bin=${1:-target/debug}
cases=${CASES:-turin-dump:6.17:1000 turin-dump:6.17:4000 genoa:6.19:255}
scrapes=${SCRAPES:-20}
rounds=${ROUNDS:-5}
nofile=${NOFILE:-1024}
sim=$bin/rdt-sim
exporter=$bin/rdt-exporter
for b in "$sim" "$exporter"; do
    [ -x "$b" ] || { echo "error: $b is missing (cargo build -p rdt-exporter -p rdt-sim --bins)" >&2; exit 1; }
done
command -v curl >/dev/null || { echo "error: curl is needed" >&2; exit 1; }
work=$(mktemp -d /tmp/rdt-fleet.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
sim_pid=
exp_pid=
stop() {
    if [ -n "$exp_pid" ]; then kill "$exp_pid" 2>/dev/null || true; wait "$exp_pid" 2>/dev/null || true; exp_pid=; fi
    if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; sim_pid=; fi
    umount -l "$mnt" 2>/dev/null || true
}
cleanup() { stop; rm -rf "$work"; }
trap cleanup EXIT

# percentile P of the numbers on stdin (nearest rank)
pct() { sort -g | awk -v p="$1" '{a[NR]=$1} END {i=int((NR*p+99)/100); if (i<1) i=1; printf "%.4f", a[i]}'; }
stat_of() { awk -v k="$1" '$1 == k {print $2}' "$mnt/.sim/stats"; }

printf '| model | kernel | groups | domains x events | every group, complete | reads per (group, domain, event) | scrape p50 s | p99 s | VmRSS KiB | VmHWM KiB | 20 concurrent p99 s | / p50 |\n'
printf '|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n'
for c in $cases; do
    IFS=: read -r model kernel groups <<<"$c"
    "$sim" mount --model "$model" --kernel "$kernel" "$mnt" >"$work/sim.log" 2>&1 &
    sim_pid=$!
    for _ in $(seq 200); do [ -e "$mnt/.sim/stats" ] && break; sleep 0.05; done
    r=$mnt/sys/fs/resctrl
    for i in $(seq 1 "$groups"); do mkdir "$r/mon_groups/g$i"; done
    domains=$(ls -d "$r"/mon_data/mon_L3_* | wc -l)
    events=$(grep -cxE 'llc_occupancy|mbm_total_bytes|mbm_local_bytes' "$r/info/L3_MON/mon_features")
    port=$((20000 + RANDOM % 20000))
    bash -c "ulimit -n $nofile"' && exec "$0" "$@"' "$exporter" --sysroot "$mnt" \
        --listen "127.0.0.1:$port" --rescan-interval 2 2>"$work/exporter.log" &
    exp_pid=$!
    url=http://127.0.0.1:$port/metrics
    for _ in $(seq 600); do curl -sf -o /dev/null --max-time 60 "$url" && break; sleep 0.1; done
    want=$((groups + 1)) # and the root
    ok=yes
    echo reset >"$mnt/.sim/stats"
    : >"$work/seq"
    for _ in $(seq "$scrapes"); do
        if ! curl -sf --max-time 300 -o "$work/body" -w '%{time_total}\n' "$url" >>"$work/seq"; then
            ok="no (a scrape failed)"
            continue
        fi
        got=$(grep '^rdt_llc_occupancy_bytes{' "$work/body" | sed 's/.*group="\([^"]*\)".*/\1/' | sort -u | wc -l)
        grep -qx 'rdt_scrape_complete 1' "$work/body" || ok="no (incomplete)"
        [ "$got" -eq "$want" ] || ok="no ($got of $want groups)"
        sleep 0.5 # rescans every 2 s: several in the run
    done
    reads=$(stat_of read)
    per=$(awk -v r="$reads" -v g="$want" -v d="$domains" -v e="$events" -v s="$scrapes" \
        'BEGIN {printf "%.3f", r / (g * d * e * s)}')
    p50=$(pct 50 <"$work/seq")
    p99=$(pct 99 <"$work/seq")
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$exp_pid/status")
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$exp_pid/status")
    : >"$work/conc"
    for _ in $(seq "$rounds"); do
        for _ in $(seq 20); do
            { curl -sf --max-time 300 -o /dev/null -w '%{time_total}\n' "$url" || echo failed; } >>"$work/conc" &
        done
        wait $(jobs -p | grep -vx "$exp_pid" | grep -vx "$sim_pid") 2>/dev/null || true
    done
    grep -q failed "$work/conc" && ok="no (a concurrent scrape failed)"
    cp99=$(grep -v failed "$work/conc" | pct 99)
    ratio=$(awk -v a="$cp99" -v b="$p50" 'BEGIN {printf "%.2f", a / b}')
    printf '| %s | %s | %s | %s x %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
        "$model" "$kernel" "$groups" "$domains" "$events" "$ok" "$per" "$p50" "$p99" "$rss" "$hwm" "$cp99" "$ratio"
    grep -v '^rdt-exporter: serving' "$work/exporter.log" | head -5 >&2 || true
    stop
done
