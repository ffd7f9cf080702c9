#!/usr/bin/env bash
# Stage lint: formatting, clippy with warnings as errors, and the engine's
# module graph (no import cycle, layers kept).
source "$(dirname "$0")/lib.sh"
step "lint: cargo fmt, clippy, module graph"
cargo fmt --all -- --check
cargo clippy "${CARGO_PROFILE[@]}" --all-targets -- -D warnings
python3 scripts/module-graph.py | tail -1
