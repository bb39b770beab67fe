/* amx_emulated.c — packed_amx.c's products over the C model of the tile instructions
 * (amx_emulator.h), as ty_packed_amx_emulated(type), for test_packed. Compiled with
 * AVX-512 enabled: the epilogues are the real kernels' AVX-512 code. */
#include "amx_emulator.h"
#include "packed_amx.c"
