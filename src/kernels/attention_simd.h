/* attention_simd.h — the vector primitives of the fused attention (src/infer/
 * attention_cpu.c), one set per instruction set: dot products of a query with K rows
 * (row by row, or with a chunk of K transposed), the weighted sums of V rows into the
 * accumulators, the softmax weights of a chunk, scaling, K and V rows of the cache as
 * floats, and a running state folded with a segment's. Each is the scalar version's
 * operations in the same order on vectors, so every set gives the same bits.
 *
 * They are inline with their target attribute (TOY_AVX2, TOY_AVX512): attention_cpu.c
 * writes its tasks once over them and instantiates the tasks per instruction set, and
 * its table of tasks by instruction set dispatches them. */
#ifndef TOY_ATTENTION_SIMD_H
#define TOY_ATTENTION_SIMD_H

#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "simd.h"
#include "vec_exp.h"

/* Cells whose scores a task computes before it exponentiates them. */
#define ATTN_CHUNK 32

/* A K or V row of the cache as floats: in place for f32, else converted into buf. Every
 * conversion is exact or one rounded multiply (q8_0: q * d), so all versions agree. */
TOY_ALWAYS_INLINE const float *row_scalar(int type, const ty_type_traits *tr, const uint8_t *src,
                                      float *buf, int32_t n) {
    if (type == TOY_TYPE_F32) return (const float *)src;
    tr->to_float(src, buf, n);
    return buf;
}

#if defined(__x86_64__)

/* head_dim % 16 == 0 only (the dispatcher checks) */
TOY_AVX2 TOY_ALWAYS_INLINE float dot_avx2(int32_t n, const float *a, const float *b) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int32_t d = 0; d < n; d += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8), hi);
    }
    return ty_combine8(_mm256_add_ps(lo, hi)); /* lanes k and k + 8 first */
}
TOY_AVX2 static inline void dots_avx2(int32_t n, int32_t n_rows, const float *const *rows, const float *q,
                                  float *out) {
    for (int32_t r = 0; r < n_rows; r++) out[r] = dot_avx2(n, rows[r], q);
}

/* ktdots_avx512 on 8-lane vectors: two query rows and 16 cells (two vectors) at a time,
 * L_k of both rows in 8 chains of FMAs, each transposed K vector loaded once for both */
TOY_AVX2 TOY_ALWAYS_INLINE void ktleaf2_avx2(int32_t n, const float *kt, const float *const *q, int k, __m256 L[2][2]) {
    __m256 a[2][2], b[2][2];
    TOY_UNROLL16
    for (int i = 0; i < 2; i++) a[i][0] = a[i][1] = b[i][0] = b[i][1] = _mm256_setzero_ps();
    for (int32_t d = k; d < n; d += 16) {
        const float *ka = kt + (size_t)d * ATTN_CHUNK, *kb = ka + 8 * ATTN_CHUNK;
        __m256 ka0 = _mm256_loadu_ps(ka), ka1 = _mm256_loadu_ps(ka + 8);
        __m256 kb0 = _mm256_loadu_ps(kb), kb1 = _mm256_loadu_ps(kb + 8);
        /* in registers: gcc would fold the loads into both rows' FMAs, loading each twice,
         * and the loads (two a cycle) would bound the FMAs */
        __asm__("" : "+x"(ka0), "+x"(ka1), "+x"(kb0), "+x"(kb1));
        TOY_UNROLL16
        for (int i = 0; i < 2; i++) {
            const __m256 qa = _mm256_broadcast_ss(q[i] + d), qb = _mm256_broadcast_ss(q[i] + d + 8);
            a[i][0] = _mm256_fmadd_ps(ka0, qa, a[i][0]);
            a[i][1] = _mm256_fmadd_ps(ka1, qa, a[i][1]);
            b[i][0] = _mm256_fmadd_ps(kb0, qb, b[i][0]);
            b[i][1] = _mm256_fmadd_ps(kb1, qb, b[i][1]);
        }
    }
    TOY_UNROLL16
    for (int i = 0; i < 2; i++) L[i][0] = _mm256_add_ps(a[i][0], b[i][0]), L[i][1] = _mm256_add_ps(a[i][1], b[i][1]);
}
/* Two query rows' scores of 16 cells (out rows ATTN_CHUNK apart), combined as ktrows_avx512 */
TOY_AVX2 TOY_ALWAYS_INLINE void ktrows2_avx2(int32_t n, const float *kt, const float *const *q, float *out) {
    __m256 x[2][2], y[2][2], m0[2][2], n0[2][2], m1[2][2];
#define KT_SUM(dst, u, v) TOY_UNROLL16 for (int i = 0; i < 2; i++) for (int e = 0; e < 2; e++) dst[i][e] = _mm256_add_ps(u[i][e], v[i][e])
    ktleaf2_avx2(n, kt, q, 0, x);
    ktleaf2_avx2(n, kt, q, 4, y);
    KT_SUM(m0, x, y); /* M_0 */
    ktleaf2_avx2(n, kt, q, 2, x);
    ktleaf2_avx2(n, kt, q, 6, y);
    KT_SUM(x, x, y); /* M_2 */
    KT_SUM(n0, m0, x);
    ktleaf2_avx2(n, kt, q, 1, x);
    ktleaf2_avx2(n, kt, q, 5, y);
    KT_SUM(m1, x, y); /* M_1 */
    ktleaf2_avx2(n, kt, q, 3, x);
    ktleaf2_avx2(n, kt, q, 7, y);
    KT_SUM(x, x, y); /* M_3 */
    KT_SUM(y, m1, x); /* N_1 */
    KT_SUM(x, n0, y);
#undef KT_SUM
    TOY_UNROLL16
    for (int i = 0; i < 2; i++)
        _mm256_storeu_ps(out + i * ATTN_CHUNK, x[i][0]), _mm256_storeu_ps(out + i * ATTN_CHUNK + 8, x[i][1]);
}
TOY_AVX2 static inline void ktdots_avx2(int32_t n, const float *kt, int32_t R, int32_t G, const float *q0,
                                    size_t tok_stride, float *out) {
    const float *q[2];
    int32_t tt = 0, h = 0; /* row r is head h of token tt */
    for (int32_t r = 0; r < R; r += 2) {
        q[0] = q0 + (size_t)tt * tok_stride + (size_t)h * (size_t)n;
        if (++h == G) h = 0, tt++;
        q[1] = r + 1 < R ? q0 + (size_t)tt * tok_stride + (size_t)h * (size_t)n : q[0]; /* an odd R: row R - 1 twice */
        if (++h == G) h = 0, tt++;
        float pair[2 * ATTN_CHUNK];
        float *o = r + 1 < R ? out + (size_t)r * ATTN_CHUNK : pair;
        ktrows2_avx2(n, kt, q, o);
        ktrows2_avx2(n, kt + 16, q, o + 16);
        if (o == pair) memcpy(out + (size_t)r * ATTN_CHUNK, pair, ATTN_CHUNK * sizeof *out);
    }
}
/* accum_scalar with 32 elements of acc in four registers through all the cells */
TOY_AVX2 TOY_ALWAYS_INLINE void accum1_avx2(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                    const float *const *rows, float *acc) {
    int32_t d = 0;
    for (; d + 32 <= n; d += 32) {
        __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);
        __m256 a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
        for (int32_t r = 0; r < n_live; r++) {
            const __m256 vw = _mm256_set1_ps(w[live[r]]);
            const float *v = rows[r] + d;
            a0 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(v), a0);
            a1 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(v + 8), a1);
            a2 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(v + 16), a2);
            a3 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(v + 24), a3);
        }
        _mm256_storeu_ps(acc + d, a0);
        _mm256_storeu_ps(acc + d + 8, a1);
        _mm256_storeu_ps(acc + d + 16, a2);
        _mm256_storeu_ps(acc + d + 24, a3);
    }
    for (; d < n; d += 8) {
        __m256 a = _mm256_loadu_ps(acc + d);
        for (int32_t r = 0; r < n_live; r++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(w[live[r]]), _mm256_loadu_ps(rows[r] + d), a);
        _mm256_storeu_ps(acc + d, a);
    }
}
/* Elements [d, d + 32) of the sums of two heads (n apart; weights ATTN_CHUNK apart) in 8
 * registers through all the cells: each V vector loaded once for both, and 8 chains of
 * FMAs in flight (one head's 4 wait on the FMA latency) */
TOY_AVX2 TOY_ALWAYS_INLINE void accum32_pair_avx2(int32_t n, int32_t d, int32_t n_live, const int32_t *live, const float *w,
                                          const float *const *rows, float *acc) {
    __m256 a[2][4];
    TOY_UNROLL16
    for (int h = 0; h < 2; h++)
        TOY_UNROLL16
        for (int i = 0; i < 4; i++) a[h][i] = _mm256_loadu_ps(acc + (size_t)h * n + d + 8 * i);
    for (int32_t r = 0; r < n_live; r++) {
        const float *v = rows[r] + d;
        const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
        const __m256 v2 = _mm256_loadu_ps(v + 16), v3 = _mm256_loadu_ps(v + 24);
        TOY_UNROLL16
        for (int h = 0; h < 2; h++) {
            const __m256 vw = _mm256_set1_ps(w[h * ATTN_CHUNK + live[r]]);
            a[h][0] = _mm256_fmadd_ps(vw, v0, a[h][0]);
            a[h][1] = _mm256_fmadd_ps(vw, v1, a[h][1]);
            a[h][2] = _mm256_fmadd_ps(vw, v2, a[h][2]);
            a[h][3] = _mm256_fmadd_ps(vw, v3, a[h][3]);
        }
    }
    TOY_UNROLL16
    for (int h = 0; h < 2; h++)
        TOY_UNROLL16
        for (int i = 0; i < 4; i++) _mm256_storeu_ps(acc + (size_t)h * n + d + 8 * i, a[h][i]);
}
/* The heads two at a time where head_dim is whole blocks of 32, else one by one. */
TOY_AVX2 static inline void accum_avx2(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                   int32_t n_heads, const float *const *rows, float *acc) {
    int32_t h = 0;
    if (n % 32 == 0)
        for (; h + 2 <= n_heads; h += 2)
            for (int32_t d = 0; d < n; d += 32)
                accum32_pair_avx2(n, d, n_live, live, w + (size_t)h * ATTN_CHUNK, rows, acc + (size_t)h * n);
    for (; h < n_heads; h++)
        accum1_avx2(n, n_live, live, w + (size_t)h * ATTN_CHUNK, rows, acc + (size_t)h * n);
}
/* accum_scalar of MR rows (weights ATTN_CHUNK apart, sums n apart) over all nc cells of
 * a chunk, elements [d, d + 16) of each: 2 MR sums in registers, each V vector pair
 * loaded once for the MR rows. */
TOY_AVX2 TOY_ALWAYS_INLINE void accum16_rows_avx2(int32_t n, int32_t d, const int MR, int32_t nc, const float *w,
                                          const float *const *rows, float *acc) {
    __m256 a[6][2];
    TOY_UNROLL16
    for (int r = 0; r < MR; r++)
        a[r][0] = _mm256_loadu_ps(acc + (size_t)r * n + d), a[r][1] = _mm256_loadu_ps(acc + (size_t)r * n + d + 8);
    for (int32_t c = 0; c < nc; c++) {
        const __m256 v0 = _mm256_loadu_ps(rows[c] + d), v1 = _mm256_loadu_ps(rows[c] + d + 8);
        TOY_UNROLL16
        for (int r = 0; r < MR; r++) {
            const __m256 vw = _mm256_broadcast_ss(w + r * ATTN_CHUNK + c);
            a[r][0] = _mm256_fmadd_ps(vw, v0, a[r][0]);
            a[r][1] = _mm256_fmadd_ps(vw, v1, a[r][1]);
        }
    }
    TOY_UNROLL16
    for (int r = 0; r < MR; r++)
        _mm256_storeu_ps(acc + (size_t)r * n + d, a[r][0]), _mm256_storeu_ps(acc + (size_t)r * n + d + 8, a[r][1]);
}
/* accum_avx2 for rows that see every cell of the chunk: six rows at a time (12 sums, two
 * V vectors and a weight fill the 16 registers), so each V vector serves six rows. */
TOY_AVX2 static inline void accum_all_avx2(int32_t n, int32_t nc, const float *w, int32_t n_rows,
                                       const float *const *rows, float *acc) {
    for (int32_t r = 0; r < n_rows; r += 6) {
        const float *wr = w + (size_t)r * ATTN_CHUNK;
        float *ar = acc + (size_t)r * n;
        for (int32_t d = 0; d < n; d += 16) switch (n_rows - r < 6 ? n_rows - r : 6) {
            case 1: accum16_rows_avx2(n, d, 1, nc, wr, rows, ar); break;
            case 2: accum16_rows_avx2(n, d, 2, nc, wr, rows, ar); break;
            case 3: accum16_rows_avx2(n, d, 3, nc, wr, rows, ar); break;
            case 4: accum16_rows_avx2(n, d, 4, nc, wr, rows, ar); break;
            case 5: accum16_rows_avx2(n, d, 5, nc, wr, rows, ar); break;
            default: accum16_rows_avx2(n, d, 6, nc, wr, rows, ar); break;
            }
    }
}
/* head_dim % 16 == 0; a q8_0 cache also has head_dim % 32 == 0 (ty_kv_cache_init) */
TOY_AVX2 static inline const float *row_avx2(int type, const ty_type_traits *tr, const uint8_t *src,
                                         float *buf, int32_t n) {
    switch (type) {
    case TOY_TYPE_F32:
        return (const float *)src;
    case TOY_TYPE_F16:
        for (int32_t d = 0; d < n; d += 8)
            _mm256_storeu_ps(buf + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * d))));
        return buf;
    case TOY_TYPE_BF16:
        for (int32_t d = 0; d < n; d += 8) {
            const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + 2 * d)));
            _mm256_storeu_ps(buf + d, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
        }
        return buf;
    case TOY_TYPE_Q8_0:
        for (int32_t b = 0; b < n / QK8_0; b++) {
            const block_q8_0 *blk = (const block_q8_0 *)src + b;
            const __m256 d = _mm256_set1_ps(ty_fp16_to_fp32(blk->d));
            for (int32_t k = 0; k < QK8_0; k += 8) {
                const __m128i q = _mm_loadl_epi64((const __m128i *)(blk->qs + k));
                const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
                _mm256_storeu_ps(buf + b * QK8_0 + k, _mm256_mul_ps(f, d));
            }
        }
        return buf;
    default:
        return row_scalar(type, tr, src, buf, n);
    }
}
TOY_AVX2 TOY_ALWAYS_INLINE void scal_avx2(int32_t n, float s, float *acc) {
    const __m256 vs = _mm256_set1_ps(s);
    for (int32_t d = 0; d < n; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vs));
}

/* weights4_avx512 (below) on 8-lane vectors, four per row */
TOY_AVX2 static inline void weights4_avx2(int32_t hd, int32_t nc, uint32_t visible, float scale, const int NR, float *w,
                                      float *m, float *l, float *acc) {
    const __m256 minf = _mm256_set1_ps(-INFINITY), s = _mm256_set1_ps(scale);
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 vis[4], in[4];
    for (int v = 0; v < 4; v++) {
        const __m256i bits = _mm256_and_si256(_mm256_set1_epi32((int)(visible >> (8 * v))), bit);
        in[v] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nc - 8 * v), lane));
        vis[v] = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(bits, bit)), in[v]);
    }
    __m256 x[4][4];
    float cmax[4], dm[8] = {0}, corr[8];
    for (int r = 0; r < NR; r++) {
        __m256 mx = minf;
        for (int v = 0; v < 4; v++) {
            x[r][v] = _mm256_blendv_ps(minf, _mm256_mul_ps(_mm256_loadu_ps(w + r * ATTN_CHUNK + 8 * v), s), vis[v]);
            mx = _mm256_max_ps(x[r][v], mx); /* x NaN: mx stays */
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        cmax[r] = _mm_cvtss_f32(h);
        dm[r] = m[r] - cmax[r];
    }
    _mm256_storeu_ps(corr, ty_exp8_nonpos(_mm256_loadu_ps(dm)));
    for (int r = 0; r < NR; r++) {
        const bool grow = cmax[r] > m[r];
        if (grow) { /* else a rescale by 1, which changes no bit */
            scal_avx2(hd, corr[r], acc + (size_t)r * hd);
            l[r] *= corr[r];
        }
        m[r] = grow ? cmax[r] : m[r];
    }
    /* the exponentials of all the rows at once */
    __m256 e[4][4];
    for (int r = 0; r < NR; r++)
        for (int v = 0; v < 4; v++) e[r][v] = _mm256_sub_ps(x[r][v], _mm256_set1_ps(m[r]));
    ty_exp8x_nonpos(4 * NR, e[0]);
    for (int r = 0; r < NR; r++) {
        for (int v = 0; v < 4; v++) {
            e[r][v] = _mm256_and_ps(e[r][v], in[v]);
            _mm256_storeu_ps(w + r * ATTN_CHUNK + 8 * v, e[r][v]);
        }
        /* chunk_sum_scalar: lane k holds cells k and k + 16, then lanes16_sum */
        l[r] += ty_combine8(_mm256_add_ps(_mm256_add_ps(e[r][0], e[r][2]), _mm256_add_ps(e[r][1], e[r][3])));
    }
}
TOY_AVX512 TOY_ALWAYS_INLINE float dot_avx512(int32_t n, const float *a, const float *b) {
    __m512 acc = _mm512_setzero_ps();
    for (int32_t d = 0; d < n; d += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc);
    return ty_combine16(acc);
}
/* dots_scalar for 16 rows at once: 16 lane accumulators, then the combine of all 16
 * transposed, one level per step (k + 8, k + 4, k + 2, k + 1), each step adding the
 * same pairs of lanes as lanes16_sum. After the last step row L + 4p sits in element
 * 4L + p. */
TOY_AVX512 TOY_ALWAYS_INLINE __m512 dots16_avx512(int32_t n, const float *const *rows, const float *q) {
    __m512 acc[16];
    TOY_UNROLL16
    for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
    for (int32_t d = 0; d < n; d += 16) {
        const __m512 qv = _mm512_loadu_ps(q + d);
        TOY_UNROLL16
        for (int r = 0; r < 16; r++) acc[r] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(rows[r] + d), acc[r]);
    }
    __m512 c[8], e[4], g[2];
    TOY_UNROLL16
    for (int j = 0; j < 8; j++) /* k + 8: [row 2j's 8 | row 2j + 1's 8] */
        c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * j], acc[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(acc[2 * j], acc[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    TOY_UNROLL16
    for (int i = 0; i < 4; i++) /* k + 4: 128-bit lane L holds row 4i + L's 4 */
        e[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    TOY_UNROLL16
    for (int u = 0; u < 2; u++) /* k + 2: lane L holds rows 8u + L and 8u + 4 + L, 2 each */
        g[u] = _mm512_add_ps(_mm512_shuffle_ps(e[2 * u], e[2 * u + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(e[2 * u], e[2 * u + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* k + 1: lane L holds rows L, 4 + L, 8 + L, 12 + L */
    return _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
TOY_AVX512 static inline void dots_avx512(int32_t n, int32_t n_rows, const float *const *rows,
                                      const float *q, float *out) {
    /* element 4L + p holds row L + 4p: gather row r from element 4 (r % 4) + r / 4 */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    int32_t r = 0;
    for (; r + 16 <= n_rows; r += 16)
        _mm512_storeu_ps(out + r, _mm512_permutexvar_ps(order, dots16_avx512(n, rows + r, q)));
    for (; r < n_rows; r++) out[r] = dot_avx512(n, rows[r], q);
}

/* ktdots_scalar with cells in the lanes: P_k, the sum of lane k (elements d = k, k + 16,
 * ...), is a chain of FMAs per cell, and the pairwise combine of the 16 lanes is done on
 * whole vectors of cells in the order of lanes16_sum: L_k = P_k + P_(k+8), M_k = L_k +
 * L_(k+4), N_k = M_k + M_(k+2), N_0 + N_1. No horizontal sums; each transposed K vector
 * is loaded once for four query rows. */
TOY_AVX512 TOY_ALWAYS_INLINE void ktleaf_avx512(int32_t n, const float *kt, const int NQ, const float *const *q, int k,
                                        __m512 L[4][2]) {
    __m512 a[4][2], b[4][2];
    TOY_UNROLL16
    for (int i = 0; i < NQ; i++) a[i][0] = a[i][1] = b[i][0] = b[i][1] = _mm512_setzero_ps();
    for (int32_t d = k; d < n; d += 16) {
        const float *ka = kt + (size_t)d * ATTN_CHUNK, *kb = ka + 8 * ATTN_CHUNK;
        __m512 ka0 = _mm512_loadu_ps(ka), ka1 = _mm512_loadu_ps(ka + 16);
        __m512 kb0 = _mm512_loadu_ps(kb), kb1 = _mm512_loadu_ps(kb + 16);
        /* in registers, as in ktleaf2_avx2: folded into the FMAs, each would be loaded
         * once per row, and the loads would bound the FMAs */
        __asm__("" : "+v"(ka0), "+v"(ka1), "+v"(kb0), "+v"(kb1));
        TOY_UNROLL16
        for (int i = 0; i < NQ; i++) {
            const __m512 qa = _mm512_set1_ps(q[i][d]), qb = _mm512_set1_ps(q[i][d + 8]);
            a[i][0] = _mm512_fmadd_ps(ka0, qa, a[i][0]);
            a[i][1] = _mm512_fmadd_ps(ka1, qa, a[i][1]);
            b[i][0] = _mm512_fmadd_ps(kb0, qb, b[i][0]);
            b[i][1] = _mm512_fmadd_ps(kb1, qb, b[i][1]);
        }
    }
    TOY_UNROLL16
    for (int i = 0; i < NQ; i++) L[i][0] = _mm512_add_ps(a[i][0], b[i][0]), L[i][1] = _mm512_add_ps(a[i][1], b[i][1]);
}
/* NQ (at most 4) query rows' scores of the 32 cells */
TOY_AVX512 TOY_ALWAYS_INLINE void ktrows_avx512(int32_t n, const float *kt, const int NQ, const float *const *q,
                                        float *out) {
    __m512 x[4][2], y[4][2], m0[4][2], n0[4][2], m1[4][2];
#define KT_SUM(dst, u, v) TOY_UNROLL16 for (int i = 0; i < NQ; i++) for (int e = 0; e < 2; e++) dst[i][e] = _mm512_add_ps(u[i][e], v[i][e])
    ktleaf_avx512(n, kt, NQ, q, 0, x);
    ktleaf_avx512(n, kt, NQ, q, 4, y);
    KT_SUM(m0, x, y); /* M_0 */
    ktleaf_avx512(n, kt, NQ, q, 2, x);
    ktleaf_avx512(n, kt, NQ, q, 6, y);
    KT_SUM(x, x, y); /* M_2 */
    KT_SUM(n0, m0, x);
    ktleaf_avx512(n, kt, NQ, q, 1, x);
    ktleaf_avx512(n, kt, NQ, q, 5, y);
    KT_SUM(m1, x, y); /* M_1 */
    ktleaf_avx512(n, kt, NQ, q, 3, x);
    ktleaf_avx512(n, kt, NQ, q, 7, y);
    KT_SUM(x, x, y); /* M_3 */
    KT_SUM(y, m1, x); /* N_1 */
    KT_SUM(x, n0, y);
#undef KT_SUM
    TOY_UNROLL16
    for (int i = 0; i < NQ; i++)
        _mm512_storeu_ps(out + i * ATTN_CHUNK, x[i][0]), _mm512_storeu_ps(out + i * ATTN_CHUNK + 16, x[i][1]);
}
TOY_AVX512 static inline void ktdots_avx512(int32_t n, const float *kt, int32_t R, int32_t G, const float *q0,
                                        size_t tok_stride, float *out) {
    const float *q[4];
    int32_t tt = 0, h = 0; /* row r is head h of token tt */
    for (int32_t r = 0; r < R;) {
        const int32_t nq = R - r < 4 ? R - r : 4;
        for (int32_t i = 0; i < nq; i++) {
            q[i] = q0 + (size_t)tt * tok_stride + (size_t)h * (size_t)n;
            if (++h == G) h = 0, tt++;
        }
        switch (nq) {
        case 4: ktrows_avx512(n, kt, 4, q, out + (size_t)r * ATTN_CHUNK); break;
        case 3: ktrows_avx512(n, kt, 3, q, out + (size_t)r * ATTN_CHUNK); break;
        case 2: ktrows_avx512(n, kt, 2, q, out + (size_t)r * ATTN_CHUNK); break;
        default: ktrows_avx512(n, kt, 1, q, out + (size_t)r * ATTN_CHUNK); break;
        }
        r += nq;
    }
}

TOY_AVX512 TOY_ALWAYS_INLINE __mmask16 lanes_below(int32_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}
TOY_AVX512 static inline int32_t live_avx512(int32_t nc, const int32_t *kpos, int32_t qpos,
                                         int32_t n_swa, int32_t *live) {
    const __m512i q = _mm512_set1_epi32(qpos);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int32_t n = 0;
    for (int32_t i = 0; i < nc; i += 16) {
        const __mmask16 in = lanes_below(nc - i);
        const __m512i k = _mm512_maskz_loadu_epi32(in, kpos + i);
        __mmask16 ok = _mm512_mask_cmple_epi32_mask(in, k, q);
        if (n_swa > 0) ok &= _mm512_cmplt_epi32_mask(_mm512_sub_epi32(q, k), _mm512_set1_epi32(n_swa));
        _mm512_mask_compressstoreu_epi32(live + n, ok, _mm512_add_epi32(lane, _mm512_set1_epi32(i)));
        n += __builtin_popcount(ok);
    }
    return n;
}

/* Elements [d, d + 64) of the sums of H heads (n apart; weights ATTN_CHUNK apart) in
 * 4 H registers through all the cells: each V row is loaded once for the H heads. */
TOY_AVX512 TOY_ALWAYS_INLINE void accum64_heads_avx512(int32_t n, int32_t d, const int H, int32_t n_live, const int32_t *live,
                                               const float *w, const float *const *rows, float *acc) {
    __m512 a[4][4];
    TOY_UNROLL16
    for (int h = 0; h < H; h++)
        TOY_UNROLL16
        for (int i = 0; i < 4; i++) a[h][i] = _mm512_loadu_ps(acc + (size_t)h * n + d + 16 * i);
    for (int32_t r = 0; r < n_live; r++) {
        const float *v = rows[r] + d;
        const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
        const __m512 v2 = _mm512_loadu_ps(v + 32), v3 = _mm512_loadu_ps(v + 48);
        TOY_UNROLL16
        for (int h = 0; h < H; h++) {
            const __m512 vw = _mm512_set1_ps(w[h * ATTN_CHUNK + live[r]]);
            a[h][0] = _mm512_fmadd_ps(vw, v0, a[h][0]);
            a[h][1] = _mm512_fmadd_ps(vw, v1, a[h][1]);
            a[h][2] = _mm512_fmadd_ps(vw, v2, a[h][2]);
            a[h][3] = _mm512_fmadd_ps(vw, v3, a[h][3]);
        }
    }
    TOY_UNROLL16
    for (int h = 0; h < H; h++)
        TOY_UNROLL16
        for (int i = 0; i < 4; i++) _mm512_storeu_ps(acc + (size_t)h * n + d + 16 * i, a[h][i]);
}
/* accum1 (one head) with 64 elements of acc in four registers through all the cells */
TOY_AVX512 TOY_ALWAYS_INLINE void accum1_avx512(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                        const float *const *rows, float *acc) {
    int32_t d = 0;
    for (; d + 64 <= n; d += 64) {
        __m512 a0 = _mm512_loadu_ps(acc + d), a1 = _mm512_loadu_ps(acc + d + 16);
        __m512 a2 = _mm512_loadu_ps(acc + d + 32), a3 = _mm512_loadu_ps(acc + d + 48);
        for (int32_t r = 0; r < n_live; r++) {
            const __m512 vw = _mm512_set1_ps(w[live[r]]);
            const float *v = rows[r] + d;
            a0 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(v + 16), a1);
            a2 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(v + 32), a2);
            a3 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(v + 48), a3);
        }
        _mm512_storeu_ps(acc + d, a0);
        _mm512_storeu_ps(acc + d + 16, a1);
        _mm512_storeu_ps(acc + d + 32, a2);
        _mm512_storeu_ps(acc + d + 48, a3);
    }
    for (; d < n; d += 16) {
        __m512 a = _mm512_loadu_ps(acc + d);
        for (int32_t r = 0; r < n_live; r++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[live[r]]), _mm512_loadu_ps(rows[r] + d), a);
        _mm512_storeu_ps(acc + d, a);
    }
}
/* The heads four at a time where head_dim is whole blocks of 64, else one by one. */
TOY_AVX512 static inline void accum_avx512(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                       int32_t n_heads, const float *const *rows, float *acc) {
    int32_t h = 0;
    if (n % 64 == 0)
        for (; h < n_heads; h += 4) {
            const float *wh = w + (size_t)h * ATTN_CHUNK;
            float *ah = acc + (size_t)h * n;
            for (int32_t d = 0; d < n; d += 64) switch (n_heads - h < 4 ? n_heads - h : 4) {
                case 1: accum64_heads_avx512(n, d, 1, n_live, live, wh, rows, ah); break;
                case 2: accum64_heads_avx512(n, d, 2, n_live, live, wh, rows, ah); break;
                case 3: accum64_heads_avx512(n, d, 3, n_live, live, wh, rows, ah); break;
                default: accum64_heads_avx512(n, d, 4, n_live, live, wh, rows, ah); break;
                }
        }
    for (; h < n_heads; h++) accum1_avx512(n, n_live, live, w + (size_t)h * ATTN_CHUNK, rows, acc + (size_t)h * n);
}
TOY_AVX512 static inline const float *row_avx512(int type, const ty_type_traits *tr, const uint8_t *src,
                                           float *buf, int32_t n) {
    if (type != TOY_TYPE_F16) return row_avx2(type, tr, src, buf, n);
    for (int32_t d = 0; d < n; d += 16)
        _mm512_storeu_ps(buf + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 2 * d))));
    return buf;
}
TOY_AVX512 TOY_ALWAYS_INLINE void scal_avx512(int32_t n, float s, float *acc) {
    const __m512 vs = _mm512_set1_ps(s);
    for (int32_t d = 0; d < n; d += 16) _mm512_storeu_ps(acc + d, _mm512_mul_ps(_mm512_loadu_ps(acc + d), vs));
}

/* weights4_scalar with the NR rows side by side, each chunk's two vectors of 16 in
 * registers: max_scalar's maximum (a NaN score leaves the maximum as it was; the order of
 * a maximum changes nothing), one exp16 for the rows' rescale factors and exp16 of w - m
 * (ty_exp_nonpos lane by lane), chunk_sum_scalar's lanes and pairs; a row's sums are
 * rescaled only where its maximum grew, as in weights4_scalar. */
TOY_AVX512 static inline void weights4_avx512(int32_t hd, int32_t nc, uint32_t visible, float scale, const int NR,
                                          float *w, float *m, float *l, float *acc) {
    const __m512 minf = _mm512_set1_ps(-INFINITY), s = _mm512_set1_ps(scale);
    const __mmask16 in0 = lanes_below(nc), in1 = lanes_below(nc - 16);
    const __mmask16 vis0 = (__mmask16)visible & in0, vis1 = (__mmask16)(visible >> 16) & in1;
    __m512 x0[4], x1[4];
    float cmax[4], dm[16] = {0}, corr[16];
    TOY_UNROLL16
    for (int r = 0; r < NR; r++) {
        x0[r] = _mm512_mask_mul_ps(minf, vis0, _mm512_loadu_ps(w + r * ATTN_CHUNK), s);
        x1[r] = _mm512_mask_mul_ps(minf, vis1, _mm512_loadu_ps(w + r * ATTN_CHUNK + 16), s);
        __m512 mx = _mm512_mask_max_ps(minf, in0, x0[r], minf);
        mx = _mm512_mask_max_ps(mx, in1, x1[r], mx);
        cmax[r] = _mm512_reduce_max_ps(mx);
        dm[r] = m[r] - cmax[r];
    }
    _mm512_storeu_ps(corr, ty_exp16_nonpos(_mm512_loadu_ps(dm)));
    TOY_UNROLL16
    for (int r = 0; r < NR; r++) {
        const bool grow = cmax[r] > m[r];
        if (grow) { /* else a rescale by 1, which changes no bit */
            scal_avx512(hd, corr[r], acc + (size_t)r * hd);
            l[r] *= corr[r];
        }
        m[r] = grow ? cmax[r] : m[r];
    }
    /* all the rows' exponentials, then their stores and sums */
    __m512 e0[4], e1[4];
    TOY_UNROLL16
    for (int r = 0; r < NR; r++) {
        const __m512 vm = _mm512_set1_ps(m[r]);
        e0[r] = _mm512_maskz_mov_ps(in0, ty_exp16_nonpos(_mm512_sub_ps(x0[r], vm)));
        e1[r] = _mm512_maskz_mov_ps(in1, ty_exp16_nonpos(_mm512_sub_ps(x1[r], vm)));
    }
    TOY_UNROLL16
    for (int r = 0; r < NR; r++) {
        _mm512_storeu_ps(w + r * ATTN_CHUNK, e0[r]);
        _mm512_storeu_ps(w + r * ATTN_CHUNK + 16, e1[r]);
        const __m512 v = _mm512_add_ps(e0[r], e1[r]);
        l[r] += ty_combine16(v);
    }
}
/* exps[i] = exp(x[i]) for one vector, 8 or 16 floats (ty_exp_nonpos lane by lane) */
TOY_AVX2 static inline void exps8_avx2(const float *x, float *exps) {
    _mm256_storeu_ps(exps, ty_exp8_nonpos(_mm256_loadu_ps(x)));
}
TOY_AVX512 static inline void exps16_avx512(const float *x, float *exps) {
    _mm512_storeu_ps(exps, ty_exp16_nonpos(_mm512_loadu_ps(x)));
}
/* ra[d] = ra[d] * ca + as[d] * cs for d < hd, a vector at a time */
TOY_AVX2 static inline void fold_row_avx2(int32_t hd, float *ra, const float *as, float ca, float cs) {
    for (int32_t d = 0; d < hd; d += 8)
        _mm256_storeu_ps(ra + d, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(ra + d), _mm256_set1_ps(ca)),
                                               _mm256_mul_ps(_mm256_loadu_ps(as + d), _mm256_set1_ps(cs))));
}
TOY_AVX512 static inline void fold_row_avx512(int32_t hd, float *ra, const float *as, float ca, float cs) {
    for (int32_t d = 0; d < hd; d += 16)
        _mm512_storeu_ps(ra + d, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(ra + d), _mm512_set1_ps(ca)),
                                               _mm512_mul_ps(_mm512_loadu_ps(as + d), _mm512_set1_ps(cs))));
}
#endif

#endif
