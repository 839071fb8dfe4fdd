#!/usr/bin/env bash
# HTTP benchmark of issue 3, in one run: yaps on SQLite, yaps on Postgres and
# PocketBase (bench/pocketbase, its own Go module) serving the same records.
# Builds both binaries, then runs `yaps bench http`, which starts each server
# on a free loopback port, seeds it, warms up and measures create-yap,
# list-yaps and get-list. Extra arguments go to `yaps bench http`, e.g.
#
#   scripts/bench-http.sh -d 5s -c 8
#   scripts/bench-http.sh --targets yaps-sqlite,pocketbase --json > bench.jsonl
#
# Postgres: YAPS_BENCH_POSTGRES (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable)
# names a server where the bench may CREATE and DROP a scratch database.
# YAPS_BENCH_NICE (default -10, 0 to disable) is the nice value of the load
# generator, the servers and the bench database's Postgres backends, so other
# work on a shared machine disturbs the measurement less (negative values need
# root or CAP_SYS_NICE; without them the bench warns and runs at priority 0).
# See docs/benchmarks.md, section "HTTP".
set -euo pipefail
cd "$(dirname "$0")/.."

out="${YAPS_BENCH_BIN:-$(mktemp -d "${TMPDIR:-/tmp}/yaps-bench-bin.XXXXXX")}"
mkdir -p "$out"
echo "building yaps and the PocketBase peer into $out (the first PocketBase build takes a few minutes)" >&2
go build -o "$out/yaps" ./cmd/yaps
go build -C bench/pocketbase -o "$out/pocketbase" .

exec "$out/yaps" bench http \
	--nice "${YAPS_BENCH_NICE:--10}" \
	--yaps-bin "$out/yaps" \
	--pocketbase-bin "$out/pocketbase" \
	--postgres "${YAPS_BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}" \
	"$@"
