#!/usr/bin/env bash
# Instruction sets' intrinsics live in src/kernels/ only (scripts/check-intrinsics.sh),
# and the check names a file that breaks the rule.
. "$(dirname "$0")/../lib.sh"
out=$(bash "$src/scripts/check-intrinsics.sh" "$src") || die "intrinsics outside src/kernels/: $out"
mkdir -p "$tmp/src/infer" "$tmp/src/kernels" "$tmp/tools"
printf '#include <immintrin.h>\nfloat f(void) { return 0; }\n' > "$tmp/src/kernels/ok.c"
printf 'static void g(float *y) { __m256 v = _mm256_setzero_ps(); (void)v; (void)y; }\n' > "$tmp/src/infer/bad.c"
out=$(bash "$src/scripts/check-intrinsics.sh" "$tmp") && die "a file with intrinsics in src/infer/ passed"
grep -q 'src/infer/bad.c:1:' <<< "$out" || die "the file was not named: $out"
grep -q 'src/kernels/ok.c' <<< "$out" && die "src/kernels/ was refused: $out"
finish
