/* packed.c — packing weights into groups of 16 interleaved rows, the activation layout
 * of packed products and the scalar reference of those products. The layouts are described in packed.h. */
#include "packed.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define BLOCK_LANES 8 /* the reduction shape's lanes (kernels.c) */

typedef struct {
    uint16_t d[TOY_PACK_ROWS]; /* the file's fp16 scales */
    uint8_t q[8][TOY_PACK_ROWS][4];
} packed_q8_0;

/* Q4_0: the file's bytes regrouped, q[g][r][i] = qs[4g + i] of row r, whose low nibble
 * is weight 4g + i + 8 and high nibble weight 4g + i + 16 + 8 (groups g and g + 4). */
typedef struct {
    uint16_t d[TOY_PACK_ROWS];
    uint8_t q[4][TOY_PACK_ROWS][4];
} packed_q4_0;

/* Q4_1: Q4_0's nibbles, the rows' d and m side by side. */
typedef struct {
    uint16_t d[TOY_PACK_ROWS], m[TOY_PACK_ROWS];
    uint8_t q[4][TOY_PACK_ROWS][4];
} packed_q4_1;

typedef struct {
    uint16_t d[TOY_PACK_ROWS], dmin[TOY_PACK_ROWS];
    uint8_t scales[3][TOY_PACK_ROWS][4];
    uint8_t q[4][8][TOY_PACK_ROWS][4];
} packed_q4_K;

/* Q5_K: the Q4_K block, then the fifth bits, qh[k][r][i] = qh[4k + i] of row r. */
typedef struct {
    packed_q4_K low;
    uint8_t qh[8][TOY_PACK_ROWS][4];
} packed_q5_K;

/* Q6_K: sub-block g's scale of row r in scales[g][r]; the file's ql and qh bytes
 * regrouped so that one 32-bit lane holds four consecutive weights' bits of one row. */
typedef struct {
    uint16_t d[TOY_PACK_ROWS];
    int8_t scales[16][TOY_PACK_ROWS];
    uint8_t ql[2][2][8][TOY_PACK_ROWS][4];
    uint8_t qh[2][8][TOY_PACK_ROWS][4];
} packed_q6_K;

/* IQ4_XS: the rows' fields side by side, the file's bytes regrouped as Q4_0's per
 * 32-weight sub-block. */
typedef struct {
    uint16_t d[TOY_PACK_ROWS], scales_h[TOY_PACK_ROWS];
    uint8_t scales_l[TOY_PACK_ROWS][4];
    uint8_t q[8][4][TOY_PACK_ROWS][4];
} packed_iq4_xs;

_Static_assert(sizeof(packed_q8_0) == 16 * sizeof(block_q8_0), "packed Q8_0 block size");
_Static_assert(sizeof(packed_iq4_xs) == 16 * sizeof(block_iq4_xs), "packed IQ4_XS block size");
_Static_assert(sizeof(packed_q4_0) == 16 * sizeof(block_q4_0), "packed Q4_0 block size");
_Static_assert(sizeof(packed_q4_1) == 16 * sizeof(block_q4_1), "packed Q4_1 block size");
_Static_assert(sizeof(packed_q4_K) == 16 * sizeof(block_q4_K), "packed Q4_K block size");
_Static_assert(sizeof(packed_q5_K) == 16 * sizeof(block_q5_K), "packed Q5_K block size");
_Static_assert(sizeof(packed_q6_K) == 16 * sizeof(block_q6_K), "packed Q6_K block size");
_Static_assert(sizeof(ty_act_q8_0x) == 40, "packed Q8_0 activation block size");
_Static_assert(sizeof(ty_act_q8_Kx) == 276, "packed Q8_K activation block size");

/* Row r of a packed block and a block of the file: move_row_TYPE(packed block, r, file
 * block, unpack) packs the file block into row r, or (unpack) the row back into the
 * file block. Packing from no file block (NULL) writes a zero row. */
static inline void move(void *packed, void *file, size_t n, const bool unpack) {
    if (unpack) memcpy(file, packed, n);
    else memcpy(packed, file, n);
}

/* Q8_0: the quants plus 128, which on a byte is its top bit flipped: four at a time */
static inline void move_row_q8_0(void *block, int r, void *file, const bool unpack) {
    static block_q8_0 zero;
    packed_q8_0 *pb = block;
    block_q8_0 *wb = file ? file : &zero;
    move(&pb->d[r], &wb->d, sizeof wb->d, unpack);
    for (int k = 0; k < 8; k++) {
        uint32_t v;
        memcpy(&v, unpack ? (const void *)pb->q[k][r] : (const void *)(wb->qs + 4 * k), 4);
        v ^= 0x80808080u;
        memcpy(unpack ? (void *)(wb->qs + 4 * k) : (void *)pb->q[k][r], &v, 4);
    }
}

/* Q4_0 and IQ4_NL (the same block fields): a Q4_0 zero row has nibbles 8 (weights 0) */
static inline void move_row_q4_0(void *block, int r, void *file, const bool unpack) {
    static block_q4_0 zero = {.qs = {0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
                                     0x88, 0x88, 0x88, 0x88}};
    packed_q4_0 *pb = block;
    block_q4_0 *wb = file ? file : &zero;
    move(&pb->d[r], &wb->d, sizeof wb->d, unpack);
    for (int k = 0; k < 4; k++) move(pb->q[k][r], wb->qs + 4 * k, 4, unpack);
}

static inline void move_row_iq4_nl(void *block, int r, void *file, const bool unpack) {
    static block_iq4_nl zero;
    move_row_q4_0(block, r, file ? file : &zero, unpack);
}

static inline void move_row_q4_1(void *block, int r, void *file, const bool unpack) {
    static block_q4_1 zero;
    packed_q4_1 *pb = block;
    block_q4_1 *wb = file ? file : &zero;
    move(&pb->d[r], &wb->d, sizeof wb->d, unpack);
    move(&pb->m[r], &wb->m, sizeof wb->m, unpack);
    for (int k = 0; k < 4; k++) move(pb->q[k][r], wb->qs + 4 * k, 4, unpack);
}

/* The fields Q4_K and Q5_K share. */
static void move_q4_K_fields(packed_q4_K *pb, int r, ty_half *d, ty_half *dmin, uint8_t *scales, uint8_t *qs,
                             const bool unpack) {
    move(&pb->d[r], d, sizeof *d, unpack);
    move(&pb->dmin[r], dmin, sizeof *dmin, unpack);
    for (int s = 0; s < 3; s++) move(pb->scales[s][r], scales + 4 * s, 4, unpack);
    for (int p = 0; p < 4; p++)
        for (int k = 0; k < 8; k++) move(pb->q[p][k][r], qs + 32 * p + 4 * k, 4, unpack);
}

static inline void move_row_q4_K(void *block, int r, void *file, const bool unpack) {
    static block_q4_K zero;
    block_q4_K *wb = file ? file : &zero;
    move_q4_K_fields(block, r, &wb->d, &wb->dmin, wb->scales, wb->qs, unpack);
}

static inline void move_row_q5_K(void *block, int r, void *file, const bool unpack) {
    static block_q5_K zero;
    packed_q5_K *pb = block;
    block_q5_K *wb = file ? file : &zero;
    move_q4_K_fields(&pb->low, r, &wb->d, &wb->dmin, wb->scales, wb->qs, unpack);
    for (int k = 0; k < 8; k++) move(pb->qh[k][r], wb->qh + 4 * k, 4, unpack);
}

static inline void move_row_q6_K(void *block, int r, void *file, const bool unpack) {
    static block_q6_K zero;
    packed_q6_K *pb = block;
    block_q6_K *wb = file ? file : &zero;
    move(&pb->d[r], &wb->d, sizeof wb->d, unpack);
    for (int g = 0; g < 16; g++) move(&pb->scales[g][r], &wb->scales[g], 1, unpack);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 8; k++) {
            for (int s = 0; s < 2; s++) move(pb->ql[h][s][k][r], wb->ql + 64 * h + 32 * s + 4 * k, 4, unpack);
            move(pb->qh[h][k][r], wb->qh + 32 * h + 4 * k, 4, unpack);
        }
}

/* A zero row: scale 0 (its nibbles are then any level). */
static inline void move_row_iq4_xs(void *block, int r, void *file, const bool unpack) {
    static block_iq4_xs zero;
    packed_iq4_xs *pb = block;
    block_iq4_xs *wb = file ? file : &zero;
    move(&pb->d[r], &wb->d, sizeof wb->d, unpack);
    move(&pb->scales_h[r], &wb->scales_h, sizeof wb->scales_h, unpack);
    move(pb->scales_l[r], wb->scales_l, 4, unpack);
    for (int j = 0; j < 8; j++)
        for (int g = 0; g < 4; g++) move(pb->q[j][g][r], wb->qs + 16 * j + 4 * g, 4, unpack);
}

/* Each direction with the direction a constant, so that the moves compile to plain loads
 * and stores: pack_rows_TYPE packs a packed block's 16 rows (rows of them from the file,
 * row_size bytes apart, zero rows past), unpack_row_TYPE unpacks one row. */
#define DIRECTIONS(t)                                                                                    \
    static void pack_rows_##t(void *block, const uint8_t *file, size_t row_size, int rows) {           \
        for (int r = 0; r < TOY_PACK_ROWS; r++)                                                        \
            move_row_##t(block, r, r < rows ? (void *)(file + (size_t)r * row_size) : NULL, false);    \
    }                                                                                                  \
    static void unpack_row_##t(void *block, int r, void *file) { move_row_##t(block, r, file, true); }
DIRECTIONS(q8_0)
DIRECTIONS(q4_0)
DIRECTIONS(q4_1)
DIRECTIONS(iq4_nl)
DIRECTIONS(q4_K)
DIRECTIONS(q5_K)
DIRECTIONS(q6_K)
DIRECTIONS(iq4_xs)
#undef DIRECTIONS

/* A type's packed layout: how a file block's row moves in and out of a packed block.
 * The sizes are packed.h's ty_packed_block_cols and ty_packed_block_bytes (16 file blocks,
 * as the _Static_asserts above keep the structs). */
typedef struct {
    int type;
    void (*pack_rows)(void *block, const uint8_t *file, size_t row_size, int rows);
    void (*unpack_row)(void *block, int r, void *file);
} packed_layout;

#define LAYOUT(T, t) {TOY_TYPE_##T, pack_rows_##t, unpack_row_##t}
static const packed_layout layouts[] = {
    LAYOUT(Q8_0, q8_0), LAYOUT(Q4_0, q4_0), LAYOUT(Q4_1, q4_1), LAYOUT(IQ4_NL, iq4_nl),
    LAYOUT(Q4_K, q4_K), LAYOUT(Q5_K, q5_K), LAYOUT(Q6_K, q6_K), LAYOUT(IQ4_XS, iq4_xs),
};
#undef LAYOUT

static const packed_layout *layout_of(int type) {
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].type == type) return &layouts[i];
    return NULL;
}

size_t ty_packed_group_size(int type, int64_t n_cols) {
    const packed_layout *l = layout_of(type);
    if (!l || n_cols <= 0 || n_cols % ty_packed_block_cols(type)) return 0;
    return (size_t)(n_cols / ty_packed_block_cols(type)) * ty_packed_block_bytes(type);
}

/* The position of block b among nb in a group's residue order: after the blocks of the
 * residues s < b % 8, of which the first nb % 8 have nb / 8 + 1 blocks, the others nb / 8. */
static int64_t residue_position(int64_t b, int64_t nb) {
    const int64_t r = b % BLOCK_LANES, whole = nb / BLOCK_LANES, longer = nb % BLOCK_LANES;
    return r * whole + (r < longer ? r : longer) + b / BLOCK_LANES;
}

void ty_pack_groups(int type, const void *rows, size_t row_size, int64_t n_rows, int64_t n_cols, int64_t g0,
                    int64_t g1, void *out) {
    const packed_layout *l = layout_of(type);
    const int64_t nb = n_cols / ty_packed_block_cols(type);
    const size_t packed_block = ty_packed_block_bytes(type), file_block = packed_block / TOY_PACK_ROWS;
    uint8_t *group = (uint8_t *)out + (size_t)g0 * (size_t)nb * packed_block;
    for (int64_t g = g0; g < g1; g++, group += (size_t)nb * packed_block) {
        const int64_t left = n_rows - g * TOY_PACK_ROWS;
        const int real = left < TOY_PACK_ROWS ? (int)left : TOY_PACK_ROWS;
        const uint8_t *first = (const uint8_t *)rows + (size_t)(g * TOY_PACK_ROWS) * row_size;
        for (int64_t b = 0; b < nb; b++)
            l->pack_rows(group + (size_t)residue_position(b, nb) * packed_block, first + (size_t)b * file_block,
                         row_size, real);
    }
}

void ty_pack_rows(int type, const void *rows, size_t row_size, int64_t n_rows, int64_t n_cols, void *out) {
    ty_pack_groups(type, rows, row_size, n_rows, n_cols, 0, (n_rows + TOY_PACK_ROWS - 1) / TOY_PACK_ROWS, out);
}

void ty_widen_q8_0(const block_q8_0 *src, ty_act_q8_0x *a) {
    int32_t sum = 0;
    for (int j = 0; j < QK8_0; j++) sum += src->qs[j];
    ty_act_q8_0x dst = {.d = ty_fp16_to_fp32(src->d), .start = -128 * sum};
    memcpy(dst.qs, src->qs, sizeof dst.qs);
    memcpy(a, &dst, sizeof dst);
}

void ty_widen_q8_K(const block_q8_K *q, ty_act_q8_Kx *a) {
    ty_act_q8_Kx dst = {.d = q->d};
    for (int j = 0; j < 8; j++) dst.msum[j] = (int16_t)(q->bsums[2 * j] + q->bsums[2 * j + 1]);
    memcpy(dst.qs, q->qs, sizeof dst.qs);
    memcpy(a, &dst, sizeof dst);
}

/* The row is first quantized to plain Q8_0 blocks (the bytes the row kernels see) at
 * the end of y, then widened in place from the front: packed block
 * b ends at 40(b + 1), never past the start 6 nb + 34(b + 1) of the Q8_0 block b + 1 not
 * yet read, and block b itself is copied out before it is overwritten. */
void ty_quantize_act_q8_0x(const float *x, void *y, int64_t n) {
    const int64_t nb = n / QK8_0;
    uint8_t *base = y;
    block_q8_0 *q = (block_q8_0 *)(base + (size_t)nb * (sizeof(ty_act_q8_0x) - sizeof(block_q8_0)));
    ty_quantize_act_q8_0(x, q, n);
    ty_act_q8_0x *a = y;
    for (int64_t b = 0; b < nb; b++) {
        block_q8_0 src;
        memcpy(&src, &q[b], sizeof src);
        ty_widen_q8_0(&src, &a[b]);
    }
}

/* Block by block (Q8_K blocks are independent). */
void ty_quantize_act_q8_Kx_with(void (*quantize_q8_K)(const float *x, void *y, int64_t n), const float *x,
                                void *y, int64_t n) {
    ty_act_q8_Kx *a = y;
    for (int64_t b = 0; b < n / QK_K; b++) {
        block_q8_K q;
        quantize_q8_K(x + b * QK_K, &q, QK_K);
        ty_widen_q8_K(&q, &a[b]);
    }
}

void ty_quantize_act_q8_Kx(const float *x, void *y, int64_t n) {
    ty_quantize_act_q8_Kx_with(ty_quantize_act_q8_K, x, y, n);
}

/* The reference: the definition in packed.h, which is the row kernels' (kernels.c), one
 * weight row and one activation row at a time: the row unpacked to the file's blocks,
 * the activation row back to its vec_dot type's blocks, then the scalar vec_dot. */
static void gemm_scalar(int type, int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride,
                        int64_t n_a, float *y, size_t y_stride) {
    const packed_layout *lay = layout_of(type);
    const ty_kernel *k = ty_kernel_scalar(type);
    const int64_t nb = n_cols / ty_packed_block_cols(type);
    const size_t packed_block = ty_packed_block_bytes(type), file_block = packed_block / TOY_PACK_ROWS;
    const size_t act_block = ty_packed_scalar(type)->act_block, vd_block = toy_type_size(k->vec_dot_type);
    const size_t act_row = (size_t)nb * vd_block;
    uint8_t *row = malloc((size_t)nb * file_block), *acts = malloc((size_t)n_a * act_row);
    for (int64_t j = 0; row && acts && j < n_a; j++) {
        const uint8_t *x = (const uint8_t *)a + (size_t)j * a_stride;
        for (int64_t b = 0; b < nb; b++, x += act_block) {
            uint8_t *to = acts + (size_t)j * act_row + (size_t)b * vd_block;
            if (k->vec_dot_type == TOY_TYPE_Q8_0) {
                const ty_act_q8_0x *src = (const ty_act_q8_0x *)x;
                block_q8_0 q = {.d = ty_fp32_to_fp16(src->d)};
                memcpy(q.qs, src->qs, sizeof q.qs);
                memcpy(to, &q, sizeof q);
            } else if (act_block == sizeof(ty_act_q8_Kx)) { /* widened Q8_K: its bsums summed again */
                const ty_act_q8_Kx *src = (const ty_act_q8_Kx *)x;
                block_q8_K q = {.d = src->d};
                memcpy(q.qs, src->qs, sizeof q.qs);
                for (int g = 0; g < QK_K / 16; g++)
                    for (int e = 0; e < 16; e++) q.bsums[g] = (int16_t)(q.bsums[g] + q.qs[16 * g + e]);
                memcpy(to, &q, sizeof q);
            } else { /* plain Q8_1 or Q8_K */
                memcpy(to, x, act_block);
            }
        }
    }
    for (int64_t r0 = 0; row && acts && r0 < n_rows; r0 += TOY_PACK_ROWS) {
        const uint8_t *group = (const uint8_t *)w + (size_t)(r0 / TOY_PACK_ROWS * nb) * packed_block;
        for (int r = 0; r < TOY_PACK_ROWS && r0 + r < n_rows; r++) {
            for (int64_t b = 0; b < nb; b++)
                lay->unpack_row((void *)(group + (size_t)residue_position(b, nb) * packed_block), r,
                                row + (size_t)b * file_block);
            for (int64_t j = 0; j < n_a; j++)
                y[(size_t)j * y_stride + (size_t)(r0 + r)] = k->vec_dot(n_cols, row, acts + (size_t)j * act_row);
        }
    }
    free(row);
    free(acts);
}

/* The reference's entry point for each packed type */
static void gemm_q8_0x_scalar(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                              float *y, size_t ys) {
    gemm_scalar(TOY_TYPE_Q8_0, n_cols, w, n_rows, a, as, n_a, y, ys);
}
static void gemm_q4_0x_scalar(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                              float *y, size_t ys) {
    gemm_scalar(TOY_TYPE_Q4_0, n_cols, w, n_rows, a, as, n_a, y, ys);
}
static void gemm_iq4_nlx_scalar(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) {
    gemm_scalar(TOY_TYPE_IQ4_NL, n_cols, w, n_rows, a, as, n_a, y, ys);
}
static void gemm_q4_1x_scalar(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                              float *y, size_t ys) {
    gemm_scalar(TOY_TYPE_Q4_1, n_cols, w, n_rows, a, as, n_a, y, ys);
}
static void gemm_q4_Kx_scalar(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                              float *y, size_t ys) {
    gemm_scalar(TOY_TYPE_Q4_K, n_cols, w, n_rows, a, as, n_a, y, ys);
}
static void gemm_q5_Kx_scalar(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                              float *y, size_t ys) {
    gemm_scalar(TOY_TYPE_Q5_K, n_cols, w, n_rows, a, as, n_a, y, ys);
}
static void gemm_q6_Kx_scalar(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                              float *y, size_t ys) {
    gemm_scalar(TOY_TYPE_Q6_K, n_cols, w, n_rows, a, as, n_a, y, ys);
}
static void gemm_iq4_xsx_scalar(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) {
    gemm_scalar(TOY_TYPE_IQ4_XS, n_cols, w, n_rows, a, as, n_a, y, ys);
}

static const ty_packed_kernel packed_scalar[] = {
    {TOY_TYPE_Q8_0, 32, sizeof(ty_act_q8_0x), ty_quantize_act_q8_0x, gemm_q8_0x_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q4_0, 32, sizeof(ty_act_q8_0x), ty_quantize_act_q8_0x, gemm_q4_0x_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q4_1, 32, sizeof(block_q8_1), ty_quantize_act_q8_1, gemm_q4_1x_scalar, NULL, NULL, NULL},
    {TOY_TYPE_IQ4_NL, 32, sizeof(ty_act_q8_0x), ty_quantize_act_q8_0x, gemm_iq4_nlx_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q4_K, QK_K, sizeof(ty_act_q8_Kx), ty_quantize_act_q8_Kx, gemm_q4_Kx_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q5_K, QK_K, sizeof(ty_act_q8_Kx), ty_quantize_act_q8_Kx, gemm_q5_Kx_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q6_K, QK_K, sizeof(block_q8_K), ty_quantize_act_q8_K, gemm_q6_Kx_scalar, NULL, NULL, NULL},
    {TOY_TYPE_IQ4_XS, QK_K, sizeof(ty_act_q8_Kx), ty_quantize_act_q8_Kx, gemm_iq4_xsx_scalar, NULL, NULL, NULL},
};

const ty_packed_kernel *ty_packed_find(const ty_packed_kernel *kernels, size_t n, int type) {
    for (size_t i = 0; i < n; i++)
        if (kernels[i].type == type) return &kernels[i];
    return NULL;
}

const ty_packed_kernel *ty_packed_scalar(int type) {
    return ty_packed_find(packed_scalar, sizeof packed_scalar / sizeof packed_scalar[0], type);
}

static int decode_streams = 1, decode_streams_set;

void ty_packed_choose_decode_streams(int n) {
    decode_streams = n;
}

int ty_packed_decode_streams(void) {
    return decode_streams_set ? decode_streams_set : decode_streams;
}

void ty_packed_set_decode_streams(int n) {
    decode_streams_set = n == 1 || n == 4 ? n : 0;
}
