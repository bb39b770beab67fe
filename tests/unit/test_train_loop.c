/* test_train_loop.c — toy_train end to end on tiny models built from scratch:
 *  - a short text is learned by heart (the loss goes near zero);
 *  - 1 and 2 threads give the same losses and the same model file, bit for bit;
 *  - two micro-batches of 2 sequences accumulated give the model of one batch of 4, bit
 *    for bit, when the output matrix is not tied to the embedding (every gradient sum
 *    continues in the same order across micro-batches; a tied matrix gets its output and
 *    embedding gradients interleaved per micro-batch, so there only the rounding differs);
 *  - a run stopped (as by Ctrl-C) after step 12 and resumed ends with the same losses,
 *    the same model file and the same optimizer state as the uninterrupted run;
 *  - the checkpoint is a model toy loads, with the metadata of the tokenizer it came from;
 *  - bad data and mismatched resumes are errors that say what is wrong.
 * The tokenizer is the fixtures' llama-spm (2,048 tokens), or without them the bundled
 * model's (4,096).
 */
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "toy.h"

static char dir[256];

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void write_text(const char *path, const char *text) { test_write_file(path, text, strlen(text)); }

static bool same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = test_read_file(a, &la), *y = test_read_file(b, &lb);
    bool same = x && y && la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return same;
}

/* the losses of every step, as the progress callback saw them */
typedef struct {
    double loss[512];
    int n;
    int64_t stop_at;
    volatile sig_atomic_t stop;
} log_t;

static void on_progress(void *user, const toy_train_progress *p) {
    log_t *l = user;
    if (l->n < 512) l->loss[l->n++] = p->loss;
    if (l->stop_at && p->step == l->stop_at) l->stop = 1;
}

static const char *vocab;
static char text_path[512];

/* the shape of tiny()'s new model, which a test may change after calling it */
static toy_init_params shape;

static toy_train_params tiny(const char *out, int threads, int64_t steps, log_t *log) {
    static const char *data[1];
    data[0] = text_path;
    toy_train_params p = toy_train_default_params();
    shape = toy_init_default_params();
    shape.arch = "llama";
    shape.vocab_path = vocab;
    shape.n_embd = 64;
    shape.n_layer = 2;
    shape.n_head = 4;
    shape.n_head_kv = 2;
    shape.n_ff = 128;
    shape.n_ctx = 128;
    p.init = &shape;
    p.data = data;
    p.n_data = 1;
    p.batch = 2;
    p.seq = 16;
    p.grad_accum = 2;
    p.steps = steps;
    p.warmup = 5;
    p.lr = 3e-3f;
    p.n_threads = threads;
    p.out_path = out;
    p.progress = on_progress;
    p.progress_user = log;
    p.stop = &log->stop;
    return p;
}

int main(void) {
    const char *fix = test_fixtures_dir();
    static char vocab_buf[4200];
    if (fix) snprintf(vocab_buf, sizeof vocab_buf, "%s/models/llama-spm-f32.gguf", fix);
    else snprintf(vocab_buf, sizeof vocab_buf, "%s/models/toy-kjv.gguf", TOY_SOURCE_DIR);
    vocab = vocab_buf;
    snprintf(dir, sizeof dir, "/tmp/toy_train_loop_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    path_in(text_path, sizeof text_path, "text.txt");
#define GENESIS_1_1_4                                                                                  \
    "In the beginning God created the heaven and the earth. And the earth was without form, "        \
    "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the "    \
    "face of the waters. And God said, Let there be light: and there was light. And God saw the "   \
    "light, that it was good: and God divided the light from the darkness.\n"
    /* the bundled model's tokenizer, learned on this text, needs half the tokens: twice
     * over, it is still enough for the mismatched resume below (batch 3 x grad_accum 2) */
    write_text(text_path, fix ? GENESIS_1_1_4 : GENESIS_1_1_4 GENESIS_1_1_4);

    /* by heart */
    char a[512], b[512], c[512];
    path_in(a, sizeof a, "a.gguf");
    log_t la = {0};
    toy_train_params p = tiny(a, 2, 150, &la);
    toy_train_result r = {.size = sizeof r};
    CHECK_MSG(toy_train(&p, &r) == TOY_OK, "%s", toy_last_error());
    CHECK_EQ(r.steps, 150);
    CHECK_MSG(la.n == 150 && la.loss[149] < 0.15 && la.loss[0] > 6.0,
              "loss from %.3f to %.3f: the text was not learned", la.loss[0], la.loss[la.n - 1]);
    printf("memorised: loss %.4f -> %.4f in 150 steps\n", la.loss[0], la.loss[la.n - 1]);
    toy_model *m;
    CHECK_MSG(toy_model_load(a, &m) == TOY_OK, "%s", toy_last_error());
    if (m) {
        CHECK_EQ(toy_model_n_vocab(m), fix ? 2048 : 4096);
        CHECK_EQ(toy_model_n_embd(m), 64);
        toy_model_free(m);
    }

    /* threads */
    path_in(b, sizeof b, "b.gguf");
    log_t lb = {0};
    p = tiny(b, 1, 150, &lb);
    CHECK_MSG(toy_train(&p, &r) == TOY_OK, "%s", toy_last_error());
    CHECK(lb.n == la.n && !memcmp(lb.loss, la.loss, sizeof(double) * (size_t)la.n));
    CHECK_MSG(same_file(a, b), "1 and 2 threads wrote different models");

    /* gradient accumulation: batch 2 x 2 micro-batches against batch 4 x 1, untied */
    log_t ld = {0}, le = {0};
    char d[512], e[512];
    path_in(d, sizeof d, "d.gguf");
    path_in(e, sizeof e, "e.gguf");
    p = tiny(d, 2, 40, &ld);
    shape.tied = -1;
    CHECK_MSG(toy_train(&p, &r) == TOY_OK, "%s", toy_last_error());
    p = tiny(e, 2, 40, &le);
    shape.tied = -1;
    p.batch = 4;
    p.grad_accum = 1;
    CHECK_MSG(toy_train(&p, &r) == TOY_OK, "%s", toy_last_error());
    CHECK_MSG(same_file(d, e), "grad_accum 2 x batch 2 and batch 4 wrote different models");
    /* the step's loss is summed per micro-batch, then over them: rounding only */
    for (int i = 0; i < ld.n && i < le.n; i++) CHECK_NEAR(ld.loss[i], le.loss[i], 1e-12 * le.loss[i]);

    /* stopped after step 12, resumed */
    path_in(c, sizeof c, "c.gguf");
    log_t lc = {.stop_at = 12};
    p = tiny(c, 2, 150, &lc);
    CHECK_MSG(toy_train(&p, &r) == TOY_OK, "%s", toy_last_error());
    CHECK(r.stopped);
    CHECK_EQ(r.steps, 12);
    lc.stop = 0;
    lc.stop_at = 0;
    p = tiny(c, 1, 150, &lc);
    p.resume = true;
    CHECK_MSG(toy_train(&p, &r) == TOY_OK, "%s", toy_last_error());
    CHECK_EQ(r.steps, 150);
    CHECK(lc.n == la.n && !memcmp(lc.loss, la.loss, sizeof(double) * (size_t)la.n));
    CHECK_MSG(same_file(a, c), "the resumed run wrote a different model");
    char sa[512], sc[512];
    path_in(sa, sizeof sa, "a.optim.gguf");
    path_in(sc, sizeof sc, "c.optim.gguf");
    /* the state differs only in the training time it records; the moments are the same */
    toy_gguf *ga, *gc;
    if (toy_gguf_open(sa, &ga) == TOY_OK && toy_gguf_open(sc, &gc) == TOY_OK) {
        CHECK_EQ(toy_gguf_n_tensors(ga), toy_gguf_n_tensors(gc));
        for (int64_t i = 0; i < toy_gguf_n_tensors(ga); i++) {
            const toy_gguf_tensor *x = toy_gguf_tensor_at(ga, i), *y = toy_gguf_tensor_at(gc, i);
            CHECK_MSG(x->size == y->size && !memcmp(x->data, y->data, x->size), "%s differs", x->name);
        }
        toy_gguf_close(ga);
        toy_gguf_close(gc);
    }

    /* a resume with other options is refused */
    p = tiny(c, 1, 150, &lc);
    p.resume = true;
    p.batch = 3;
    CHECK(toy_train(&p, &r) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "resume with the same data and options");

    /* products of a type training does not have: refused by the run and the bench */
    p = tiny(b, 1, 10, &lb);
    p.compute_type = TOY_TYPE_Q8_0;
    CHECK(toy_train(&p, &r) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "compute type Q8_0: f32, bf16 or f16");
    toy_train_bench_result br = {.size = sizeof br};
    CHECK(toy_train_bench_compute(a, 1, 8, 1, 1, TOY_TYPE_Q8_0, &br) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "compute type Q8_0: f32, bf16 or f16");

    /* too little data */
    char small[512];
    path_in(small, sizeof small, "small.txt");
    write_text(small, "Too short.");
    static const char *small_data[1];
    small_data[0] = small;
    p = tiny(b, 1, 10, &lb);
    p.data = small_data;
    CHECK(toy_train(&p, &r) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "a step needs batch 2 x grad_accum 2");

    /* chat records: errors name the file and line */
    char chat[512];
    path_in(chat, sizeof chat, "chat.jsonl");
    write_text(chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
                     "\"content\": \"hello\"}]}\n\n{\"messages\": [{\"role\": \"user\", \"content\": 3}]}\n");
    static const char *chat_data[1];
    chat_data[0] = chat;
    p = tiny(b, 1, 10, &lb);
    p.data = chat_data;
    CHECK(toy_train(&p, &r) == TOY_ERR_FORMAT);
    CHECK_STR_CONTAINS(toy_last_error(), "chat.jsonl:3: message 1 needs string fields");
    write_text(chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]\n");
    CHECK(toy_train(&p, &r) == TOY_ERR_FORMAT);
    CHECK_STR_CONTAINS(toy_last_error(), "chat.jsonl:1: invalid JSON at column");

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish("test_train_loop");
}
