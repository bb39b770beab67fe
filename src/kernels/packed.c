/* packed.c — packing weights into groups of 16 interleaved rows, the activation layout
 * of packed products and the scalar reference of those products. The layouts are described in packed.h. */
#include "packed.h"

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
_Static_assert(sizeof(toy_act_q8_0x) == 40, "packed Q8_0 activation block size");
_Static_assert(sizeof(toy_act_q8_Kx) == 276, "packed Q8_K activation block size");

/* Row r of a packed block from the file's block src, or a zero row (src NULL). */
static void pack_row_q8_0(void *block, int r, const void *src) {
    packed_q8_0 *pb = block;
    const block_q8_0 *wb = src;
    pb->d[r] = wb ? wb->d : 0;
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < 4; i++) pb->q[k][r][i] = (uint8_t)((wb ? wb->qs[4 * k + i] : 0) + 128);
}

static void pack_row_q4_0(void *block, int r, const void *src) {
    packed_q4_0 *pb = block;
    const block_q4_0 *wb = src;
    pb->d[r] = wb ? wb->d : 0;
    for (int k = 0; k < 4; k++) /* nibbles 8: weights 0 */
        if (wb) memcpy(pb->q[k][r], wb->qs + 4 * k, 4);
        else memset(pb->q[k][r], 0x88, 4);
}

/* IQ4_NL: Q4_0's layout (the same block fields); a zero row has scale 0. */
static void pack_row_iq4_nl(void *block, int r, const void *src) {
    packed_q4_0 *pb = block;
    const block_iq4_nl *wb = src;
    pb->d[r] = wb ? wb->d : 0;
    for (int k = 0; k < 4; k++)
        if (wb) memcpy(pb->q[k][r], wb->qs + 4 * k, 4);
        else memset(pb->q[k][r], 0, 4);
}

static void pack_row_q4_1(void *block, int r, const void *src) {
    static const block_q4_1 zero;
    const block_q4_1 *wb = src ? src : &zero;
    packed_q4_1 *pb = block;
    pb->d[r] = wb->d;
    pb->m[r] = wb->m;
    for (int k = 0; k < 4; k++) memcpy(pb->q[k][r], wb->qs + 4 * k, 4);
}

/* The fields Q4_K and Q5_K share (their file blocks start alike). */
static void pack_q4_K_fields(packed_q4_K *pb, int r, toy_half d, toy_half dmin, const uint8_t *scales,
                             const uint8_t *qs) {
    pb->d[r] = d;
    pb->dmin[r] = dmin;
    for (int s = 0; s < 3; s++) memcpy(pb->scales[s][r], scales + 4 * s, 4);
    for (int p = 0; p < 4; p++)
        for (int k = 0; k < 8; k++) memcpy(pb->q[p][k][r], qs + 32 * p + 4 * k, 4);
}

static void pack_row_q4_K(void *block, int r, const void *src) {
    static const block_q4_K zero;
    const block_q4_K *wb = src ? src : &zero;
    pack_q4_K_fields(block, r, wb->d, wb->dmin, wb->scales, wb->qs);
}

static void pack_row_q5_K(void *block, int r, const void *src) {
    static const block_q5_K zero;
    const block_q5_K *wb = src ? src : &zero;
    packed_q5_K *pb = block;
    pack_q4_K_fields(&pb->low, r, wb->d, wb->dmin, wb->scales, wb->qs);
    for (int k = 0; k < 8; k++) memcpy(pb->qh[k][r], wb->qh + 4 * k, 4);
}

static void pack_row_q6_K(void *block, int r, const void *src) {
    packed_q6_K *pb = block;
    const block_q6_K *wb = src;
    static const block_q6_K zero;
    if (!wb) wb = &zero;
    pb->d[r] = wb->d;
    for (int g = 0; g < 16; g++) pb->scales[g][r] = wb->scales[g];
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 8; k++) {
            for (int s = 0; s < 2; s++) memcpy(pb->ql[h][s][k][r], wb->ql + 64 * h + 32 * s + 4 * k, 4);
            memcpy(pb->qh[h][k][r], wb->qh + 32 * h + 4 * k, 4);
        }
}

/* A zero row: scale 0 (its nibbles are then any level). */
static void pack_row_iq4_xs(void *block, int r, const void *src) {
    static const block_iq4_xs zero;
    const block_iq4_xs *wb = src ? src : &zero;
    packed_iq4_xs *pb = block;
    pb->d[r] = wb->d;
    pb->scales_h[r] = wb->scales_h;
    memcpy(pb->scales_l[r], wb->scales_l, 4);
    for (int j = 0; j < 8; j++)
        for (int g = 0; g < 4; g++) memcpy(pb->q[j][g][r], wb->qs + 16 * j + 4 * g, 4);
}

typedef struct {
    int type;
    int64_t block_cols; /* the columns of one file block */
    size_t file_block, packed_block;
    void (*pack_row)(void *block, int r, const void *src);
} packed_layout;

static const packed_layout layouts[] = {
    {TOY_TYPE_Q8_0, 32, sizeof(block_q8_0), sizeof(packed_q8_0), pack_row_q8_0},
    {TOY_TYPE_Q4_0, 32, sizeof(block_q4_0), sizeof(packed_q4_0), pack_row_q4_0},
    {TOY_TYPE_Q4_1, 32, sizeof(block_q4_1), sizeof(packed_q4_1), pack_row_q4_1},
    {TOY_TYPE_IQ4_NL, 32, sizeof(block_iq4_nl), sizeof(packed_q4_0), pack_row_iq4_nl},
    {TOY_TYPE_Q4_K, QK_K, sizeof(block_q4_K), sizeof(packed_q4_K), pack_row_q4_K},
    {TOY_TYPE_Q5_K, QK_K, sizeof(block_q5_K), sizeof(packed_q5_K), pack_row_q5_K},
    {TOY_TYPE_Q6_K, QK_K, sizeof(block_q6_K), sizeof(packed_q6_K), pack_row_q6_K},
    {TOY_TYPE_IQ4_XS, QK_K, sizeof(block_iq4_xs), sizeof(packed_iq4_xs), pack_row_iq4_xs},
};

static const packed_layout *layout_of(int type) {
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].type == type) return &layouts[i];
    return NULL;
}

size_t toy_packed_group_size(int type, int64_t n_cols) {
    const packed_layout *l = layout_of(type);
    if (!l || n_cols <= 0 || n_cols % l->block_cols) return 0;
    return (size_t)(n_cols / l->block_cols) * l->packed_block;
}

/* The position of block b among nb in a group's residue order. */
static int64_t residue_position(int64_t b, int64_t nb) {
    const int64_t r = b % BLOCK_LANES;
    /* blocks of the residues before r: those of residue s < r number ceil((nb - s) / 8) */
    int64_t before = 0;
    for (int64_t s = 0; s < r; s++) before += (nb - s + BLOCK_LANES - 1) / BLOCK_LANES;
    return before + b / BLOCK_LANES;
}

void toy_pack_rows(int type, const void *rows, size_t row_size, int64_t n_rows, int64_t n_cols,
                   void *out) {
    const packed_layout *l = layout_of(type);
    const int64_t nb = n_cols / l->block_cols, n_groups = (n_rows + TOY_PACK_ROWS - 1) / TOY_PACK_ROWS;
    uint8_t *group = out;
    for (int64_t g = 0; g < n_groups; g++, group += (size_t)nb * l->packed_block)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *pb = group + (size_t)residue_position(b, nb) * l->packed_block;
            for (int r = 0; r < TOY_PACK_ROWS; r++) {
                const int64_t row = g * TOY_PACK_ROWS + r;
                const uint8_t *src = row < n_rows ? (const uint8_t *)rows + (size_t)row * row_size + (size_t)b * l->file_block
                                                  : NULL;
                l->pack_row(pb, r, src);
            }
        }
}

void toy_widen_q8_0(const block_q8_0 *src, toy_act_q8_0x *a) {
    int32_t sum = 0;
    for (int j = 0; j < QK8_0; j++) sum += src->qs[j];
    toy_act_q8_0x dst = {.d = toy_fp16_to_fp32(src->d), .start = -128 * sum};
    memcpy(dst.qs, src->qs, sizeof dst.qs);
    memcpy(a, &dst, sizeof dst);
}

void toy_widen_q8_K(const block_q8_K *q, toy_act_q8_Kx *a) {
    toy_act_q8_Kx dst = {.d = q->d};
    for (int j = 0; j < 8; j++) dst.msum[j] = (int16_t)(q->bsums[2 * j] + q->bsums[2 * j + 1]);
    memcpy(dst.qs, q->qs, sizeof dst.qs);
    memcpy(a, &dst, sizeof dst);
}

/* The row is first quantized to plain Q8_0 blocks (the bytes the row kernels see) at
 * the end of y, then widened in place from the front: packed block
 * b ends at 40(b + 1), never past the start 6 nb + 34(b + 1) of the Q8_0 block b + 1 not
 * yet read, and block b itself is copied out before it is overwritten. */
void toy_quantize_act_q8_0x(const float *x, void *y, int64_t n) {
    const int64_t nb = n / QK8_0;
    uint8_t *base = y;
    block_q8_0 *q = (block_q8_0 *)(base + (size_t)nb * (sizeof(toy_act_q8_0x) - sizeof(block_q8_0)));
    toy_quantize_act_q8_0(x, q, n);
    toy_act_q8_0x *a = y;
    for (int64_t b = 0; b < nb; b++) {
        block_q8_0 src;
        memcpy(&src, &q[b], sizeof src);
        toy_widen_q8_0(&src, &a[b]);
    }
}

/* Block by block (Q8_K blocks are independent). */
void toy_quantize_act_q8_Kx_with(void (*quantize_q8_K)(const float *x, void *y, int64_t n), const float *x,
                                 void *y, int64_t n) {
    toy_act_q8_Kx *a = y;
    for (int64_t b = 0; b < n / QK_K; b++) {
        block_q8_K q;
        quantize_q8_K(x + b * QK_K, &q, QK_K);
        toy_widen_q8_K(&q, &a[b]);
    }
}

void toy_quantize_act_q8_Kx(const float *x, void *y, int64_t n) {
    toy_quantize_act_q8_Kx_with(toy_quantize_act_q8_K, x, y, n);
}

/* The value v of row r of a packed block against an activation block, as the row
 * kernel's reference computes it (kernels.c, REDUCTION SHAPE): an exact integer sum,
 * then the float epilogue. */
static float block_value(int type, const void *block, int r, const void *act) {
    if (type == TOY_TYPE_Q4_1) {
        const packed_q4_1 *pb = block;
        const block_q8_1 *x = act;
        int32_t sumi = 0;
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 4; i++) {
                sumi += (pb->q[k][r][i] & 15) * x->qs[4 * k + i];
                sumi += (pb->q[k][r][i] >> 4) * x->qs[16 + 4 * k + i];
            }
        const float d = toy_fp16_to_fp32(pb->d[r]) * toy_fp16_to_fp32(x->d);
        const float scaled = d * (float)sumi;
        const float offset = toy_fp16_to_fp32(pb->m[r]) * toy_fp16_to_fp32(x->s);
        return scaled + offset;
    }
    if (type == TOY_TYPE_IQ4_XS) {
        const packed_iq4_xs *pb = block;
        const toy_act_q8_Kx *x = act;
        int32_t isum = 0;
        for (int j = 0; j < 8; j++) {
            const int low = (pb->scales_l[r][j / 2] >> (4 * (j % 2))) & 15;
            const int high = (pb->scales_h[r] >> (2 * j)) & 3;
            int32_t s = 0;
            for (int g = 0; g < 4; g++)
                for (int i = 0; i < 4; i++) {
                    const uint8_t q = pb->q[j][g][r][i];
                    s += toy_iq4nl_values[q & 15] * x->qs[32 * j + 4 * g + i];
                    s += toy_iq4nl_values[q >> 4] * x->qs[32 * j + 16 + 4 * g + i];
                }
            isum += ((low | high << 4) - 32) * s;
        }
        const float d = toy_fp16_to_fp32(pb->d[r]) * x->d;
        return d * (float)isum;
    }
    if (type == TOY_TYPE_Q6_K) {
        const packed_q6_K *pb = block;
        const block_q8_K *x = act;
        int32_t isum = 0;
        for (int g = 0; g < 16; g++) {
            int32_t s = 0;
            for (int e = 16 * g; e < 16 * g + 16; e++) {
                /* weight e = 128 h + 32 m + 4 k + i (kernels.c q6_value) */
                const int h = e / 128, m = e % 128 / 32, k = e % 32 / 4, i = e % 4;
                const int low = (pb->ql[h][m % 2][k][r][i] >> (4 * (m / 2))) & 15;
                const int high = (pb->qh[h][k][r][i] >> (2 * m)) & 3;
                s += x->qs[e] * ((low | high << 4) - 32);
            }
            isum += pb->scales[g][r] * s;
        }
        const float d = toy_fp16_to_fp32(pb->d[r]) * x->d;
        return d * (float)isum;
    }
    if (type == TOY_TYPE_Q4_K || type == TOY_TYPE_Q5_K) {
        const packed_q4_K *pb = block;
        /* Q5_K: bit j of qh[k][r][i] is the fifth bit of weight 32j + 4k + i */
        const uint8_t(*qh)[TOY_PACK_ROWS][4] = type == TOY_TYPE_Q5_K ? ((const packed_q5_K *)block)->qh : NULL;
        const toy_act_q8_Kx *x = act;
        uint8_t scales[12];
        for (int s = 0; s < 3; s++) memcpy(scales + 4 * s, pb->scales[s][r], 4);
        int32_t isum = 0, summs = 0;
        for (int j = 0; j < 8; j++) {
            const int sc = j < 4 ? scales[j] & 63 : (scales[j + 4] & 0x0f) | (scales[j - 4] >> 6) << 4;
            const int m = j < 4 ? scales[j + 4] & 63 : (scales[j + 4] >> 4) | (scales[j] >> 6) << 4;
            int32_t s = 0;
            for (int k = 0; k < 8; k++)
                for (int i = 0; i < 4; i++) {
                    const int low = (pb->q[j / 2][k][r][i] >> (4 * (j % 2))) & 15;
                    const int high = qh ? (qh[k][r][i] >> j) & 1 : 0;
                    s += (low | high << 4) * x->qs[32 * j + 4 * k + i];
                }
            isum += sc * s;
            summs += m * x->msum[j];
        }
        const float d = toy_fp16_to_fp32(pb->d[r]) * x->d;
        const float dm = toy_fp16_to_fp32(pb->dmin[r]) * x->d;
        const float scaled = d * (float)isum;
        const float mins = dm * (float)summs;
        return scaled - mins;
    }
    const toy_act_q8_0x *x = act;
    int32_t sumi;
    uint16_t wd;
    if (type == TOY_TYPE_IQ4_NL) {
        const packed_q4_0 *pb = block;
        sumi = 0;
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 4; i++) {
                sumi += toy_iq4nl_values[pb->q[k][r][i] & 15] * x->qs[4 * k + i];
                sumi += toy_iq4nl_values[pb->q[k][r][i] >> 4] * x->qs[16 + 4 * k + i];
            }
        wd = pb->d[r];
    } else if (type == TOY_TYPE_Q4_0) {
        const packed_q4_0 *pb = block;
        /* sum (u - 8) a = sum u a - 8 sum a, the start being -128 sum a */
        sumi = x->start / 16;
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 4; i++) {
                sumi += (pb->q[k][r][i] & 15) * x->qs[4 * k + i];
                sumi += (pb->q[k][r][i] >> 4) * x->qs[16 + 4 * k + i];
            }
        wd = pb->d[r];
    } else {
        const packed_q8_0 *pb = block;
        sumi = x->start;
        for (int k = 0; k < 8; k++)
            for (int i = 0; i < 4; i++) sumi += pb->q[k][r][i] * x->qs[4 * k + i];
        wd = pb->d[r];
    }
    const float d = toy_fp16_to_fp32(wd) * x->d;
    return d * (float)sumi;
}

/* The reference: the definition in packed.h, one row and one activation row at a time. */
static void gemm_scalar(int type, int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride,
                        int64_t n_a, float *y, size_t y_stride) {
    const packed_layout *lay = layout_of(type);
    const int64_t nb = n_cols / lay->block_cols;
    const size_t block = lay->packed_block, act_block = toy_packed_scalar(type)->act_block;
    for (int64_t r0 = 0; r0 < n_rows; r0 += TOY_PACK_ROWS) {
        const uint8_t *group = (const uint8_t *)w + (size_t)(r0 / TOY_PACK_ROWS * nb) * block;
        for (int64_t j = 0; j < n_a; j++) {
            const uint8_t *x = (const uint8_t *)a + (size_t)j * a_stride;
            for (int r = 0; r < TOY_PACK_ROWS && r0 + r < n_rows; r++) {
                float lane[BLOCK_LANES] = {0};
                const uint8_t *pb = group;
                for (int l = 0; l < BLOCK_LANES; l++)
                    for (int64_t b = l; b < nb; b += BLOCK_LANES, pb += block)
                        lane[l] += block_value(type, pb, r, x + (size_t)b * act_block);
                for (int s = BLOCK_LANES / 2; s > 0; s /= 2)
                    for (int k = 0; k < s; k++) lane[k] += lane[k + s];
                y[(size_t)j * y_stride + (size_t)(r0 + r)] = lane[0];
            }
        }
    }
}

/* The reference's entry point for each packed type */
#define SCALAR_GEMM(name, type)                                                                                \
    static void name(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride, int64_t n_a, \
                     float *y, size_t y_stride) {                                                              \
        gemm_scalar(type, n_cols, w, n_rows, a, a_stride, n_a, y, y_stride);                                   \
    }
SCALAR_GEMM(gemm_q8_0x_scalar, TOY_TYPE_Q8_0)
SCALAR_GEMM(gemm_q4_0x_scalar, TOY_TYPE_Q4_0)
SCALAR_GEMM(gemm_iq4_nlx_scalar, TOY_TYPE_IQ4_NL)
SCALAR_GEMM(gemm_q4_1x_scalar, TOY_TYPE_Q4_1)
SCALAR_GEMM(gemm_q4_Kx_scalar, TOY_TYPE_Q4_K)
SCALAR_GEMM(gemm_q5_Kx_scalar, TOY_TYPE_Q5_K)
SCALAR_GEMM(gemm_q6_Kx_scalar, TOY_TYPE_Q6_K)
SCALAR_GEMM(gemm_iq4_xsx_scalar, TOY_TYPE_IQ4_XS)
#undef SCALAR_GEMM

static const toy_packed_kernel packed_scalar[] = {
    {TOY_TYPE_Q8_0, 32, sizeof(toy_act_q8_0x), toy_quantize_act_q8_0x, gemm_q8_0x_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q4_0, 32, sizeof(toy_act_q8_0x), toy_quantize_act_q8_0x, gemm_q4_0x_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q4_1, 32, sizeof(block_q8_1), toy_quantize_act_q8_1, gemm_q4_1x_scalar, NULL, NULL, NULL},
    {TOY_TYPE_IQ4_NL, 32, sizeof(toy_act_q8_0x), toy_quantize_act_q8_0x, gemm_iq4_nlx_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q4_K, QK_K, sizeof(toy_act_q8_Kx), toy_quantize_act_q8_Kx, gemm_q4_Kx_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q5_K, QK_K, sizeof(toy_act_q8_Kx), toy_quantize_act_q8_Kx, gemm_q5_Kx_scalar, NULL, NULL, NULL},
    {TOY_TYPE_Q6_K, QK_K, sizeof(block_q8_K), toy_quantize_act_q8_K, gemm_q6_Kx_scalar, NULL, NULL, NULL},
    {TOY_TYPE_IQ4_XS, QK_K, sizeof(toy_act_q8_Kx), toy_quantize_act_q8_Kx, gemm_iq4_xsx_scalar, NULL, NULL, NULL},
};

const toy_packed_kernel *toy_packed_scalar(int type) {
    for (size_t i = 0; i < sizeof packed_scalar / sizeof packed_scalar[0]; i++)
        if (packed_scalar[i].type == type) return &packed_scalar[i];
    return NULL;
}

static int decode_streams = 1, decode_streams_set;

void toy_packed_choose_decode_streams(int n) {
    decode_streams = n;
}

int toy_packed_decode_streams(void) {
    return decode_streams_set ? decode_streams_set : decode_streams;
}

void toy_packed_set_decode_streams(int n) {
    decode_streams_set = n == 1 || n == 4 ? n : 0;
}
