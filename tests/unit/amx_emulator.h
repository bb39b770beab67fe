/* amx_emulator.h — the AMX tile instructions that packed_amx.c uses, modelled in C, so
 * that its products run and are checked against the scalar reference (test_packed) on
 * CPUs without AMX. Included before packed_amx.c (tests/unit/amx_emulated.c), it replaces
 * the intrinsics with these functions and renames the kernels' entry point.
 *
 * The model follows the instruction definitions (Intel SDM, "Intel AMX"): LDTILECFG
 * palette 1 gives each tile its rows (at most 16) and bytes per row (at most 64);
 * TILELOADD / TILESTORED move rows x colsb bytes, row i at base + i * stride; TDPBSUD
 * adds to C[m][n] (int32) the products of A's row m (signed bytes, K of them) with the
 * four unsigned bytes of column n in each of B's K / 4 rows (TDPBSSD: signed bytes). Anything the hardware would
 * fault on or compute from undefined state — an unconfigured tile, shapes that do not
 * fit (A's rows != C's rows, B's colsb != C's, A's colsb != 4 x B's rows) — is recorded
 * in ty_amx_emulator_fault, which the test requires to stay NULL. */
#ifndef TOY_AMX_EMULATOR_H
#define TOY_AMX_EMULATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "packed.h"

#define TOY_AMX_EMULATE 1
#define AMX_ENTRY ty_packed_amx_emulated
const ty_packed_kernel *ty_packed_amx_emulated(int type);

/* The first misuse seen, NULL while there is none. */
extern const char *ty_amx_emulator_fault;
const char *ty_amx_emulator_fault;

typedef struct {
    int rows, colsb;
    uint8_t data[16][64];
} emulated_tile;

static _Thread_local struct {
    bool configured;
    emulated_tile tile[8];
} amx;

static void amx_fault(const char *what) {
    if (!ty_amx_emulator_fault) ty_amx_emulator_fault = what;
}

static void emulated_loadconfig(const void *config) {
    const uint8_t *c = config;
    if (c[0] != 1) {
        amx_fault("LDTILECFG: palette is not 1");
        return;
    }
    for (int t = 0; t < 8; t++) {
        const int colsb = c[16 + 2 * t] | c[17 + 2 * t] << 8, rows = c[48 + t];
        if (rows > 16 || colsb > 64 || colsb % 4) {
            amx_fault("LDTILECFG: a tile larger than 16 x 64 bytes");
            return;
        }
        amx.tile[t].rows = rows;
        amx.tile[t].colsb = colsb;
        memset(amx.tile[t].data, 0, sizeof amx.tile[t].data);
    }
    amx.configured = true;
}

static emulated_tile *configured_tile(int t, const char *op) {
    if (!amx.configured || t < 0 || t > 7 || !amx.tile[t].rows) {
        amx_fault(op);
        return NULL;
    }
    return &amx.tile[t];
}

static void emulated_load(int t, const void *base, size_t stride) {
    emulated_tile *tile = configured_tile(t, "TILELOADD: tile not configured");
    if (!tile) return;
    for (int i = 0; i < tile->rows; i++) memcpy(tile->data[i], (const uint8_t *)base + (size_t)i * stride, (size_t)tile->colsb);
}

static void emulated_store(int t, void *base, size_t stride) {
    emulated_tile *tile = configured_tile(t, "TILESTORED: tile not configured");
    if (!tile) return;
    for (int i = 0; i < tile->rows; i++) memcpy((uint8_t *)base + (size_t)i * stride, tile->data[i], (size_t)tile->colsb);
}

static void emulated_zero(int t) {
    emulated_tile *tile = configured_tile(t, "TILEZERO: tile not configured");
    if (tile) memset(tile->data, 0, sizeof tile->data);
}

/* TDPBSUD (b_signed false: B's bytes unsigned) and TDPBSSD (both signed) */
static void emulated_dp(int c, int a, int b, bool b_signed) {
    emulated_tile *tc = configured_tile(c, "TDPBSUD/TDPBSSD: C not configured");
    const emulated_tile *ta = configured_tile(a, "TDPBSUD/TDPBSSD: A not configured");
    const emulated_tile *tb = configured_tile(b, "TDPBSUD/TDPBSSD: B not configured");
    if (!tc || !ta || !tb) return;
    if (ta->rows != tc->rows || tb->colsb != tc->colsb || ta->colsb != 4 * tb->rows) {
        amx_fault("TDPBSUD/TDPBSSD: tile shapes do not fit");
        return;
    }
    for (int m = 0; m < tc->rows; m++)
        for (int n = 0; n < tc->colsb / 4; n++) {
            uint32_t sum; /* wrapping, as the hardware's int32 */
            memcpy(&sum, &tc->data[m][4 * n], sizeof sum);
            for (int k = 0; k < tb->rows; k++)
                for (int i = 0; i < 4; i++) {
                    const uint8_t w = tb->data[k][4 * n + i];
                    const int32_t bv = b_signed ? (int32_t)(int8_t)w : (int32_t)w;
                    sum += (uint32_t)((int32_t)(int8_t)ta->data[m][4 * k + i] * bv);
                }
            memcpy(&tc->data[m][4 * n], &sum, sizeof sum);
        }
}

static void emulated_release(void) {
    amx.configured = false;
}

#define tile_config(cfg) emulated_loadconfig(cfg)
#define tile_release() emulated_release()
#define tile_load(t, p, stride) emulated_load(t, p, (size_t)(stride))
#define tile_store(t, p, stride) emulated_store(t, p, (size_t)(stride))
#define tile_zero(t) emulated_zero(t)
#define tile_dpbsud(c, a, b) emulated_dp(c, a, b, false)
#define tile_dpbssd(c, a, b) emulated_dp(c, a, b, true)

#endif
