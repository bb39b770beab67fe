/* packed.h — weights repacked at load into interleaved groups of rows, for products of a
 * matrix with several activation rows at once (batched decode, prefill) without any
 * horizontal sum.
 *
 * The row-by-row kernels (kernels.h) reduce each 32-weight block across vector lanes:
 * that tree of shuffles costs more than the block's multiplies. Here 16 weight rows sit
 * side by side, four bytes of each row in one 32-bit lane, so one vpdpbusd against four
 * broadcast activation bytes advances 16 rows at once and a block's 16 integer sums come
 * out in 16 lanes, ready for the per-block float epilogue.
 *
 * Results are bit-identical to vec_dot of the same pair (kernels.c, REDUCTION SHAPE):
 * the block sums are exact integers; each block's value is the reference's
 * (w.d * a.d) * (float)sumi; block b goes into lane b % 8, in block order; the 8 lanes
 * are combined pairwise. Only the memory layout changes, never a logit.
 *
 * Q8_0 layout ("q8_0x16"). A matrix is ceil(n_rows / 16) groups of 16 rows, the last one
 * padded with zero rows. A group is n_cols / 32 packed blocks in residue order — the
 * blocks b with b % 8 == 0 in ascending order, then those with b % 8 == 1, ... — so each
 * accumulator lane of the reduction shape reads one contiguous stretch. A packed block is
 *     uint16_t d[16]        the rows' fp16 scales, as in the file
 *     uint8_t q[8][16][4]   q[k][r][i] = weight 4k + i of row r, plus 128
 * (544 bytes for 16 x 32 weights, as in the file: decode reads no more than unpacked.)
 *
 * Q4_0 ("q4_0x16") is the same with 288-byte blocks (as in the file): the 16 scales, then
 * uint8_t q[4][16][4] = the file's qs[4g + i] of row r (low nibble weight 4g + i + 8,
 * high nibble weight 16 + 4g + i + 8), unpacked with a mask and a shift; its start is
 * -8 * sum qs.
 *
 * IQ4_NL ("iq4_nlx16") is Q4_0's layout (the same file fields); a nibble's level plus 128
 * (1..241) is the unsigned operand of vpdpbusd, so its start is Q8_0's.
 *
 * Q4_1 ("q4_1x16"): Q4_0's layout with the rows' fp16 m after their d, 320 bytes (as in
 * the file); its nibbles are the weights' unsigned quants themselves, against plain Q8_1
 * activations (block_q8_1), and the reference's epilogue adds w.m * a.s.
 *
 * Q4_K ("q4_Kx16"): a packed block is one 256-weight super-block of 16 rows, in residue
 * order as above, 2304 bytes (as in the file):
 *     uint16_t d[16], dmin[16]       the rows' fp16 fields
 *     uint8_t scales[3][16][4]       scales[s][r][i] = byte 4s + i of row r's 12 scale bytes
 *     uint8_t q[4][8][16][4]         q[p][k][r][i] = the file's qs[32p + 4k + i] of row r
 * The nibbles are the weights themselves (0..15, the unsigned operand of vpdpbusd): low
 * nibbles of pair p are sub-block 2p, high nibbles sub-block 2p + 1. Each sub-block's
 * exact sum is multiplied by its six-bit scale in 32-bit lanes; the mins meet the
 * activation's sub-block sums in 16-bit pairs (vpdpwssd).
 *
 * Q5_K ("q5_Kx16"): the Q4_K block, then the fifth bits, 2816 bytes (as in the file):
 *     uint8_t qh[8][16][4]           qh[k][r][i] = the file's qh[4k + i] of row r
 * Weight 32j + 4k + i is its Q4_K nibble plus bit j of qh[k][r][i] times 16, 0..31.
 *
 * Q6_K ("q6_Kx16"), 3360 bytes a block (as in the file):
 *     uint16_t d[16]
 *     int8_t   scales[16][16]        scales[g][r] = the scale of sub-block g of row r
 *     uint8_t  ql[2][2][8][16][4]    ql[h][s][k][r][i] = the file's ql[64h + 32s + 4k + i]
 *     uint8_t  qh[2][8][16][4]       qh[h][k][r][i] = the file's qh[32h + 4k + i]
 * Weight 128h + 32m + 4k + i is u - 32 with u = (nibble m / 2 of ql[h][m % 2][k]) |
 * (bits 2m, 2m + 1 of qh[h][k]) << 4, 0..63, the unsigned operand of vpdpbusd; each
 * 16-weight sub-block's sum of u * a is multiplied by its scale, and the -32 comes back
 * as 32 * sum over g of scale * bsum (vpdpwssd on pairs of sub-blocks). Its activations
 * are the plain Q8_K blocks of the row kernels.
 *
 * IQ4_XS ("iq4_xsx16"), 2176 bytes a block (as in the file):
 *     uint16_t d[16], scales_h[16]   the rows' fields
 *     uint8_t  scales_l[16][4]       row r's four scale bytes (one 32-bit lane)
 *     uint8_t  q[8][4][16][4]        q[j][g][r][i] = the file's qs[16j + 4g + i] of row r
 * The low nibble of q[j][g] is weight 4g + i of sub-block j, the high nibble weight
 * 16 + 4g + i; a nibble's level plus 128 (1..241) is the unsigned operand of vpdpbusd,
 * and the 128 comes back as 128 * sum over j of scale_j * (the activation's sub-block
 * sum, ty_act_q8_Kx.msum).
 *
 * Activations for the Q8_0 and Q4_0 products are Q8_0 rows with two fields per block made ready:
 *     float d; int32_t start; int8_t qs[32]     (40 bytes)
 * d is the Q8_0 scale (fp16-rounded, as float) and start = -128 * sum qs, so that
 *     start + sum (w + 128) * a  =  sum w * a     exactly,
 * the unsigned-times-signed product vpdpbusd computes, with the correction a property of
 * the activation alone, shared by every weight row.
 */
#ifndef TOY_PACKED_H
#define TOY_PACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"

#define TOY_PACK_ROWS 16

typedef struct {
    float d;
    int32_t start;
    int8_t qs[32];
} ty_act_q8_0x;

/* Q8_K activations for packed Q4_K, Q5_K and IQ4_XS: the Q8_K scale and quants, and the sums of each
 * 32-quant sub-block (bsums 2j + 2j+1, at most 32 * 128 in magnitude). */
typedef struct {
    float d;
    int16_t msum[8];
    int8_t qs[256];
} ty_act_q8_Kx;

/* Block b of activation row j of a tile, its rows a_stride bytes apart (the products'
 * a, a_stride). */
static inline const ty_act_q8_0x *ty_act_q8_0x_at(const uint8_t *a, size_t a_stride, int j, int64_t b) {
    return (const ty_act_q8_0x *)(a + (size_t)j * a_stride) + b;
}
static inline const ty_act_q8_Kx *ty_act_q8_Kx_at(const uint8_t *a, size_t a_stride, int j, int64_t b) {
    return (const ty_act_q8_Kx *)(a + (size_t)j * a_stride) + b;
}

typedef struct {
    int type;           /* the weight type */
    int64_t block_cols; /* the columns of one weight block: 32, or 256 for K-quants */
    size_t act_block;   /* bytes of the activations of block_cols columns */
    /* One activation row of n floats (n a multiple of 32) to the packed activation
     * layout: bytes identical, where they overlap, to the vec_dot type's quantizer. */
    void (*quantize_act)(const float *x, void *y, int64_t n);
    /* y[j * y_stride + r] = row r of the packed matrix w (starting at a group) times
     * activation row j (a_stride bytes apart), for r < n_rows, j < n_a. */
    void (*gemm)(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride,
                 int64_t n_a, float *y, size_t y_stride);
    /* Optional (NULL where the kernel has none; AMX): the activations laid out once per
     * product for gemm_tiled, whose tile loads then read whole lines instead of a piece
     * of each of 16 rows. tiled_bytes(n_cols, n_a) is the size of the layout of the
     * whole chunks of 16 among n_a rows; tile_act lays out chunk c (rows 16c..16c + 15)
     * of the rows at a; gemm_tiled is gemm, bit for bit, reading the chunks from tiled. */
    size_t (*tiled_bytes)(int64_t n_cols, int64_t n_a);
    void (*tile_act)(int64_t n_cols, const void *a, size_t a_stride, int64_t c, void *tiled);
    void (*gemm_tiled)(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride,
                       int64_t n_a, const void *tiled, float *y, size_t y_stride);
} ty_packed_kernel;

/* The packed activation quantizers. Q6_K products take plain Q8_K activations, Q4_1
 * products plain Q8_1 ones: the row kernels' quantizers. */
void ty_quantize_act_q8_0x(const float *x, void *y, int64_t n);
void ty_quantize_act_q8_Kx(const float *x, void *y, int64_t n);
/* The same with AVX2 (kernels_avx2.c), for the kernels of AVX2 and above: the same bytes. */
void ty_quantize_act_q8_0x_avx2(const float *x, void *y, int64_t n);
void ty_quantize_act_q8_Kx_avx2(const float *x, void *y, int64_t n);
/* ty_quantize_act_q8_Kx through a given Q8_K quantizer */
void ty_quantize_act_q8_Kx_with(void (*quantize_q8_K)(const float *x, void *y, int64_t n), const float *x,
                                void *y, int64_t n);

/* A Q8_0 block as a packed activation block (the scale as float, the start); a Q8_K
 * block as a packed Q4_K activation block (the sums of its 32-quant sub-blocks). */
void ty_widen_q8_0(const block_q8_0 *src, ty_act_q8_0x *a);
void ty_widen_q8_K(const block_q8_K *src, ty_act_q8_Kx *a);

/* Each packed type's activations, once, for the SIMD tables: block columns, activation
 * block bytes and the (AVX2) activation quantizer. TY_PACKED(T, gemm) is an entry
 * without tiled activations. */
#define TY_PACKED_ACT_Q8_0 32, sizeof(ty_act_q8_0x), ty_quantize_act_q8_0x_avx2
#define TY_PACKED_ACT_Q4_0 32, sizeof(ty_act_q8_0x), ty_quantize_act_q8_0x_avx2
#define TY_PACKED_ACT_IQ4_NL 32, sizeof(ty_act_q8_0x), ty_quantize_act_q8_0x_avx2
#define TY_PACKED_ACT_Q4_1 32, sizeof(block_q8_1), ty_quantize_act_q8_1_avx2
#define TY_PACKED_ACT_Q4_K 256, sizeof(ty_act_q8_Kx), ty_quantize_act_q8_Kx_avx2
#define TY_PACKED_ACT_Q5_K 256, sizeof(ty_act_q8_Kx), ty_quantize_act_q8_Kx_avx2
#define TY_PACKED_ACT_IQ4_XS 256, sizeof(ty_act_q8_Kx), ty_quantize_act_q8_Kx_avx2
#define TY_PACKED_ACT_Q6_K 256, sizeof(block_q8_K), ty_quantize_act_q8_K_avx2
#define TY_PACKED(T, gemm) {TOY_TYPE_##T, TY_PACKED_ACT_##T, gemm, NULL, NULL, NULL}

/* Weights per row of a packed block of a type: 32, or a 256-weight super-block. */
static inline int64_t ty_packed_block_cols(int type) {
    return type == TOY_TYPE_Q8_0 || type == TOY_TYPE_Q4_0 || type == TOY_TYPE_Q4_1 || type == TOY_TYPE_IQ4_NL ? 32 : 256;
}

/* Bytes of one packed block (16 rows) of a type: the file's 16 blocks, the size every
 * layout above keeps; a constant wherever the type is one. */
static inline size_t ty_packed_block_bytes(int type) {
    switch (type) {
    case TOY_TYPE_Q8_0: return 16 * sizeof(block_q8_0);
    case TOY_TYPE_Q4_0: return 16 * sizeof(block_q4_0);
    case TOY_TYPE_IQ4_NL: return 16 * sizeof(block_iq4_nl);
    case TOY_TYPE_Q4_1: return 16 * sizeof(block_q4_1);
    case TOY_TYPE_Q4_K: return 16 * sizeof(block_q4_K);
    case TOY_TYPE_Q5_K: return 16 * sizeof(block_q5_K);
    case TOY_TYPE_Q6_K: return 16 * sizeof(block_q6_K);
    case TOY_TYPE_IQ4_XS: return 16 * sizeof(block_iq4_xs);
    }
    return 0;
}

/* Bytes of one packed group of 16 rows of n_cols columns; 0 when the type has no packed
 * layout. */
size_t ty_packed_group_size(int type, int64_t n_cols);

/* Packs n_rows rows (row_size bytes apart) into ceil(n_rows / 16) groups at out. */
void ty_pack_rows(int type, const void *rows, size_t row_size, int64_t n_rows, int64_t n_cols,
                  void *out);
/* The same for groups [g0, g1) only (rows 16 g0 .. 16 g1 - 1), into their places at out:
 * ranges of one matrix may be packed by different threads. */
void ty_pack_groups(int type, const void *rows, size_t row_size, int64_t n_rows, int64_t n_cols, int64_t g0,
                    int64_t g1, void *out);

/* The kernel of a type among n, NULL if none is */
const ty_packed_kernel *ty_packed_find(const ty_packed_kernel *kernels, size_t n, int type);
/* The scalar reference of a packed type, NULL if it has none. */
const ty_packed_kernel *ty_packed_scalar(int type);
/* The AVX-512 VNNI kernels (kernels_avx512.c); call only where the CPU has them. */
const ty_packed_kernel *ty_packed_avx512(int type);
/* The AMX kernels (packed_amx.c), NULL for a type they do not cover; call only where
 * ty_cpu_isa() is TY_ISA_AMX. */
const ty_packed_kernel *ty_packed_amx(int type);
/* The AVX2 kernels (packed_avx2.c); call only where the CPU has AVX2. */
const ty_packed_kernel *ty_packed_avx2(int type);
/* The same with AVX-VNNI (packed_avx2.c's *_vnni); call only where the CPU has AVX-VNNI. */
const ty_packed_kernel *ty_packed_avxvnni(int type);

/* The groups of 16 weight rows the AVX-512 and AVX2 kernels read side by side in decode
 * (one activation row): 4 or 1, the same bits either way (each group's operations are
 * the same as alone). Four streams of weights read memory faster where one stream per
 * core falls short of the bandwidth (as on the AMX Xeon measured), but slower where one
 * stream already reaches it (as on a Zen 5 EPYC). So 4 on Intel's CPUs, 1 on others;
 * TOY_DECODE_STREAMS=1 or 4 overrides. */
int ty_packed_decode_streams(void);
/* Tests: run the kernels with n streams (1 or 4), 0 for the choice above. */
void ty_packed_set_decode_streams(int n);
/* cpu.c: the choice above. */
void ty_packed_choose_decode_streams(int n);

#endif
