#!/usr/bin/env bash
# Opens a trace of elite-rt's schedule in the trace viewer of chrome://tracing (headless Chromium,
# driven by playwright-core), checks what the viewer shows and takes a screenshot; see
# scripts/trace-view.mjs for the checks and options, docs/tracing.md for an example.
#
#   scripts/trace-view.sh TRACE.json OUT.png [--start US] [--span US] [--width PX] [--height PX]
#
# Optional tooling, not a build step. Needs node (18 or later) with npm, and Chromium (Debian:
# apt-get install chromium). playwright-core is installed once into the cache directory
# ($ELITE_TRACE_VIEW_CACHE, default ~/.cache/elite-trace-view), never into the repository.
# The viewer: chrome://tracing where the Chromium has it. Debian's Chromium is built without it
# (its trace viewer is catapult's generated JavaScript); there, CATAPULT=<a checkout of
# https://github.com/catapult-project/catapult> makes the same page from catapult's source
# (tracing/bin/generate_about_tracing_contents, Python 3, about 20 s, kept in the cache) and
# opens it from a file. CHROMIUM=<path> chooses the browser.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${ELITE_TRACE_VIEW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elite-trace-view}
mkdir -p "$cache"
if [ ! -d "$cache/node_modules/playwright-core" ]; then
    echo "installing playwright-core into $cache" >&2
    npm install --prefix "$cache" --no-audit --no-fund playwright-core@1 >&2
fi
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$chromium" ]; then
    echo "no Chromium found: install it (Debian: apt-get install chromium) or set CHROMIUM=<path>" >&2
    exit 2
fi
page=chrome://tracing
if [ -n "${CATAPULT:-}" ]; then
    rev=$(git -C "$CATAPULT" rev-parse --short HEAD 2>/dev/null || echo source)
    out="$cache/about-tracing-$rev"
    if [ ! -f "$out/tracing.js" ]; then
        echo "generating chrome://tracing's page from $CATAPULT into $out" >&2
        python3 "$CATAPULT/tracing/bin/generate_about_tracing_contents" --outdir "$out" >&2
        # The page loads its script as tracing.js, the name chrome://tracing serves it under.
        cp "$out/about_tracing.js" "$out/tracing.js"
    fi
    page="file://$out/about_tracing.html"
fi
NODE_PATH="$cache/node_modules" exec node "$here/trace-view.mjs" "$@" --page "$page" --chromium "$chromium"
