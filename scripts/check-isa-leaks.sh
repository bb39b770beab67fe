#!/usr/bin/env bash
# check-isa-leaks.sh BUILD_DIR — checks, in the disassembly of a build's objects, that
# each instruction set's kernels use only their own instructions and that their loops
# are whole (every helper inlined):
#   packed_avx2.c: the AVX2 products (every function but *_vnni and ty_packed_avxvnni)
#     have no VNNI (vpdpbusd, vpdpwssd, {vex}), no EVEX and no zmm: they run on AVX2-only
#     CPUs, where a compiler allowed AVX-VNNI would have fused vpmaddwd + vpaddd into
#     vpdpwssd; the AVX-VNNI products use vpdpbusd; the products call nothing but
#     ty_packed_decode_streams.
#   attention_cpu.c: the scalar tasks use no ymm or zmm, the AVX2 tasks no zmm, and the
#     tasks call no function of their own file but attn_fold.
#   gemm_avx512_bf16.c: the pair kernel is vdpbf16ps, 24 per pair of k (12 rows x 2
#     vectors) once its loops are unrolled, and calls nothing.
# The checks of calls need an optimized build without sanitizers (a Debug or sanitized
# build inlines nothing); elsewhere only the instructions are checked.
# Prints one line per failed check; exits 1 if any, 0 if none.
set -u
build=${1:?usage: check-isa-leaks.sh BUILD_DIR}
objs="$build/CMakeFiles/toy_obj.dir/src"
fail=0
inlined=1
cache="$build/CMakeCache.txt"
case "$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache" 2>/dev/null)" in
Release | RelWithDebInfo | MinSizeRel) grep -q '^TOY_SANITIZE:BOOL=ON' "$cache" && inlined=0 ;;
*) inlined=0 ;;
esac
die() { echo "FAIL: $*"; fail=1; }

# fn_lines OBJ: "FUNCTION<TAB>LINE" for each instruction line of each function, with the
# relocation target of a call (its callee) appended to the call's line
fn_lines() {
    objdump -dr --no-show-raw-insn "$1" | awk '
        { gsub(/\t/, " ") }
        /^[0-9a-f]+ <.*>:$/ { f = substr($2, 2, length($2) - 3); next }
        /R_X86_64_(PLT32|PC32)/ { if (pending != "") print f "\t" pending " -> " $NF; pending = ""; next }
        { if (pending != "") print f "\t" pending; pending = "" }
        /^ +[0-9a-f]+:/ && f != "" { if ($0 ~ /call/ && $0 !~ /\*/) pending = $0; else print f "\t" $0 }'
}

packed="$objs/kernels/packed_avx2.c.o"
[ -f "$packed" ] || { echo "no $packed (a CMake build of x86-64 is needed)"; exit 77; }
lines=$(fn_lines "$packed")
leaks=$(awk -F'\t' '$1 !~ /_vnni$/ && $1 != "ty_packed_avxvnni" && $2 ~ /vpdp|\{vex\}|\{evex\}|zmm/' <<< "$lines")
[ -z "$leaks" ] || die "AVX-VNNI or AVX-512 instructions in the AVX2 products: $(head -5 <<< "$leaks")"
if [ $inlined = 1 ]; then
    for f in gemm_q8_0x_vnni gemm_q4_0x_vnni; do
        grep -q "^$f	.*vpdpbusd" <<< "$lines" || die "$f has no vpdpbusd"
    done
else
    grep -q "_vnni	.*vpdpbusd" <<< "$lines" || die "no vpdpbusd in the AVX-VNNI functions"
fi
[ $inlined = 1 ] && calls=$(awk -F'\t' '$1 ~ /^gemm_/ && $2 ~ /call/ && $2 !~ /-> ty_packed_decode_streams/' <<< "$lines")
[ -z "${calls:-}" ] || die "calls in the packed products: $(head -5 <<< "$calls")"
grep -q "^gemm_q8_0x	" <<< "$lines" || die "no gemm_q8_0x in $packed (renamed? update this check)"

attn="$objs/infer/attention_cpu.c.o"
lines=$(fn_lines "$attn")
wide=$(awk -F'\t' '($1 ~ /^attention_.*_scalar$/ && $2 ~ /[yz]mm/) || ($1 ~ /^attention_.*_avx2$/ && $2 ~ /zmm/)' <<< "$lines")
[ -z "$wide" ] || die "wider vectors than the task's set in attention_cpu.c: $(head -5 <<< "$wide")"
# attn_fold, once per segment of 256 cells, may stay a call
own=$(objdump -t "$attn" | awk '$2 == "l" && $3 == "F" && $NF !~ /^attn_fold/ { print $NF }')
[ $inlined = 1 ] || own=
for fn in $own; do
    c=$(awk -F'\t' -v fn="$fn" '$1 ~ /^attention_.*task/ && $2 ~ /call/ && ($2 ~ ("-> " fn "(-0x4)?$") || $2 ~ ("<" fn ">"))' <<< "$lines")
    [ -z "$c" ] || die "an attention task calls $fn: $(head -2 <<< "$c")"
done
grep -q "^attention_task_avx2	" <<< "$lines" || die "no attention_task_avx2 in $attn (renamed? update this check)"

bf16="$objs/kernels/gemm_avx512_bf16.c.o"
if [ -f "$bf16" ]; then # (absent from cli_isa_leaks's own leak case)
    lines=$(awk -F'\t' '$1 == "kernel_12x32_bf16"' <<< "$(fn_lines "$bf16")")
    [ -n "$lines" ] || die "no kernel_12x32_bf16 in $bf16 (renamed? update this check)"
    n=$(grep -c vdpbf16ps <<< "$lines")
    if [ $inlined = 1 ]; then
        [ "$n" -ge 24 ] || die "kernel_12x32_bf16 has $n vdpbf16ps, not 24 or more"
        calls=$(grep call <<< "$lines")
        [ -z "$calls" ] || die "calls in kernel_12x32_bf16: $(head -3 <<< "$calls")"
    else
        [ "$n" -ge 1 ] || die "kernel_12x32_bf16 has no vdpbf16ps"
    fi
fi
exit $fail
