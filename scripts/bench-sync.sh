#!/usr/bin/env bash
# Sync benchmark of issue 4, in one run: `yaps serve` on SQLite (every update
# persisted before it is relayed) against the npm peers @y/websocket-server
# 0.1.1 and @hocuspocus/server 4.7.0 (in memory), on the workloads
# 1 room × 20 clients × 100 updates and 50 rooms × 4 clients × 50 updates,
# then 10,000 idle synced connections per server. Builds yaps, installs the
# npm peers when interop/node_modules is missing, raises the open-files
# limit and runs `yaps bench sync`. Extra arguments go to it, e.g.
#
#   scripts/bench-sync.sh --rounds 3                 # median of 3 fresh runs per cell
#   scripts/bench-sync.sh -R 10 -C 8 -U 200 --idle 0 # a custom workload, no idle part
#   scripts/bench-sync.sh --window 0                 # burst: no in-flight limit
#   scripts/bench-sync.sh --json > sync.jsonl        # JSON lines on stdout, table on stderr
#
# See docs/benchmarks.md, section "Sync".
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f interop/node_modules/@hocuspocus/server/package.json ] || [ ! -f interop/node_modules/@y/websocket-server/package.json ]; then
	echo "installing the npm peers (npm ci in interop/)" >&2
	(cd interop && npm ci --no-audit --no-fund)
fi

# 10,000 idle connections need about 11,000 descriptors in the client and in
# the server; the servers inherit this limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 12000 ]; then
	echo "warning: open files limited to $(ulimit -n); pass --idle N below that or raise the hard limit" >&2
fi

out="${YAPS_BENCH_BIN:-$(mktemp -d "${TMPDIR:-/tmp}/yaps-bench-bin.XXXXXX")}"
mkdir -p "$out"
echo "building yaps into $out" >&2
go build -o "$out/yaps" ./cmd/yaps

exec "$out/yaps" bench sync --yaps "$out/yaps" --interop "$PWD/interop" "$@"
