#!/usr/bin/env bash
# check-intrinsics.sh [TREE] — instruction sets' intrinsics live in src/kernels/ only
# (docs/architecture.md): no other C file or header of src/ or tools/ includes
# <immintrin.h> (or another x86 intrinsics header) or names an _mm*_ function or an
# __m128/__m256/__m512 type. Prints each place found ("FILE:LINE: TEXT"); exits 1 if
# any, 0 if none.
set -u
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
pattern='#[[:space:]]*include[[:space:]]*<[a-z0-9]*intrin\.h>|\b_mm[0-9]*_[a-z0-9_]+[[:space:]]*\(|\b__m(128|256|512)[a-z]*\b'
found=$(cd "$tree" && grep -rnE --include='*.c' --include='*.h' "$pattern" src tools 2> /dev/null | grep -v '^src/kernels/')
[ -z "$found" ] && exit 0
echo "intrinsics outside src/kernels/ (move them into a kernel behind ty_cpu()'s table):"
echo "$found"
exit 1
