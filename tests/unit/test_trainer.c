/* test_trainer.c — models in memory (toy_model_new, toy_model_save) and training step by
 * step (toy_trainer_*), on a small llama of the bundled model's tokenizer:
 *   - toy_model_new makes, with no file, the bytes toy_init_model writes (toy_model_save);
 *     without a tokenizer file, a byte-level one (bytes in, bytes out);
 *   - a step's gradients are toy_grad's for the same sequence, bit for bit (the
 *     interface the float64 reference checks), and its loss too;
 *   - a kept tap is the inference trace of the same name (within 1e-4 relative RMS:
 *     both F32, the products associated differently), also for a step that runs in
 *     parts; the taps not asked for are errors;
 *   - the weights are writable: a zero output norm gives the uniform loss ln(n_vocab);
 *   - steps on one batch lower its loss; the same steps with 1 and 2 threads give the
 *     same weights bit for bit; toy_trainer_save writes a model whose trainer gives the
 *     trained one's loss bit for bit;
 *   - per-head LoRA-Q through the trainer: the design's tensor names, an adapter written;
 *   - bad input is an error naming it.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "toy.h"

enum { N_SEQ = 2, N_TOK = 17 };

static char tmp_dir[256];
static const char *bundled = TOY_SOURCE_DIR "/models/toy-kjv.gguf";

static toy_init_params shape(void) {
    toy_init_params p = toy_init_default_params();
    p.arch = "llama";
    p.n_embd = 64, p.n_layer = 2, p.n_head = 4, p.n_head_kv = 2, p.n_ff = 128, p.n_ctx = 64;
    p.vocab_path = bundled;
    p.seed = 7;
    return p;
}

static void *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = xmalloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

static void fill_tokens(int32_t *tok, int n, int32_t n_vocab, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)((seed >> 33) % (uint64_t)n_vocab);
    }
}

static toy_trainer *trainer_of(const toy_model *m, const char *taps, int n_threads) {
    toy_trainer_params p = toy_trainer_default_params();
    p.batch = N_SEQ, p.seq = N_TOK - 1, p.lr = 3e-3f, p.taps = taps, p.n_threads = n_threads;
    toy_trainer *t = NULL;
    CHECK_MSG(toy_trainer_new(m, &p, &t) == TOY_OK, "%s", toy_last_error());
    return t;
}

/* every trained tensor of a against b's, bit for bit (params or grads) */
static bool same_tensors(toy_trainer *a, toy_trainer *b, bool grads) {
    for (int i = 0; i < toy_trainer_n_tensors(a); i++) {
        const char *name = toy_trainer_tensor_name(a, i);
        int64_t ne[4];
        const float *x = grads ? toy_trainer_grad(a, name, ne) : toy_trainer_param(a, name, ne);
        const float *y = grads ? toy_trainer_grad(b, name, NULL) : toy_trainer_param(b, name, NULL);
        if (!x || !y || memcmp(x, y, (size_t)(ne[0] * ne[1] * ne[2] * ne[3]) * sizeof *x)) return false;
    }
    return true;
}

typedef struct {
    const char *want;
    float *got;
    int64_t n;
} trace_catch;

static void on_trace(void *user, const char *name, const float *data, int64_t rows, int64_t cols) {
    trace_catch *c = user;
    if (!strcmp(name, c->want) && !c->got) {
        c->n = rows * cols;
        c->got = xmalloc((size_t)c->n * sizeof *c->got);
        memcpy(c->got, data, (size_t)c->n * sizeof *c->got);
    }
}

/* tap L1.out of every sequence of the last step against toy_decode's trace of it */
static void check_tap(toy_model *m, toy_trainer *t, const int32_t *tok, int n_seq, int n_tok) {
    int64_t rows = 0, cols = 0;
    const float *tap = toy_trainer_tap(t, "L1.out", &rows, &cols);
    CHECK_MSG(tap && rows == (int64_t)n_seq * (n_tok - 1) && cols == toy_model_n_embd(m), "tap L1.out: %s",
              tap ? "shape" : toy_last_error());
    for (int s = 0; tap && s < n_seq; s++) {
        trace_catch c = {"L1.out", NULL, 0};
        toy_context_params cp = toy_context_default_params();
        cp.n_ctx = n_tok + 16, cp.n_batch = n_tok, cp.trace = on_trace, cp.trace_user = &c;
        toy_context *ctx = NULL;
        CHECK_MSG(toy_context_new(m, &cp, &ctx) == TOY_OK, "%s", toy_last_error());
        int32_t *pos = xmalloc((size_t)n_tok * sizeof *pos), *seq = calloc((size_t)n_tok, sizeof *seq);
        for (int i = 0; i < n_tok; i++) pos[i] = i;
        toy_batch b = {n_tok - 1, tok + (size_t)s * n_tok, pos, seq, NULL};
        CHECK_MSG(toy_decode(ctx, &b) == TOY_OK, "%s", toy_last_error());
        if (c.got && c.n == (n_tok - 1) * cols) {
            const float *x = tap + (int64_t)s * (n_tok - 1) * cols;
            double d = 0, r = 0;
            for (int64_t i = 0; i < c.n; i++) d += (x[i] - c.got[i]) * (double)(x[i] - c.got[i]), r += c.got[i] * (double)c.got[i];
            CHECK_MSG(sqrt(d / r) < 1e-4, "tap L1.out, sequence %d of %d tokens: relRMS %g from the trace", s, n_tok,
                      sqrt(d / r));
        } else {
            CHECK_MSG(0, "no trace L1.out of %lld values", (long long)c.n);
        }
        free(c.got), free(pos), free(seq);
        toy_context_free(ctx);
    }
}

int main(void) {
    if (access(bundled, R_OK)) {
        printf("SKIP: %s not found\n", bundled);
        return 77;
    }
    snprintf(tmp_dir, sizeof tmp_dir, "%s/toy-trainer-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_dir)) return 1;
    char a_path[512], b_path[512], g_path[512];
    snprintf(a_path, sizeof a_path, "%s/init.gguf", tmp_dir);
    snprintf(b_path, sizeof b_path, "%s/saved.gguf", tmp_dir);
    snprintf(g_path, sizeof g_path, "%s/grad.gguf", tmp_dir);

    /* a model from dimensions, no file: toy init's bytes */
    toy_init_params ip = shape();
    toy_model *m = NULL;
    CHECK_MSG(toy_model_new(&ip, &m) == TOY_OK, "%s", toy_last_error());
    if (!m) return test_finish("test_trainer");
    CHECK(toy_init_model(&ip, a_path) == TOY_OK);
    CHECK(toy_model_save(m, b_path) == TOY_OK);
    size_t na = 0, nb = 0;
    void *fa = read_all(a_path, &na), *fb = read_all(b_path, &nb);
    CHECK_MSG(fa && fb && na == nb && na > 0 && !memcmp(fa, fb, na), "toy_model_new + save: other bytes than toy init");
    free(fa), free(fb);
    CHECK_STR_CONTAINS(toy_gguf_path(toy_model_gguf(m)), "in memory");

    const int32_t n_vocab = toy_model_n_vocab(m);
    int32_t tok[N_SEQ * N_TOK];
    fill_tokens(tok, N_SEQ * N_TOK, n_vocab, 99);

    /* gradients: toy_grad's for one sequence */
    toy_trainer *t = trainer_of(m, "L*.out,L0.attn_norm", 2);
    double loss = 0, grad_loss = 0;
    CHECK(toy_trainer_step(t, tok, 1, N_TOK, false, &loss) == TOY_OK);
    toy_grad_params gp = toy_grad_default_params();
    gp.model = m;
    CHECK_MSG(toy_grad(&gp, tok, N_TOK, g_path, &grad_loss) == TOY_OK, "%s", toy_last_error());
    CHECK_MSG(loss == grad_loss, "step loss %.9g, toy_grad's %.9g", loss, grad_loss);
    toy_gguf *g = NULL;
    CHECK(toy_gguf_open(g_path, &g) == TOY_OK);
    int n_same = 0;
    for (int i = 0; g && i < toy_trainer_n_tensors(t); i++) {
        const char *name = toy_trainer_tensor_name(t, i);
        int64_t ne[4];
        const float *gr = toy_trainer_grad(t, name, ne);
        const toy_gguf_tensor *x = toy_gguf_find_tensor(g, name);
        const size_t bytes = (size_t)(ne[0] * ne[1] * ne[2] * ne[3]) * sizeof(float);
        CHECK_MSG(x && x->size == bytes && !memcmp(x->data, gr, bytes), "gradient of %s: not toy_grad's", name);
        n_same++;
    }
    CHECK(n_same == toy_trainer_n_tensors(t) && n_same > 10);
    toy_gguf_close(g);

    /* taps */
    CHECK(toy_trainer_step(t, tok, N_SEQ, N_TOK, false, &loss) == TOY_OK);
    check_tap(m, t, tok, N_SEQ, N_TOK);
    { /* sequences of 300 tokens: the step runs in parts of one sequence (train_model.c) */
        toy_trainer_params lp = toy_trainer_default_params();
        lp.batch = 2, lp.seq = 300, lp.taps = "L1.out", lp.n_threads = 2;
        toy_trainer *tl = NULL;
        int32_t *longer = xmalloc(2 * 301 * sizeof *longer);
        fill_tokens(longer, 2 * 301, n_vocab, 3);
        CHECK_MSG(toy_trainer_new(m, &lp, &tl) == TOY_OK, "%s", toy_last_error());
        CHECK(tl && toy_trainer_step(tl, longer, 2, 301, false, &loss) == TOY_OK);
        if (tl) check_tap(m, tl, longer, 2, 301);
        toy_trainer_free(tl);
        free(longer);
    }
    CHECK(toy_trainer_tap(t, "L1.attn_norm", NULL, NULL) == NULL);
    CHECK_STR_CONTAINS(toy_last_error(), "tap L1.attn_norm is not kept");

    /* writable weights: a zero output norm makes every logit 0 */
    int64_t ne[4];
    float *norm = toy_trainer_param(t, "output_norm.weight", ne);
    CHECK(norm && ne[0] == 64 && ne[1] == 1);
    float keep[64];
    if (norm) {
        memcpy(keep, norm, sizeof keep);
        memset(norm, 0, sizeof keep);
        CHECK(toy_trainer_step(t, tok, N_SEQ, N_TOK, false, &loss) == TOY_OK);
        CHECK_MSG(fabs(loss - log((double)n_vocab)) < 1e-5, "loss %.7f with zero logits, ln(n_vocab) %.7f", loss,
                  log((double)n_vocab));
        memcpy(norm, keep, sizeof keep);
    }

    /* training: the loss of the batch falls; threads do not change the bits */
    toy_trainer *t1 = trainer_of(m, NULL, 1);
    double first = 0, last = 0, l1 = 0;
    for (int s = 0; s < 30; s++) {
        CHECK(toy_trainer_step(t, tok, N_SEQ, N_TOK, true, s ? &last : &first) == TOY_OK);
        CHECK(toy_trainer_step(t1, tok, N_SEQ, N_TOK, true, &l1) == TOY_OK);
    }
    CHECK(toy_trainer_n_steps(t) == 30);
    CHECK_MSG(last < 0.7 * first, "30 steps on one batch: loss %.4f -> %.4f", first, last);
    CHECK_MSG(same_tensors(t, t1, false), "1 and 2 threads train other weights");
    printf("30 steps on one batch: loss %.4f -> %.4f\n", first, last);

    /* saved and loaded: the same loss */
    CHECK_MSG(toy_trainer_save(t, b_path, TOY_FTYPE_ALL_F32) == TOY_OK, "%s", toy_last_error());
    CHECK(toy_trainer_step(t, tok, N_SEQ, N_TOK, false, &loss) == TOY_OK);
    toy_model *saved = NULL;
    CHECK_MSG(toy_model_load(b_path, &saved) == TOY_OK, "%s", toy_last_error());
    if (saved) {
        toy_trainer *t2 = trainer_of(saved, NULL, 2);
        double l2 = 0;
        CHECK(t2 && toy_trainer_step(t2, tok, N_SEQ, N_TOK, false, &l2) == TOY_OK);
        CHECK_MSG(l2 == loss, "the saved model's loss %.9g, the trainer's %.9g", l2, loss);
        toy_trainer_free(t2);
        toy_model_free(saved);
    }

    /* bad input */
    int32_t bad[N_TOK];
    memcpy(bad, tok, sizeof bad);
    bad[5] = n_vocab;
    CHECK(toy_trainer_step(t, bad, 1, N_TOK, true, NULL) != TOY_OK);
    CHECK_STR_CONTAINS(toy_last_error(), "sequence 0, token 5: id");
    CHECK(toy_trainer_step(t, tok, N_SEQ + 1, N_TOK, true, NULL) != TOY_OK);
    CHECK_STR_CONTAINS(toy_last_error(), "3 sequences of 17 tokens (1..2 of 2..17)");
    CHECK(toy_trainer_param(t, "blk.9.attn_q.weight", NULL) == NULL);
    CHECK_STR_CONTAINS(toy_last_error(), "no trained tensor blk.9.attn_q.weight");
    toy_trainer_params bp = toy_trainer_default_params();
    bp.taps = "L7.out";
    toy_trainer *x = NULL;
    CHECK(toy_trainer_new(m, &bp, &x) != TOY_OK && !x);
    CHECK_STR_CONTAINS(toy_last_error(), "'L7.out' names no tap");
    toy_trainer_free(t);
    toy_trainer_free(t1);

    /* the design's LoRA-Q through the trainer */
    toy_trainer_params lp = toy_trainer_default_params();
    lp.batch = N_SEQ, lp.seq = N_TOK - 1, lp.lora_rank = 2, lp.lora_targets = 1, lp.lora_per_head = true;
    lp.lora_init_scale = 0.01f;
    CHECK_MSG(toy_trainer_new(m, &lp, &x) == TOY_OK, "%s", toy_last_error());
    if (x) {
        CHECK(toy_trainer_n_tensors(x) == 2 * 4 * 2);
        CHECK(!strcmp(toy_trainer_tensor_name(x, 0), "blk.0.attn_q.head_0.lora_a.weight"));
        CHECK(toy_trainer_param(x, "blk.1.attn_q.head_3.lora_b.weight", ne) && ne[0] == 2 && ne[1] == 16);
        CHECK(toy_trainer_step(x, tok, N_SEQ, N_TOK, true, &loss) == TOY_OK);
        CHECK_MSG(toy_trainer_save(x, b_path, TOY_FTYPE_ALL_F32) == TOY_OK, "%s", toy_last_error());
        toy_lora *l = NULL;
        CHECK_MSG(toy_lora_load(m, b_path, &l) == TOY_OK, "%s", toy_last_error());
        toy_lora_free(l);
        toy_trainer_free(x);
    }
    toy_model_free(m);

    /* no file at all: without vocab_path, the 256 byte tokens and three special ones */
    ip.vocab_path = NULL;
    CHECK_MSG(toy_model_new(&ip, &m) == TOY_OK, "%s", toy_last_error());
    if (m) {
        int32_t ids[16];
        int32_t n = 0;
        CHECK(toy_tokenize(toy_model_vocab(m), "Hi \xc3\xbc", 5, true, false, ids, 16, &n) == TOY_OK);
        const int32_t want[] = {256, 'H', 'i', ' ', 0xc3, 0xbc};
        CHECK_MSG(toy_model_n_vocab(m) == 259 && n == 6 && !memcmp(ids, want, sizeof want),
                  "byte-level vocabulary: %d tokens, \"Hi \u00fc\" as %d ids", toy_model_n_vocab(m), n);
        toy_trainer *tb = trainer_of(m, NULL, 2);
        int32_t bytes[N_SEQ * N_TOK];
        fill_tokens(bytes, N_SEQ * N_TOK, 259, 5);
        double l0 = 0;
        CHECK(tb && toy_trainer_step(tb, bytes, N_SEQ, N_TOK, true, &l0) == TOY_OK);
        CHECK_MSG(fabs(l0 - log(259.0)) < 0.1, "a fresh byte-level model's loss %.3f, ln 259 %.3f", l0, log(259.0));
        toy_trainer_free(tb);
        toy_model_free(m);
    }
    unlink(a_path);
    unlink(b_path);
    unlink(g_path);
    rmdir(tmp_dir);
    return test_finish("test_trainer");
}
