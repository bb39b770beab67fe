#!/usr/bin/env bash
# Each instruction set's kernels use only its instructions, with their helpers inlined
# (scripts/check-isa-leaks.sh over this build's objects): the AVX2 products must run on
# an AVX2-only CPU even where the same file also compiles the AVX-VNNI ones.
. "$(dirname "$0")/../lib.sh"
command -v objdump > /dev/null || skip "objdump (binutils) not installed"
[ "$(uname -m)" = x86_64 ] || skip "not x86-64"
bash "$src/scripts/check-isa-leaks.sh" "$build"
rc=$?
[ $rc = 77 ] && skip "no CMake objects in $build"
[ $rc = 0 ] || exit 1
# the check finds a leak where there is one: an "AVX2 product" compiled with AVX-VNNI
mkdir -p "$tmp/o/CMakeFiles/toy_obj.dir/src/kernels" "$tmp/o/CMakeFiles/toy_obj.dir/src/infer"
cp "$build/CMakeFiles/toy_obj.dir/src/infer/attention_cpu.c.o" "$tmp/o/CMakeFiles/toy_obj.dir/src/infer/"
cat > "$tmp/leak.c" << 'C'
#include <immintrin.h>
__attribute__((target("avxvnni,avx2"))) void gemm_q8_0x(__m256i *s, const __m256i *a, const __m256i *b) {
    *s = _mm256_dpbusd_avx_epi32(*s, *a, *b);
}
C
cc -O2 -c "$tmp/leak.c" -o "$tmp/o/CMakeFiles/toy_obj.dir/src/kernels/packed_avx2.c.o" || exit 1
out=$(bash "$src/scripts/check-isa-leaks.sh" "$tmp/o") && { echo "FAIL: a leak passed: $out"; exit 1; }
grep -q "AVX-VNNI or AVX-512 instructions in the AVX2 products: gemm_q8_0x" <<< "$out" || { echo "FAIL: the leak was not named: $out"; exit 1; }
echo "cli_isa_leaks: ok"
