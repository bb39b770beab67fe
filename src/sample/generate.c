/* generate.c — toy_generate: a prompt, then sampled tokens fed back one at a time (see
 * toy.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "context.h"
#include "error.h"
#include "model.h"
#include "params.h"
#include "tokenizer.h"
#include "clock.h"

void toy_generate_params_init(toy_generate_params *params, size_t size) {
    const toy_generate_params defaults = {.size = sizeof defaults, .max_tokens = -1, .feed_last = true};
    ty_params_init(params, size, &defaults, sizeof defaults);
}

/* n tokens of sequence 0 at positions pos0.. in one forward pass (logits of the last) */
static toy_status decode_at(toy_context *ctx, const int32_t *tokens, int32_t n, int32_t pos0) {
    int32_t pos[512], seq[512] = {0};
    for (int32_t i = 0; i < n; i++) pos[i] = pos0 + i;
    const toy_batch b = {n, tokens, pos, seq, NULL};
    return toy_decode(ctx, &b);
}

/* Room for one more token: the older half of what follows the first n_keep dropped and
 * the rest moved down. Returns the tokens dropped (0: nothing can go). */
static int32_t shift_context(toy_context *ctx, int32_t n_past, int32_t n_keep) {
    const int32_t keep = n_keep < n_past ? n_keep : 0;
    const int32_t discard = (n_past - keep) / 2;
    if (discard <= 0) return 0;
    toy_kv_seq_rm(ctx, 0, keep, keep + discard);
    toy_kv_seq_add(ctx, 0, keep + discard, n_past, -discard);
    return discard;
}

toy_status toy_generate(toy_context *ctx, toy_sampler *sampler, const int32_t *prompt, int32_t n_prompt,
                        const toy_generate_params *params, toy_generate_result *result) {
    if (!ctx || !sampler || (n_prompt > 0 && !prompt) || n_prompt < 0)
        return ty_error(TOY_ERR_INVALID, "toy_generate: no context, no sampler, or no prompt");
    toy_generate_params p = toy_generate_default_params();
    if (params && ty_params_read(&p, sizeof p, params, "toy_generate_params")) return TOY_ERR_INVALID;
    if (ty_result_check(result, "toy_generate_result")) return TOY_ERR_INVALID;
    const toy_vocab *vocab = toy_model_vocab(ctx->model);
    const int32_t n_ctx = toy_n_ctx(ctx);
    int32_t n_past = toy_kv_seq_pos_max(ctx, 0) + 1;
    if (n_past + n_prompt > n_ctx)
        return ty_error(TOY_ERR_INVALID, "the prompt is %d tokens but the context holds %d (%d in use)",
                        n_prompt, n_ctx, n_past);
    if (n_prompt == 0) return ty_error(TOY_ERR_INVALID, "toy_generate: an empty prompt");
    toy_stop *stop;
    toy_status st = toy_stop_new(p.stops, p.n_stops, &stop);
    if (st) return st;
    toy_generate_result r = {.size = sizeof r, .finish = TOY_FINISH_LENGTH, .n_prompt = n_prompt};

    /* the prompt, in passes of at most n_batch (and 512) tokens */
    double t0 = ty_now_s();
    const int32_t step = toy_n_batch(ctx) < 512 ? toy_n_batch(ctx) : 512;
    for (int32_t i = 0; i < n_prompt && !st; i += step) {
        const int32_t k = n_prompt - i < step ? n_prompt - i : step;
        st = decode_at(ctx, prompt + i, k, n_past);
        if (!st) n_past += k;
    }
    for (int32_t i = 0; i < n_prompt && !st; i++) toy_sampler_accept(sampler, prompt[i]);
    r.prompt_seconds = ty_now_s() - t0;

    /* the logits of the last token decoded: the last of the prompt's last pass, then
     * each single token's */
    t0 = ty_now_s();
    int32_t last = (n_prompt - 1) % step;
    while (!st && (p.max_tokens < 0 || r.n_generated < p.max_tokens)) {
        const int32_t tok = toy_sampler_sample(sampler, toy_get_logits(ctx, last));
        if (tok < 0) { /* the grammar allows no token here; the sampler said why */
            st = ty_error_wrap(TOY_ERR_INVALID, "generated token %d", (int)r.n_generated + 1);
            break;
        }
        toy_sampler_accept(sampler, tok);
        if (toy_vocab_is_eog(vocab, tok)) {
            r.finish = TOY_FINISH_EOG;
            break;
        }
        char buf[256], *big = NULL;
        const char *text = NULL, *emit;
        size_t len = 0, emit_len;
        if ((st = ty_token_text(vocab, tok, false, buf, sizeof buf, &big, &text, &len))) break;
        const bool stopped = toy_stop_feed(stop, text, len, &emit, &emit_len);
        free(big);
        r.n_generated++;
        if (p.on_text && !p.on_text(p.user, tok, emit, emit_len)) {
            r.finish = TOY_FINISH_CALLER;
            break;
        }
        if (stopped) {
            r.finish = TOY_FINISH_STOP;
            break;
        }
        if (!p.feed_last && r.n_generated == p.max_tokens) break;
        if (n_past >= n_ctx) {
            const int32_t dropped = p.context_shift ? shift_context(ctx, n_past, p.n_keep) : 0;
            if (!dropped) {
                r.finish = TOY_FINISH_CONTEXT;
                break;
            }
            n_past -= dropped;
            r.n_discarded += dropped;
        }
        if ((st = decode_at(ctx, &tok, 1, n_past))) break;
        n_past++;
        last = 0;
    }
    const char *rest;
    size_t rest_len;
    toy_stop_flush(stop, &rest, &rest_len);
    if (!st && rest_len && p.on_text) p.on_text(p.user, -1, rest, rest_len);
    toy_stop_free(stop);
    r.gen_seconds = ty_now_s() - t0;
    if (!st && result) st = ty_result_write(result, &r, sizeof r, "toy_generate_result");
    return st;
}
