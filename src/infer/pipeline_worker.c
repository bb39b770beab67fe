/* pipeline_worker.c — toy_pipeline_worker: the ranks after 0 of a pipeline replay rank
 * 0's calls on its pipelined models and contexts, on their own stage (pipeline.h). */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "error.h"
#include "pipeline.h"

static void load_model(const ty_pipe_msg *m) {
    toy_model_params p = toy_model_default_params();
    p.use_mmap = m->x[0] != 0;
    p.n_split = (int32_t)m->x[1];
    const int64_t path_len = m->x[2];
    int32_t *split = NULL;
    toy_status st = TOY_OK;
    if (path_len < 1 || path_len + p.n_split * (int64_t)sizeof *split != m->len || m->payload[path_len - 1])
        st = ty_error(TOY_ERR_FORMAT, "a model load of %lld bytes", (long long)m->len);
    else if (p.n_split && !(split = malloc((size_t)p.n_split * sizeof *split)))
        st = ty_error(TOY_ERR_NOMEM, "no memory");
    if (split) memcpy(split, m->payload + path_len, (size_t)p.n_split * sizeof *split);
    p.split = split;
    toy_model *model = NULL;
    ty_pipeline_expect(m->id);
    if (!st) st = toy_model_load_with((const char *)m->payload, &p, &model);
    ty_pipeline_expect(-1);
    free(split);
    ty_pipeline_agree(st);
}

static void pack_model(const ty_pipe_msg *m) {
    toy_model *model = ty_pipeline_get(PIPE_MODELS, m->id);
    ty_pipeline_agree(model ? ty_model_pack(model, (int)m->x[0])
                            : ty_error(TOY_ERR_INVALID, "no model %d in this process", m->id));
}

static void new_context(const ty_pipe_msg *m) {
    toy_context_params p;
    toy_model *model = ty_pipeline_get(PIPE_MODELS, (int)m->x[0]);
    toy_context *ctx = NULL;
    toy_status st = TOY_OK;
    if (m->len != (int64_t)sizeof p) st = ty_error(TOY_ERR_FORMAT, "context parameters of %lld bytes", (long long)m->len);
    else if (!model) st = ty_error(TOY_ERR_INVALID, "no model %lld in this process", (long long)m->x[0]);
    if (!st) {
        memcpy(&p, m->payload, sizeof p);
        ty_pipeline_expect(m->id);
        st = toy_context_new(model, &p, &ctx);
        ty_pipeline_expect(-1);
    }
    ty_pipeline_agree(st);
}

static void decode(const ty_pipe_msg *m) {
    toy_context *ctx = ty_pipeline_get(PIPE_CONTEXTS, m->id);
    toy_batch b;
    if (!ctx) ty_error(TOY_ERR_INVALID, "no context %d in this process", m->id);
    if (!ctx || ty_pipeline_batch_of(m, &b)) ty_pipeline_abort("a batch");
    if (ty_decode_stage(ctx, &b, NULL)) ty_pipeline_abort("a batch"); /* rank 0 waits for its outputs */
    free((void *)b.token);
}

static void kv_edit(const ty_pipe_msg *m) {
    toy_context *ctx = ty_pipeline_get(PIPE_CONTEXTS, m->id);
    if (!ctx) return;
    const int32_t a = (int32_t)m->x[1], b = (int32_t)m->x[2], c = (int32_t)m->x[3], d = (int32_t)m->x[4];
    const toy_status st = m->x[0] == PIPE_KV_RM ? toy_kv_seq_rm(ctx, a, b, c)
                          : m->x[0] == PIPE_KV_CP ? toy_kv_seq_cp(ctx, a, b, c, d)
                                                  : toy_kv_seq_add(ctx, a, b, c, d);
    if (st) ty_pipeline_abort("a KV-cache edit"); /* rank 0's succeeded: the caches would part */
}

toy_status toy_pipeline_worker(void) {
    if (!ty_pipeline_on() || ty_pipeline_rank() == 0)
        return ty_error(TOY_ERR_INVALID, "toy_pipeline_worker: for the ranks after 0 of a pipeline (mpirun -np N)");
    for (;;) {
        ty_pipe_msg m;
        ty_pipeline_receive(&m);
        switch (m.cmd) {
        case PIPE_QUIT: /* rank 0 took every output: its contexts wait for their batches when freed */
            free(m.payload);
            ty_pipeline_flush();
            return TOY_OK;
        case PIPE_MODEL_LOAD: load_model(&m); break;
        case PIPE_MODEL_FREE: toy_model_free(ty_pipeline_get(PIPE_MODELS, m.id)); break;
        case PIPE_MODEL_PACK: pack_model(&m); break;
        case PIPE_CONTEXT_NEW: new_context(&m); break;
        case PIPE_CONTEXT_FREE: toy_context_free(ty_pipeline_get(PIPE_CONTEXTS, m.id)); break;
        case PIPE_DECODE: decode(&m); break;
        case PIPE_KV: kv_edit(&m); break;
        default:
            ty_error(TOY_ERR_FORMAT, "unknown command %d", m.cmd);
            ty_pipeline_abort("a message from rank 0");
        }
        free(m.payload);
    }
}
