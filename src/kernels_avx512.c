/* kernels_avx512.c — AVX-512 (F, BW, VL, DQ, VNNI) kernels (compiled with those
 * instructions enabled; called only after toy_cpu_isa() found them). Being written. */
#include "kernels.h"

const toy_kernel *toy_kernel_avx512(int type) {
    (void)type;
    return NULL;
}
