#!/usr/bin/env bash
# Stage unit: every Rust test against the committed fixtures (unit tests,
# store contract on local and in-memory stores, interop, HTTP, CLI, fuzz
# corpora); needs nothing but cargo.
source "$(dirname "$0")/lib.sh"
step "unit: cargo test on the committed fixtures"
cargo test "${CARGO_PROFILE[@]}"
