#!/usr/bin/env bash
# bench-crdt.sh replays an editing trace into the Go Yjs engine, Yjs 13.6 and
# ywasm, side by side, and checks that real Yjs decodes Go's update to the
# trace's endContent.
#
#   scripts/bench-crdt.sh [TRACE]   (default /work/shared/traces/automerge-paper.json.gz)
#
# All engines replay with the same client id (CLIENT_ID, default 3735928559)
# so their encoded updates can be compared byte for byte. SKIP_YWASM=1 leaves
# out ywasm (its replay takes about a minute).
#
# Needs go, node and interop/node_modules. Each engine runs in its own process.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
trace=${1:-/work/shared/traces/automerge-paper.json.gz}
trace=$(cd "$(dirname "$trace")" && pwd)/$(basename "$trace")
client_id=${CLIENT_ID:-3735928559}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "trace: $trace" >&2
(cd "$root" && go build -o "$tmp/yaps" ./cmd/yaps)

"$tmp/yaps" bench crdt --trace "$trace" --client-id "$client_id" --out "$tmp/go.bin" >"$tmp/go.json"
(cd "$root/interop" && node --expose-gc bench/crdt.mjs --trace "$trace" --engine yjs --client-id "$client_id" --out "$tmp/node") >"$tmp/yjs.json"
engines="go yjs"
if [ "${SKIP_YWASM:-0}" != 1 ]; then
	(cd "$root/interop" && node --expose-gc bench/crdt.mjs --trace "$trace" --engine ywasm --client-id "$client_id" --out "$tmp/node") >"$tmp/ywasm.json"
	engines="go yjs ywasm"
fi

# Real Yjs must decode Go's update to endContent.
check_status=0
(cd "$root/interop" && node bench/crdt.mjs --trace "$trace" --check "$tmp/go.bin") >"$tmp/check.json" || check_status=$?

printf '%-7s %8s %10s %10s %10s %8s %8s %9s\n' engine ops apply_ms encode_ms decode_ms heap_mb live_mb bytes
for e in $engines; do
	jq -r --arg e "$e" '[$e, .ops, .apply_ms, .encode_ms, .decode_ms, .heap_mb, .live_mb, .bytes] | @tsv' "$tmp/$e.json" |
		awk -F'\t' '{ printf "%-7s %8s %10s %10s %10s %8s %8s %9s\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
done

go_bytes=$(jq .bytes "$tmp/go.json")
yjs_bytes=$(jq .bytes "$tmp/yjs.json")
echo "(heap_mb: peak heap in use during the replay; live_mb: held after it, post-GC; both above the pre-replay baseline)"
echo
echo "update size: go $go_bytes bytes, yjs $yjs_bytes bytes (yjs reference for automerge-paper: 311038)"
echo "yjs decodes go's update to endContent: $(jq .ok "$tmp/check.json") (yjs decode of go update: $(jq .decode_ms "$tmp/check.json") ms)"
sum() { sha256sum "$1" | cut -c1-16; }
line="sha256 (client id $client_id): go $(sum "$tmp/go.bin")  yjs $(sum "$tmp/node.yjs.bin")"
if [ -f "$tmp/node.ywasm.bin" ]; then line="$line  ywasm $(sum "$tmp/node.ywasm.bin")"; fi
echo "$line"
if cmp -s "$tmp/go.bin" "$tmp/node.yjs.bin"; then
	echo "go's update is byte-identical to yjs's"
else
	echo "go's update differs from yjs's (content is what matters; see the decode check)"
fi
if [ "$check_status" -ne 0 ]; then
	echo "FAIL: real Yjs did not reproduce endContent from Go's update" >&2
	exit 1
fi
