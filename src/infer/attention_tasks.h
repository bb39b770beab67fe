/* attention_tasks.h — the CPU attention tasks, included by attention_cpu.c once per
 * instruction set with the names of its functions defined (ATTN_TASK, ATTN_SEGMENT,
 * ATTN_WEIGHTS, ATTN_BLOCK_TASK, ATTN_BLOCK_SEGMENT, ATTN_CONVERT_TASK), ATTN_TARGET (a
 * target attribute or nothing) and the inline helpers of that set (ATTN_DOTS,
 * ATTN_KTDOTS, ATTN_WEIGHTS4, ATTN_ACCUM, ATTN_ROW, ATTN_LIVE, ATTN_FOLD); it undefines them all at
 * its end. One text, so the scalar and the vector versions cannot drift apart; the
 * helpers produce the same bits in every version (see attention_cpu.c). */

/* The scores of a chunk (w, nc of them) of n_rows query rows of one token become their
 * weights: soft-capped, scaled, -inf where the token does not see the cell (bit i of
 * visible clear); each row's maximum m[r], sum of weights l[r] and sums acc (rows hd
 * apart) rescaled if its maximum grew; w[i] = exp(w[i] - m[r]); l[r] += their sum. Rows
 * are ATTN_CHUNK scores apart; ATTN_WEIGHTS4 takes them four at a time. */
ATTN_TARGET static inline void ATTN_WEIGHTS(int32_t hd, int32_t nc, uint32_t visible, float scale, float cap,
                                            int32_t n_rows, float *w, float *m, float *l, float *acc) {
    if (cap > 0.0f)
        for (int32_t r = 0; r < n_rows; r++)
            for (int32_t i = 0; i < nc; i++)
                w[(size_t)r * ATTN_CHUNK + i] = tanhf(w[(size_t)r * ATTN_CHUNK + i] * (1.0f / cap)) * cap;
    for (int32_t r = 0; r < n_rows; r += 4) {
        float *wr = w + (size_t)r * ATTN_CHUNK, *ar = acc + (size_t)r * hd;
        switch (n_rows - r < 4 ? n_rows - r : 4) {
        case 1: ATTN_WEIGHTS4(hd, nc, visible, scale, 1, wr, m + r, l + r, ar); break;
        case 2: ATTN_WEIGHTS4(hd, nc, visible, scale, 2, wr, m + r, l + r, ar); break;
        case 3: ATTN_WEIGHTS4(hd, nc, visible, scale, 3, wr, m + r, l + r, ar); break;
        default: ATTN_WEIGHTS4(hd, nc, visible, scale, 4, wr, m + r, l + r, ar); break;
        }
    }
}

/* One token and one KV head: the query heads sharing that KV head go through the cells
 * together, so each K and V row is read (and converted to float) once for the group. A
 * half or 8-bit cache rounds only K and V, not the queries: ggml would round the queries
 * to K's type too, which doubles the error of a q8_0 cache on models with large scores
 * (the gemma2 fixture: median relRMS 0.102 against 0.072).
 *
 * The cells of a sequence are cut into segments of ATTN_SEGMENT_CELLS, each a fresh
 * online (flash-style) softmax over chunks of ATTN_CHUNK cells: the chunk's K and V rows
 * as floats and its scores first, then per head one rescale of the running sum if the
 * maximum grew, the weighted V rows, accumulated in registers, and the chunk's sum of
 * weights (16 lanes combined pairwise) added to the running sum. The segments are then
 * folded in order (attn_fold). The cut depends only on the cell index, so the result
 * does not depend on the batch or the threads; in decode, the segments of one token can
 * run on different threads. */
ATTN_TARGET static inline void ATTN_SEGMENT(const attn_job *j, int64_t t, int32_t g, int32_t head0,
                                            int32_t group, int32_t c_begin, int32_t c_end,
                                            float *acc, float *m, float *l, float *ws) {
    const ty_attn_params *p = j->p;
    const ty_kv_view *kv = j->kv;
    const int32_t hd = p->head_dim;
    float *scores = ws, *kbuf = scores + (size_t)group * ATTN_CHUNK;
    float *vbuf = kbuf + (size_t)ATTN_CHUNK * hd;
    const float *q = j->q + (t * p->n_head + head0) * hd;
    for (int32_t h = 0; h < group; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
    }
    memset(acc, 0, (size_t)group * hd * sizeof *acc);
    const int32_t seq = j->seq_id[t], qpos = j->pos[t];
    const int64_t base = (int64_t)seq * kv->cells_per_seq;
    /* the sequence's rows of KV head g follow each other from here */
    const size_t head_row = ((size_t)seq * (size_t)p->n_head_kv + (size_t)g) * (size_t)kv->cells_per_seq;
    for (int32_t c0 = c_begin; c0 < c_end; c0 += ATTN_CHUNK) {
        const int32_t nc = c_end - c0 < ATTN_CHUNK ? c_end - c0 : ATTN_CHUNK;
        /* the cells this query sees, in order */
        int32_t live[ATTN_CHUNK];
        const int32_t n_live = ATTN_LIVE(nc, kv->pos + base + c0, qpos, p->n_swa, live);
        if (!n_live) continue;
        /* all rows converted before any is read back: a load right after the stores
         * that wrote it waits for them */
        const float *krows[ATTN_CHUNK], *vrows[ATTN_CHUNK];
        for (int32_t r = 0; r < n_live; r++) {
            const size_t row = head_row + (size_t)(c0 + live[r]);
            krows[r] = ATTN_ROW(kv->type_k, j->tk, kv->k + row * kv->head_bytes_k,
                                kbuf + (size_t)r * hd, hd);
            vrows[r] = ATTN_ROW(kv->type_v, j->tv, kv->v + row * kv->head_bytes_v,
                                vbuf + (size_t)r * hd, hd);
        }
        /* each head's scores of the chunk's cells, the seen ones (the others are never read) */
        for (int32_t h = 0; h < group; h++) {
            float *w = scores + (size_t)h * ATTN_CHUNK;
            if (n_live == nc) {
                ATTN_DOTS(hd, n_live, krows, q + (size_t)h * hd, w);
                continue;
            }
            float dots[ATTN_CHUNK];
            ATTN_DOTS(hd, n_live, krows, q + (size_t)h * hd, dots);
            memset(w, 0, ATTN_CHUNK * sizeof *w);
            for (int32_t r = 0; r < n_live; r++) w[live[r]] = dots[r];
        }
        ATTN_WEIGHTS(hd, nc, attn_live_bits(n_live, live), p->scale, p->softcap, group, scores, m, l, acc);
        /* acc += w_i * v_i over the live cells in order, each element on its own; the
         * group's heads together, so that each V row is loaded once for all of them */
        ATTN_ACCUM(hd, n_live, live, scores, group, vrows, acc);
    }
}

/* A task is one token (of j->tok when the job has a list, else the batch's t-th), one KV head and a share of the query heads using it (all of them
 * in a batch, fewer in decode so the threads have enough tasks), and, when the job
 * splits the cells (seg_split), one segment of ATTN_SEGMENT_CELLS cells; otherwise the
 * task folds its segments in order itself. Either way each segment is computed alone and
 * the segments are folded in order by attn_fold, so the result is the same. */
ATTN_TARGET static void ATTN_TASK(void *ctx, int64_t task, int thread) {
    attn_job *j = ctx;
    const ty_attn_params *p = j->p;
    const int32_t hd = p->head_dim, n_split = j->group_split, n_seg = j->seg_split ? j->n_seg : 1;
    const int32_t s = (int32_t)(task % n_seg);
    const int64_t rest = task / n_seg;
    const int64_t i = rest / ((int64_t)p->n_head_kv * n_split), t = j->tok ? j->tok[i] : i;
    const int32_t g = (int32_t)(rest / n_split % p->n_head_kv), share = (int32_t)(rest % n_split);
    /* share k of n_split takes heads [k G / n_split, (k + 1) G / n_split) of the group of
     * G: never empty, since n_split <= G */
    const int32_t G = p->n_head / p->n_head_kv;
    const int32_t h0 = share * G / n_split, group = (share + 1) * G / n_split - h0;
    const int32_t head0 = g * G + h0; /* the group's heads are adjacent */
    const int32_t n = j->kv->n_used[j->seq_id[t]];
    /* the thread's workspace: one segment's sums, maxima and weights, the running fold
     * of the segments so far, then ATTN_SEGMENT's scratch (a split job's segment goes
     * straight to its slot instead) */
    float *acc = j->c->attn_ws + (size_t)thread * j->c->attn_ws_per_thread;
    float *m = acc + (size_t)group * hd, *l = m + group;
    float *run_acc = l + group, *run_m = run_acc + (size_t)group * hd, *run_l = run_m + group;
    float *ws = run_l + group;
    if (j->seg_split) {
        /* this segment only: into its slot, folded by cpu_attention */
        const int32_t c_begin = s * ATTN_SEGMENT_CELLS;
        const int32_t c_end = n - c_begin < ATTN_SEGMENT_CELLS ? n : c_begin + ATTN_SEGMENT_CELLS;
        const attn_state st = attn_slot(j, t, s);
        float *st_m = st.m + head0, *st_l = st.l + head0;
        if (c_begin >= c_end) { /* past this token's cells: an empty segment */
            for (int32_t h = 0; h < group; h++) st_m[h] = -INFINITY, st_l[h] = 0.0f;
            return;
        }
        ATTN_SEGMENT(j, t, g, head0, group, c_begin, c_end, st.acc + (size_t)head0 * hd, st_m,
                     st_l, ws);
        return;
    }
    for (int32_t h = 0; h < group; h++) run_l[h] = 0.0f;
    for (int32_t c_begin = 0; c_begin < n; c_begin += ATTN_SEGMENT_CELLS) {
        const int32_t c_end = n - c_begin < ATTN_SEGMENT_CELLS ? n : c_begin + ATTN_SEGMENT_CELLS;
        ATTN_SEGMENT(j, t, g, head0, group, c_begin, c_end, acc, m, l, ws);
        ATTN_FOLD(hd, group, run_acc, run_m, run_l, acc, m, l);
    }
    for (int32_t h = 0; h < group; h++)
        attn_finish(hd, run_acc + (size_t)h * hd, run_l[h], j->out + (t * p->n_head + head0 + h) * hd);
}

/* ---------------------------------------------------------------- blocks of tokens */

/* A prefill's tokens go in blocks: up to ATTN_BLOCK_TOKENS tokens of one sequence and
 * one KV head, so nt x group query rows, share each chunk's K and V rows. K comes
 * transposed (ATTN_CONVERT_TASK wrote it once for the whole call: [d][cell of the chunk]),
 * so that ATTN_KTDOTS computes 16 cells' scores in a vector with no horizontal sums; V
 * comes as float rows. Every row's arithmetic is the one ATTN_SEGMENT does for its token
 * alone, in the same order: its scores have the same bits (the same 16 lanes combined
 * pairwise, see attention_cpu.c), and its softmax and V sums are the same calls. Only
 * where a token sees part of a chunk (the diagonal, a window's edge) does it take its
 * own cells, as ATTN_SEGMENT would. */
ATTN_TARGET static inline void ATTN_BLOCK_SEGMENT(const attn_job *j, int32_t t0, int32_t nt, int32_t g,
                                                  int32_t c_begin, int32_t c_end, float *acc, float *m,
                                                  float *l, float *scores) {
    const ty_attn_params *p = j->p;
    const ty_kv_view *kv = j->kv;
    const int32_t hd = p->head_dim, G = p->n_head / p->n_head_kv, R = nt * G;
    const size_t tok_stride = (size_t)p->n_head * (size_t)hd;
    const float *q0 = j->q + ((size_t)t0 * (size_t)p->n_head + (size_t)g * (size_t)G) * (size_t)hd;
    for (int32_t r = 0; r < R; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    memset(acc, 0, (size_t)R * (size_t)hd * sizeof *acc);
    const int64_t base = (int64_t)j->kv_seq * kv->cells_per_seq;
    const size_t head_row = ((size_t)j->kv_seq * (size_t)p->n_head_kv + (size_t)g) * (size_t)kv->cells_per_seq;
    const float *kt_head = j->kt + (size_t)g * (size_t)j->kv_chunks * ATTN_CHUNK * (size_t)hd;
    const float *vf_head = j->vf ? j->vf + (size_t)g * (size_t)j->kv_chunks * ATTN_CHUNK * (size_t)hd : NULL;
    for (int32_t c0 = c_begin; c0 < c_end; c0 += ATTN_CHUNK) {
        const int32_t nc = c_end - c0 < ATTN_CHUNK ? c_end - c0 : ATTN_CHUNK;
        /* the cells each token sees: all of them or none where the chunk's positions lie
         * on one side of the token's (most chunks), else listed */
        const int32_t *kpos = kv->pos + base + c0;
        int32_t kmin = kpos[0], kmax = kpos[0];
        for (int32_t i = 1; i < nc; i++) {
            kmin = kpos[i] < kmin ? kpos[i] : kmin;
            kmax = kpos[i] > kmax ? kpos[i] : kmax;
        }
        const uint32_t all = nc == ATTN_CHUNK ? ~0u : (1u << nc) - 1u;
        int32_t live[ATTN_BLOCK_TOKENS][ATTN_CHUNK], n_live[ATTN_BLOCK_TOKENS], seen = 0;
        uint32_t visible[ATTN_BLOCK_TOKENS];
        for (int32_t tt = 0; tt < nt; tt++) {
            const int32_t qpos = j->pos[t0 + tt];
            if (qpos >= kmax && !(p->n_swa > 0 && qpos - kmin >= p->n_swa)) {
                n_live[tt] = nc;
                visible[tt] = all;
            } else if (qpos < kmin || (p->n_swa > 0 && qpos - kmax >= p->n_swa)) {
                n_live[tt] = 0;
                visible[tt] = 0;
            } else {
                n_live[tt] = ATTN_LIVE(nc, kpos, qpos, p->n_swa, live[tt]);
                visible[tt] = attn_live_bits(n_live[tt], live[tt]);
            }
            seen |= n_live[tt];
        }
        if (!seen) continue;
        /* the K and V of the chunk after next towards the cache in L2: for a long
         * sequence they come from L3, in an order the hardware prefetcher misses */
        const int32_t ahead = c0 / ATTN_CHUNK + 2;
        if (ahead < j->kv_chunks) {
            const char *kn = (const char *)(kt_head + (size_t)ahead * ATTN_CHUNK * (size_t)hd);
            const char *vn = vf_head ? (const char *)(vf_head + (size_t)ahead * ATTN_CHUNK * (size_t)hd)
                                     : (const char *)(kv->v + (head_row + (size_t)ahead * ATTN_CHUNK) * kv->head_bytes_v);
            const size_t k_bytes = ATTN_CHUNK * (size_t)hd * sizeof(float);
            const size_t v_bytes = vf_head ? k_bytes : ATTN_CHUNK * kv->head_bytes_v;
            for (size_t o = 0; o < k_bytes; o += 64) __builtin_prefetch(kn + o, 0, 2);
            for (size_t o = 0; o < v_bytes; o += 64) __builtin_prefetch(vn + o, 0, 2);
        }
        const float *vrows[ATTN_CHUNK];
        for (int32_t i = 0; i < nc; i++)
            vrows[i] = vf_head ? vf_head + (size_t)(c0 + i) * (size_t)hd
                               : (const float *)(kv->v + (head_row + (size_t)(c0 + i)) * kv->head_bytes_v);
        /* every row's scores of all ATTN_CHUNK cells (cells past nc are zeros) */
        ATTN_KTDOTS(hd, kt_head + (size_t)(c0 / ATTN_CHUNK) * ATTN_CHUNK * (size_t)hd, R, G, q0, tok_stride,
                    scores);
        /* the weights: tokens that see the whole chunk together (their rows four at a
         * time whatever G), the others with their own cells */
        for (int32_t tt = 0; tt < nt;) {
            int32_t te = tt + 1;
            if (n_live[tt] == nc)
                while (te < nt && n_live[te] == nc) te++;
            if (n_live[tt]) {
                const int32_t r = tt * G;
                ATTN_WEIGHTS(hd, nc, visible[tt], p->scale, p->softcap, (te - tt) * G,
                             scores + (size_t)r * ATTN_CHUNK, m + r, l + r, acc + (size_t)r * hd);
            }
            tt = te;
        }
        /* the V rows: tokens that see the whole chunk together (each row loaded once for
         * all their query rows), the others over their own cells */
        for (int32_t tt = 0; tt < nt;) {
            if (n_live[tt] == nc) {
                int32_t te = tt + 1;
                while (te < nt && n_live[te] == nc) te++;
                ATTN_ACCUM(hd, nc, attn_all_cells, scores + (size_t)tt * G * ATTN_CHUNK, (te - tt) * G, vrows,
                           acc + (size_t)tt * G * hd);
                tt = te;
                continue;
            }
            if (n_live[tt]) {
                const float *own[ATTN_CHUNK];
                for (int32_t r = 0; r < n_live[tt]; r++) own[r] = vrows[live[tt][r]];
                ATTN_ACCUM(hd, n_live[tt], live[tt], scores + (size_t)tt * G * ATTN_CHUNK, G, own,
                           acc + (size_t)tt * G * hd);
            }
            tt++;
        }
    }
}

/* A block task: one run of tokens (j->runs, the last run first: the later a token, the
 * more cells it sees, so the longest tasks start first) and one KV head, its segments
 * folded in order as ATTN_TASK folds a token's. */
ATTN_TARGET static void ATTN_BLOCK_TASK(void *ctx, int64_t task, int thread) {
    attn_job *j = ctx;
    const ty_attn_params *p = j->p;
    const int32_t hd = p->head_dim, G = p->n_head / p->n_head_kv;
    const int32_t run = j->n_runs - 1 - (int32_t)(task / p->n_head_kv), g = (int32_t)(task % p->n_head_kv);
    const int32_t t0 = j->runs[2 * run], nt = j->runs[2 * run + 1], R = nt * G;
    const int32_t n = j->kv->n_used[j->kv_seq];
    float *acc = j->c->attn_ws + (size_t)thread * j->c->attn_ws_per_thread;
    float *m = acc + (size_t)R * hd, *l = m + R;
    float *run_acc = l + R, *run_m = run_acc + (size_t)R * hd, *run_l = run_m + R;
    float *scores = run_l + R;
    for (int32_t r = 0; r < R; r++) run_l[r] = 0.0f;
    for (int32_t c_begin = 0; c_begin < n; c_begin += ATTN_SEGMENT_CELLS) {
        const int32_t c_end = n - c_begin < ATTN_SEGMENT_CELLS ? n : c_begin + ATTN_SEGMENT_CELLS;
        ATTN_BLOCK_SEGMENT(j, t0, nt, g, c_begin, c_end, acc, m, l, scores);
        ATTN_FOLD(hd, R, run_acc, run_m, run_l, acc, m, l);
    }
    for (int32_t r = 0; r < R; r++) {
        const int32_t tt = r / G, h = r % G;
        attn_finish(hd, run_acc + (size_t)r * hd, run_l[r],
                    j->out + ((size_t)(t0 + tt) * (size_t)p->n_head + (size_t)(g * G + h)) * (size_t)hd);
    }
}

/* One chunk of one KV head of j->kv_seq: its K rows as floats, transposed into kt
 * ([d][cell], cells past the sequence's end zero), and, when the cache's V is not f32,
 * its V rows as floats into vf. */
ATTN_TARGET static void ATTN_CONVERT_TASK(void *ctx, int64_t task, int thread) {
    attn_job *j = ctx;
    const ty_attn_params *p = j->p;
    const ty_kv_view *kv = j->kv;
    const int32_t hd = p->head_dim, g = (int32_t)(task / j->kv_chunks), ch = (int32_t)(task % j->kv_chunks);
    const int32_t n = kv->n_used[j->kv_seq];
    const size_t head_row = ((size_t)j->kv_seq * (size_t)p->n_head_kv + (size_t)g) * (size_t)kv->cells_per_seq;
    const size_t first = (size_t)g * (size_t)j->kv_chunks * ATTN_CHUNK + (size_t)ch * ATTN_CHUNK;
    float *kt = (float *)j->kt + first * (size_t)hd;
    float *row = j->c->attn_ws + (size_t)thread * j->c->attn_ws_per_thread;
    for (int32_t i = 0; i < ATTN_CHUNK; i++) {
        const int32_t cell = ch * ATTN_CHUNK + i;
        if (cell >= n) {
            for (int32_t d = 0; d < hd; d++) kt[(size_t)d * ATTN_CHUNK + i] = 0.0f;
            continue;
        }
        const float *k = ATTN_ROW(kv->type_k, j->tk, kv->k + (head_row + (size_t)cell) * kv->head_bytes_k, row, hd);
        for (int32_t d = 0; d < hd; d++) kt[(size_t)d * ATTN_CHUNK + i] = k[d];
        if (j->vf)
            ATTN_ROW(kv->type_v, j->tv, kv->v + (head_row + (size_t)cell) * kv->head_bytes_v,
                     (float *)j->vf + (first + (size_t)i) * (size_t)hd, hd);
    }
}

#undef ATTN_TASK
#undef ATTN_SEGMENT
#undef ATTN_BLOCK_TASK
#undef ATTN_BLOCK_SEGMENT
#undef ATTN_CONVERT_TASK
#undef ATTN_TARGET
#undef ATTN_DOTS
#undef ATTN_KTDOTS
#undef ATTN_WEIGHTS
#undef ATTN_WEIGHTS4
#undef ATTN_ACCUM
#undef ATTN_ROW
#undef ATTN_LIVE
#undef ATTN_FOLD
