#!/usr/bin/env bash
# Builds the tools the rls benchmark and compatibility check need, outside the repository: envoyproxy/ratelimit (the reference RLS) and ghz (the gRPC load generator).
#
# Idempotent: a tool already built from the pinned version is left alone (delete its
# stamp file, or pass --force, to rebuild). Prints what it did and, last, where things are.
#
#   bash bench/rls/build-reference.sh [--force]
#
# Environment:
#   FLOODGATE_BENCH_CACHE  where to build (default ~/.cache/floodgate-bench)
#   RATELIMIT_SRC          a directory holding envoyproxy/ratelimit's source, used as is
#   RATELIMIT_GIT_DIR      a git directory (bare or not) that has RATELIMIT_COMMIT; the
#                          source is taken from it with `git archive`
#   RATELIMIT_COMMIT       the commit to build (default: the pinned one below)
# Without RATELIMIT_SRC or RATELIMIT_GIT_DIR the source is cloned from the project's
# public repository. The Go modules both builds need come through the Go module proxy.
set -euo pipefail

# Pinned so every run of the benchmark measures the same reference and the same load generator.
DEFAULT_RATELIMIT_COMMIT=f2fb15770f7fd1c88ca6c3a1b58ee513917ace96
GHZ_VERSION=v0.93.0
RATELIMIT_REPO_URL=https://github.com/envoyproxy/ratelimit.git

CACHE=${FLOODGATE_BENCH_CACHE:-$HOME/.cache/floodgate-bench}
COMMIT=${RATELIMIT_COMMIT:-$DEFAULT_RATELIMIT_COMMIT}
FORCE=0
for arg in "$@"; do
  case $arg in
    --force) FORCE=1 ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-reference: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done

say() { printf 'build-reference: %s\n' "$*" >&2; }

command -v go >/dev/null || { say "go is not on PATH; install the Go toolchain (go.mod of ratelimit asks for Go ≥ 1.26)"; exit 1; }
GO_VERSION=$(go env GOVERSION)
mkdir -p "$CACHE/bin"

# --- ghz -------------------------------------------------------------------
GHZ_STAMP="$CACHE/bin/.ghz.stamp"
if [[ $FORCE == 0 && -x $CACHE/bin/ghz && -f $GHZ_STAMP && $(cat "$GHZ_STAMP") == "$GHZ_VERSION $GO_VERSION" ]]; then
  say "ghz $GHZ_VERSION: already built ($CACHE/bin/ghz)"
else
  say "ghz $GHZ_VERSION: go install github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
  # A go.mod or GOFLAGS of the caller's must not change what `go install pkg@version` builds.
  (cd "$CACHE" && GOFLAGS= GOBIN="$CACHE/bin" go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION")
  echo "$GHZ_VERSION $GO_VERSION" >"$GHZ_STAMP"
  say "ghz $GHZ_VERSION: built $CACHE/bin/ghz"
fi

# --- envoyproxy/ratelimit --------------------------------------------------
DIR="$CACHE/ratelimit-$COMMIT"
STAMP="$DIR/.stamp"
if [[ $FORCE == 0 && -x $DIR/bin/ratelimit && -f $STAMP && $(cat "$STAMP") == "$COMMIT $GO_VERSION" ]]; then
  say "ratelimit $COMMIT: already built ($DIR/bin/ratelimit)"
else
  rm -rf "$DIR"
  mkdir -p "$DIR/src" "$DIR/bin"
  if [[ -n ${RATELIMIT_SRC:-} ]]; then
    say "ratelimit: copying the source from $RATELIMIT_SRC (RATELIMIT_SRC)"
    cp -a "$RATELIMIT_SRC/." "$DIR/src/"
  else
    GIT_DIR_IN=${RATELIMIT_GIT_DIR:-}
    if [[ -z $GIT_DIR_IN ]]; then
      say "ratelimit: cloning $RATELIMIT_REPO_URL"
      git clone --quiet "$RATELIMIT_REPO_URL" "$DIR/clone"
      GIT_DIR_IN="$DIR/clone/.git"
    fi
    say "ratelimit: source of $COMMIT from $GIT_DIR_IN"
    git --git-dir="$GIT_DIR_IN" archive "$COMMIT" | tar -x -C "$DIR/src"
    rm -rf "$DIR/clone"
  fi
  say "ratelimit: go build ./src/service_cmd (Go $GO_VERSION; modules through the module proxy)"
  # -mod=mod: the repository vendors nothing, and a newer toolchain may want go.sum lines it lacks.
  (cd "$DIR/src" && GOFLAGS=-mod=mod go build -trimpath -o "$DIR/bin/ratelimit" ./src/service_cmd)
  echo "$COMMIT $GO_VERSION" >"$STAMP"
  say "ratelimit: built $DIR/bin/ratelimit"
fi
# The scripts find the reference through this link, so a rebuild at another commit needs no change there.
ln -sfn "ratelimit-$COMMIT" "$CACHE/ratelimit"

say "done:"
say "  ghz        $CACHE/bin/ghz"
say "  ratelimit  $CACHE/ratelimit/bin/ratelimit (commit $COMMIT)"
say "  examples   $CACHE/ratelimit/src/examples/ratelimit/config/"
