/* attention_tasks.h — the CPU attention task, included by attention_cpu.c once per
 * instruction set with ATTN_TASK (its name), ATTN_SEGMENT (the name of its segment
 * function), ATTN_TARGET (a target attribute or nothing) and ATTN_DOTS / ATTN_ACCUM /
 * ATTN_SCAL / ATTN_EXPS / ATTN_MAX / ATTN_SUM / ATTN_ROW / ATTN_LIVE (inline helpers of that set)
 * defined. One text, so the scalar and the vector versions cannot drift apart; the
 * helpers produce the same bits in every version (see attention_cpu.c).
 *
 * One token and one KV head: the query heads sharing that KV head go through the cells
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
    const toy_attn_params *p = j->p;
    const toy_kv_view *kv = j->kv;
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
        for (int32_t h = 0; h < group; h++) {
            float dots[ATTN_CHUNK], *w = scores + h * ATTN_CHUNK;
            ATTN_DOTS(hd, n_live, krows, q + (size_t)h * hd, dots);
            if (p->softcap > 0.0f)
                for (int32_t r = 0; r < n_live; r++)
                    dots[r] = tanhf(dots[r] * (1.0f / p->softcap)) * p->softcap;
            if (n_live == nc) { /* every cell visible: in place */
                for (int32_t i = 0; i < nc; i++) w[i] = dots[i] * p->scale;
                continue;
            }
            for (int32_t i = 0; i < nc; i++) w[i] = -INFINITY; /* masked: weight 0 */
            for (int32_t r = 0; r < n_live; r++) w[live[r]] = dots[r] * p->scale;
        }
        for (int32_t h = 0; h < group; h++) {
            float *w = scores + h * ATTN_CHUNK;
            const float cmax = ATTN_MAX(nc, w);
            if (cmax > m[h]) {
                const float corr = toy_exp_nonpos(m[h] - cmax);
                ATTN_SCAL(hd, corr, acc + (size_t)h * hd);
                l[h] *= corr;
                m[h] = cmax;
            }
            ATTN_EXPS(nc, w, m[h]); /* scores become weights */
        }
        /* acc += w_i * v_i over the live cells in order, each element on its own; the
         * group's heads together, so that each V row is loaded once for all of them */
        ATTN_ACCUM(hd, n_live, live, scores, group, vrows, acc);
        for (int32_t h = 0; h < group; h++) l[h] += ATTN_SUM(nc, scores + h * ATTN_CHUNK); /* masked cells weigh 0 */
    }
}

/* A task is one token, one KV head and a share of the query heads using it (all of them
 * in a batch, fewer in decode so the threads have enough tasks), and, when the job
 * splits the cells (seg_split), one segment of ATTN_SEGMENT_CELLS cells; otherwise the
 * task folds its segments in order itself. Either way each segment is computed alone and
 * the segments are folded in order by attn_fold, so the result is the same. */
ATTN_TARGET static void ATTN_TASK(void *ctx, int64_t task, int thread) {
    attn_job *j = ctx;
    const toy_attn_params *p = j->p;
    const int32_t hd = p->head_dim, n_split = j->group_split, n_seg = j->seg_split ? j->n_seg : 1;
    const int32_t s = (int32_t)(task % n_seg);
    const int64_t rest = task / n_seg;
    const int64_t t = rest / ((int64_t)p->n_head_kv * n_split);
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
        for (int32_t h = 0; h < group; h++)
            attn_fold(hd, run_acc + (size_t)h * hd, &run_m[h], &run_l[h], acc + (size_t)h * hd, m[h], l[h]);
    }
    for (int32_t h = 0; h < group; h++)
        attn_finish(hd, run_acc + (size_t)h * hd, run_l[h], j->out + (t * p->n_head + head0 + h) * hd);
}
