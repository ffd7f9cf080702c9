#!/usr/bin/env bash
# Stage fuzz: libFuzzer on each target for FUZZ_SECONDS (15) from a copy of
# its committed corpus; a crash, leak or timeout fails the stage.
source "$(dirname "$0")/lib.sh"
command -v cargo-fuzz >/dev/null || { echo "no cargo-fuzz: run scripts/ci/setup.sh"; exit 1; }
step "fuzz smoke: libFuzzer on each target for ${FUZZ_SECONDS:=15} s"
for target in select zarr_json shard_index codecs wms_params edr_coords dap2_constraint dap4_constraint kerchunk; do
  rm -rf "$WORK/fuzz/$target"
  mkdir -p "$WORK/fuzz/$target"
  cp fuzz/corpus/$target/* "$WORK/fuzz/$target/"
  # Stable toolchain: RUSTC_BOOTSTRAP lets cargo-fuzz use the sanitizer flags.
  if ! (cd fuzz && RUSTC_BOOTSTRAP=1 CARGO_PROFILE_RELEASE_DEBUG=0 cargo fuzz run -O "$target" "$WORK/fuzz/$target" -- \
      -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 >"$WORK/fuzz-$target.log" 2>&1); then
    tail -40 "$WORK/fuzz-$target.log"; echo "fuzz target $target failed (inputs in fuzz/artifacts/$target)"; exit 1
  fi
  echo "$target: $(grep -E '^Done' "$WORK/fuzz-$target.log")"
done
