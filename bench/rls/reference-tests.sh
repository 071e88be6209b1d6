#!/usr/bin/env bash
# Runs envoyproxy/ratelimit's own integration and config tests against the reference (control) and against floodgate.
#
#   bash bench/rls/reference-tests.sh [--no-build] [--side reference|floodgate|both]
#
# The reference's source comes from bench/rls/build-reference.sh (same environment:
# FLOODGATE_BENCH_CACHE, RATELIMIT_SRC, RATELIMIT_GIT_DIR, RATELIMIT_COMMIT). Its test files
# are run as they are, from that source; nothing of them is copied into this repository.
# For the floodgate side bench/rls/reference-tests-overlay.sh generates, in the cache directory,
# Go build overlays (`go test -overlay`) that change only the runner:
#   - integration (test/integration, Redis cases): the tests' gRPC client dials
#     `floodgate serve --grpc` (this checkout's dist/, on a fresh redis-server) instead of the
#     in-process reference, which still runs beside it for the tests' reload hooks. Cases with
#     the reference's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false (its default) dial a second
#     floodgate with grpc.countRefused: true, the documented counterpart. Checks that read the
#     reference's in-process statistics store are skipped by name, with the reason printed.
#   - config (test/config): every config the tests load is also loaded by floodgate
#     (`floodgate serve --grpc` on it, memory store); a config one accepts and the other refuses
#     fails the test, and every limit lookup (GetLimit) is answered by floodgate (a check-only
#     ShouldRateLimit: hits_addend 0), its requests_per_unit, unit, name and unlimited replacing
#     the reference's. Statistics names stay the reference's (documented difference).
# Prints per side: tests passed/failed, every failing test and the failing check's place and
# message, and the skipped checks with their reason. Exit 1 when the floodgate side has a failure.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${FLOODGATE_BENCH_CACHE:-$HOME/.cache/floodgate-bench}
BUILD=1
SIDE=both
while [[ $# -gt 0 ]]; do
  case $1 in
    --no-build) BUILD=0 ;;
    --side) SIDE=$2; shift ;;
    -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reference-tests: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done
say() { printf 'reference-tests: %s\n' "$*" >&2; }

# The reference's integration cases that exercise the gRPC service on a plain Redis. The others need what
# the reference's Makefile sets up (stunnel for Redis TLS, a Redis Cluster, Sentinels, memcached) or an xDS
# config source, and only change the reference's backend or config source, not what a client sees.
INTEGRATION=(TestBasicConfig TestBasicConfig_ExtraTags TestBasicAuthConfig TestBasicReloadConfig TestShareThreshold)
INTEGRATION_TESTS="^($(IFS='|'; echo "${INTEGRATION[*]}"))\$"
# Documented differences the floodgate side skips, as NAME=REASON.
SKIPPED_CONFIG=('TestDomainMerge=MERGE_DOMAIN_CONFIG=true has no counterpart: one domain per file, the same domain in two files is refused (docs/rls.md, Switching)')
NOT_RUN='TestBasicTLSConfig, Test_mTLS (stunnel, Redis TLS), TestBasicAuthConfigWithRedisCluster/Sentinel (the Makefile'"'"'s cluster and sentinels), TestBasicConfigMemcache, TestConfigMemcacheWithMaxIdleConns, TestMultiNodeMemcache (memcached), TestXdsProvider* (xDS config source: floodgate reads files), TestReloadGRPCServerCerts (floodgate reads certificates once: documented)'

bash "$REPO/bench/rls/build-reference.sh" >&2
SRC="$CACHE/ratelimit/src"
WORK="$CACHE/reference-tests"
mkdir -p "$WORK"
if [[ $BUILD == 1 && $SIDE != reference ]]; then (cd "$REPO" && npm run build >&2); fi

# --- the overlays (generated into the cache directory; the source stays as it is) ----------------------
bash "$REPO/bench/rls/reference-tests-overlay.sh" "$SRC" "$WORK"

# --- running and summing up -------------------------------------------------------------------------------
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap cleanup EXIT

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# summarize NAME LOG: leaf tests passed/failed, every failing test with its failing checks (place, message), skipped checks.
summarize() {
  python3 - "$1" "$2" <<'PY'
import re, sys
side, log = sys.argv[1], sys.argv[2]
lines = open(log, errors="replace").read().splitlines()
result, order, fails, skips, broken = {}, [], {}, {}, []
i = 0
while i < len(lines):
    line = lines[i]
    m = re.match(r"^\s*--- (PASS|FAIL|SKIP): (\S+)", line)
    if m:
        if m.group(2) not in result:
            order.append(m.group(2))
        result[m.group(2)] = m.group(1)
    elif re.match(r"^\s*Error Trace:", line):
        trace, msg, test, extra = [line.split()[-1]], "", "", []
        i += 1
        while i < len(lines) and re.match(r"^\s+\S+\.go:\d+\s*$", lines[i]):
            trace.append(lines[i].split()[-1])
            i += 1
        while i < len(lines) and lines[i].startswith((" ", "\t")) and not re.match(r"^\s*(=== |--- |\S+\.go:\d+: *$)", lines[i]):
            t = lines[i].strip()
            if t.startswith("Error:"):
                msg = t[len("Error:"):].strip()
            elif t.startswith("Test:"):
                test = t[len("Test:"):].strip()
            elif t.startswith("Messages:"):
                extra.append(t[len("Messages:"):].strip())
            elif extra:
                extra.append(t)
            elif msg and not test:
                msg += " " + t
            i += 1
        where = next((x for x in trace if "_test.go" in x), trace[0]).rsplit("/", 1)[-1]
        fails.setdefault(test, []).append(f"{where}: {' '.join(x for x in [msg] + extra if x)[:500]}")
        continue
    elif line.startswith("SKIPPED-CHECK "):
        _, test, where, reason = line.split(" ", 3)
        places = skips.setdefault(reason, {})
        places[where.rstrip(":")] = places.get(where.rstrip(":"), 0) + 1
    elif line.startswith("panic:") or "[build failed]" in line or line.startswith("# "):
        broken.append(line)
    i += 1
leaves = [n for n in order if not any(o.startswith(n + "/") for o in order)]
count = lambda r: sum(1 for n in leaves if result[n] == r)
print(f"{side}: {count('PASS')} passed, {count('FAIL')} failed" + (f", {count('SKIP')} skipped" if count("SKIP") else ""))
for n in (n for n in leaves if result[n] == "FAIL"):
    print(f"    FAIL {n}")
    for f in dict.fromkeys(fails.get(n, [])):
        print(f"        {f}")
for b in broken[:5]:
    print(f"    {b}")
if not leaves:
    print(f"    (no test ran: see {log})")
for reason, places in sorted(skips.items()):
    print(f"    {sum(places.values())} checks skipped, {reason}:")
    line_of = lambda w: int(w.rsplit(":", 1)[1]) if w.rsplit(":", 1)[-1].isdigit() else 0
    print("        " + ", ".join(f"{w} (x{n})" if n > 1 else w for w, n in sorted(places.items(), key=lambda p: (p[0], line_of(p[0])) if not line_of(p[0]) else ("", line_of(p[0])))))
PY
}

run_go() { # LOG [go test args...]
  local log=$1; shift
  (cd "$SRC" && GOFLAGS=-mod=mod PROJECT_DIR="$SRC" go test -count=1 -v "$@") >>"$log" 2>&1 || true
}

RESULT=0
if [[ $SIDE != floodgate ]]; then
  : >"$WORK/reference-integration.log"
  : >"$WORK/reference-config.log"
  say "reference: integration cases (in-process, its own redis-servers on 6380/6383/6384/6385)"
  run_go "$WORK/reference-integration.log" -tags integration -run "$INTEGRATION_TESTS" ./test/integration/
  say "reference: config cases"
  run_go "$WORK/reference-config.log" ./test/config/
fi
start_floodgate() { # NAME EXTRA-GRPC-YAML -> sets FG_ADDR
  local port http
  port=$(free_port)
  http=$(free_port)
  printf 'listen: 127.0.0.1:%s\ngrpc:\n  listen: 127.0.0.1:%s\n  config: %s\n%s\n' "$http" "$port" \
    "$SRC/test/integration/runtime/current/ratelimit/config" "$2" >"$WORK/$1.yaml"
  node "$REPO/bin/floodgate.mjs" serve --config "$WORK/$1.yaml" --redis "redis://127.0.0.1:$RPORT" >>"$WORK/$1.log" 2>&1 &
  PIDS+=($!)
  wait_port "$port" || { say "floodgate $1 did not start: $(tail -5 "$WORK/$1.log")"; exit 1; }
  FG_ADDR=127.0.0.1:$port
}
if [[ $SIDE != reference ]]; then
  : >"$WORK/floodgate-integration.log"
  : >"$WORK/floodgate-config.log"
  : >"$WORK/floodgate.log"
  : >"$WORK/floodgate-count-refused.log"
  # A fresh Redis and fresh servers for each test function, as the reference's runner starts its Redis per function.
  for test in "${INTEGRATION[@]}"; do
    RPORT=$(free_port)
    redis-server --port "$RPORT" --save '' --appendonly no >>"$WORK/redis.log" 2>&1 &
    PIDS+=($!)
    wait_port "$RPORT" || { say "redis-server did not start"; exit 1; }
    start_floodgate floodgate ''
    TARGET=$FG_ADDR
    start_floodgate floodgate-count-refused '  countRefused: true'
    TARGET_CR=$FG_ADDR
    say "floodgate: $test against $TARGET (countRefused: true: $TARGET_CR)"
    FLOODGATE_RLS_TARGET=$TARGET FLOODGATE_RLS_TARGET_COUNT_REFUSED=$TARGET_CR run_go "$WORK/floodgate-integration.log" \
      -overlay "$WORK/overlay-integration.json" -tags integration -run "^$test\$" ./test/integration/
    cleanup
  done
  say "floodgate: config cases"
  skip=()
  for entry in "${SKIPPED_CONFIG[@]}"; do
    skip+=("${entry%%=*}")
    echo "SKIPPED-CHECK ${entry%%=*} ${entry%%=*}: ${entry#*=}" >>"$WORK/floodgate-config.log"
  done
  FLOODGATE_BIN="$REPO/bin/floodgate.mjs" FLOODGATE_WORK="$WORK/config-runs" run_go "$WORK/floodgate-config.log" \
    -overlay "$WORK/overlay-config.json" -skip "^($(IFS='|'; echo "${skip[*]}"))\$" ./test/config/
fi

echo
echo "envoyproxy/ratelimit's own tests ($(cat "$CACHE/ratelimit/.stamp" | cut -c1-12)), logs in $WORK"
for side in reference floodgate; do
  [[ -f $WORK/$side-integration.log && ($SIDE == both || $SIDE == "$side") ]] || continue
  summarize "$side integration" "$WORK/$side-integration.log"
  summarize "$side config" "$WORK/$side-config.log"
  if [[ $side == floodgate ]]; then
    for log in "$WORK/$side-integration.log" "$WORK/$side-config.log"; do
      if grep -q -- '--- FAIL' "$log" || ! grep -q -- '--- PASS' "$log"; then RESULT=1; fi
    done
  fi
done
echo "not run: $NOT_RUN"
echo "not run: integration-test/scripts (Envoy-fronted; needs an envoy binary: $(command -v envoy || echo 'none installed'))"
exit $RESULT
