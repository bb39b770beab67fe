/* init_models.h — models for the tests that also run without the fixtures (a bare
 * clone): a temporary folder laid out as the fixtures' (models/NAME.gguf and
 * models/manifest.tsv), so a test's fixture code reads it unchanged. It holds the
 * bundled model and random-weight models that toy_init_model writes with its tokenizer.
 * Include after test.h and toy.h. */
#ifndef TOY_INIT_MODELS_H
#define TOY_INIT_MODELS_H

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *name, *arch;
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff;
    int ftype;
} test_init_model;

/* Shapes that cover what the fixtures' llama and qwen2 models do: grouped-query
 * attention, head_dim 64 and 128, Q/K/V biases (qwen2), F32, F16 and a K-quant (rows of
 * 256, so n_embd and n_ff are multiples of 256). */
static const test_init_model test_init_models_all[] = {
    {"init-llama-f32", "llama", 64, 2, 4, 2, 128, TOY_FTYPE_ALL_F32},
    {"init-llama-q4_k_m", "llama", 256, 2, 4, 2, 512, TOY_FTYPE_MOSTLY_Q4_K_M},
    {"init-qwen2-f16", "qwen2", 256, 2, 2, 1, 512, TOY_FTYPE_MOSTLY_F16},
};
enum { TEST_N_INIT_MODELS = sizeof test_init_models_all / sizeof test_init_models_all[0] };

static char test_init_dir[4096];

static void test_init_models_remove(void) {
    char path[4400];
    for (int i = 0; i < TEST_N_INIT_MODELS; i++) {
        snprintf(path, sizeof path, "%s/models/%s.gguf", test_init_dir, test_init_models_all[i].name);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/models/toy-kjv.gguf", test_init_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/models/manifest.tsv", test_init_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/models", test_init_dir);
    rmdir(path);
    rmdir(test_init_dir);
}

/* The folder (removed at exit), or NULL after a failed check. */
static inline const char *test_init_models_dir(void) {
    if (test_init_dir[0]) return test_init_dir;
    snprintf(test_init_dir, sizeof test_init_dir, "/tmp/toy-init-models-XXXXXX");
    if (!mkdtemp(test_init_dir)) {
        CHECK_MSG(0, "cannot make a folder under /tmp");
        test_init_dir[0] = 0;
        return NULL;
    }
    atexit(test_init_models_remove);
    char path[4400], bundled[4400];
    snprintf(path, sizeof path, "%s/models", test_init_dir);
    CHECK_MSG(mkdir(path, 0700) == 0, "cannot make %s", path);
    snprintf(bundled, sizeof bundled, "%s/models/toy-kjv.gguf", TOY_SOURCE_DIR);
    snprintf(path, sizeof path, "%s/models/toy-kjv.gguf", test_init_dir);
    CHECK_MSG(symlink(bundled, path) == 0, "cannot link %s", path);
    snprintf(path, sizeof path, "%s/models/manifest.tsv", test_init_dir);
    FILE *manifest = fopen(path, "w");
    CHECK_MSG(manifest != NULL, "cannot write %s", path);
    if (!manifest) return NULL;
    fprintf(manifest, "toy-kjv\tthe bundled model\n");
    printf("no fixtures: the bundled model and toy_init_model's models in %s\n", test_init_dir);
    int failures_before = test_failures;
    for (int i = 0; i < TEST_N_INIT_MODELS; i++) {
        const test_init_model *s = &test_init_models_all[i];
        toy_init_params p = toy_init_default_params();
        p.arch = s->arch;
        p.n_embd = s->n_embd;
        p.n_layer = s->n_layer;
        p.n_head = s->n_head;
        p.n_head_kv = s->n_head_kv;
        p.n_ff = s->n_ff;
        p.n_ctx = 512;
        p.name = s->name;
        p.vocab_path = bundled;
        p.ftype = s->ftype;
        p.n_threads = 2;
        snprintf(path, sizeof path, "%s/models/%s.gguf", test_init_dir, s->name);
        CHECK_MSG(toy_init_model(&p, path) == TOY_OK, "toy_init_model %s: %s", s->name, toy_last_error());
        fprintf(manifest, "%s\ttoy_init_model, %s\n", s->name, s->arch);
    }
    fclose(manifest);
    return test_failures == failures_before ? test_init_dir : NULL;
}

#endif
