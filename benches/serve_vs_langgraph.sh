#!/usr/bin/env bash
# runs/wait of the research planner: `planwright serve` (SQLite, memory) against `langgraph dev` serving
# benches/anchors/langgraph_research_shape (same 14 supersteps, 20 node executions, no model).
# serve is driven by `planwright load --target` (Rust; one goal, the `replan` one; every fifth
# conversation pauses at review_plan and is resumed: a second runs/wait); langgraph dev by
# lgclient.py (Python; at ~10-30 runs/s it is not the bottleneck). Cells alternate; run it 3 times
# (ROUNDS) and take medians. Needs: cargo build --release --bin planwright; a venv with
# "langgraph-cli[inmem]" and httpx at $VENV.
set -euo pipefail
cd "$(dirname "$0")/.."
PW=${PW:-target/release/planwright}; VENV=${VENV:-target/lgdev/venv}; ROUNDS=${ROUNDS:-2}
SHAPE=benches/anchors/langgraph_research_shape; OUT=${OUT:-target/serve_vs_langgraph}
rm -rf "$OUT" && mkdir -p "$OUT"; pids=(); trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
"$PW" serve --addr 127.0.0.1:18981 --checkpoint "sqlite:$OUT/s.sqlite" >"$OUT/sq.log" 2>&1 & pids+=($!); SQ=$!
"$PW" serve --addr 127.0.0.1:18982 --checkpoint memory: >"$OUT/mem.log" 2>&1 & pids+=($!); MEM=$!
(cd "$SHAPE" && LANGSMITH_TRACING=false LANGGRAPH_CLI_NO_ANALYTICS=1 exec "$OLDPWD/$VENV/bin/langgraph" dev \
    --host 127.0.0.1 --port 18983 --no-browser --no-reload) >"$OUT/lg.log" 2>&1 & pids+=($!); LG=$!
for p in 18981 18982 18983; do for _ in $(seq 120); do curl -sf "127.0.0.1:$p/ok" >/dev/null && break; sleep 0.5; done; done
serve_cell() { # label url pid C N
    local k0 k1; k0=$(awk '{print $14+$15}' "/proc/$3/stat")
    "$PW" load --target "$2" --graph research --goals "$SHAPE/replan_goal.json" --conversations "$5" \
        --concurrency "$4" --report "$OUT/r.json" --quiet >/dev/null
    k1=$(awk '{print $14+$15}' "/proc/$3/stat")
    python3 -c "import json;d=json.load(open('$OUT/r.json'));l=d['conversation_latency_ms'];print(json.dumps({'label':'$1','concurrency':$4,'runs':d['completed'],'runs_per_s':round(d['conversations_per_sec'],1),'p50_ms':l['p50'],'p99_ms':l['p99'],'server_cpu_ms_per_run':round(($k1-$k0)*1000/$(getconf CLK_TCK)/d['completed'],2)}))"
}
uptime | tee "$OUT/conditions.txt"
for _ in $(seq "$ROUNDS"); do
    for c in 1 16; do
        n=$([ "$c" = 1 ] && echo 300 || echo 1500); s=$([ "$c" = 1 ] && echo 8 || echo 10)
        serve_cell "serve sqlite" http://127.0.0.1:18981 "$SQ" "$c" "$n"
        serve_cell "serve memory" http://127.0.0.1:18982 "$MEM" "$c" "$n"
        "$VENV/bin/python" "$SHAPE/lgclient.py" http://127.0.0.1:18983 "$c" "$s" "$LG"
    done
done | tee "$OUT/cells.jsonl"
uptime | tee -a "$OUT/conditions.txt"
