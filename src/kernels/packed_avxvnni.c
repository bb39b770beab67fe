/* packed_avxvnni.c — the AVX2 products of packed weights (packed_avx2.c) for CPUs with
 * AVX-VNNI but no AVX-512 (Intel client CPUs since Alder Lake; TOY_ISA=avxvnni tries
 * them where AVX-512 is there too, as on Zen 5): the same file compiled with vpdpbusd
 * on ymm for Q8_0 and Q4_0, as ty_packed_avxvnni.
 * Bit-identical to the scalar reference, like every packed product. */
#define TOY_PACKED_AVX_VNNI 1
#include "packed_avx2.c"
