/* test_fuzz_corpus.c — the fuzz corpora as a regression suite, without libFuzzer.
 *
 * Every file under fuzz/corpus is opened with toy_gguf_open (the mapped path) and
 * walked with the fuzz target's own walk, then fed to the fuzz target itself (the
 * toy_gguf_open_memory path). seed-* files are valid and must load; crash-* files are
 * inputs that once crashed the reader and must now load or be refused cleanly (a
 * one-line message naming the file); anything else may do either.
 *
 * Every file under the other targets' corpora (fuzz/corpus_NAME for fuzz/fuzz_NAME.c: the
 * tokenizer, chat templates, the Jinja engine, the training-data loader, toy serve's requests,
 * grammars) goes through
 * its target, which traps when a promise is broken.
 */
#include <dirent.h>
#include <sys/stat.h>

/* the targets in one program, under names of their own */
#define LLVMFuzzerTestOneInput fuzz_gguf_input
#include "../../fuzz/fuzz_gguf.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_request_input
#define LLVMFuzzerInitialize fuzz_request_init
#include "../../fuzz/fuzz_request.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_tokenizer_input
#define LLVMFuzzerInitialize fuzz_tokenizer_init
#include "../../fuzz/fuzz_tokenizer.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_chat_template_input
#include "../../fuzz/fuzz_chat_template.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_jinja_input
#include "../../fuzz/fuzz_jinja.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_train_data_input
#define LLVMFuzzerInitialize fuzz_train_data_init
#include "../../fuzz/fuzz_train_data.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_grammar_input
#define LLVMFuzzerInitialize fuzz_grammar_init
#include "../../fuzz/fuzz_grammar.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#include "test.h"

static bool read_whole(const char *path, uint8_t **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    uint8_t *p = NULL;
    size_t n = 0, cap = 0, k;
    uint8_t chunk[4096];
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (n + k > cap) {
            cap = (n + k) * 2;
            uint8_t *q = realloc(p, cap);
            if (!q) {
                free(p);
                fclose(f);
                return false;
            }
            p = q;
        }
        memcpy(p + n, chunk, k);
        n += k;
    }
    fclose(f);
    *data = p;
    *size = n;
    return true;
}

static void check_one(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    bool must_load = strncmp(name, "seed-", 5) == 0;

    toy_gguf *g = NULL;
    toy_status st = toy_gguf_open(path, &g);
    if (st == TOY_OK) {
        const char *problem = fuzz_check_gguf(g, NULL, 0);
        CHECK_MSG(problem == NULL, "%s: %s", name, problem);
        toy_gguf_close(g);
    } else {
        const char *msg = toy_last_error();
        CHECK_MSG(!must_load, "%s: a seed is refused: %s", name, msg);
        CHECK_MSG(st != TOY_ERR_NOMEM, "%s: refused with TOY_ERR_NOMEM: %s", name, msg);
        CHECK_MSG(msg && *msg && !strchr(msg, '\n'), "%s: message is not one line: \"%s\"", name,
                  msg ? msg : "(null)");
        CHECK_MSG(msg && strstr(msg, path), "%s: message does not name the file: \"%s\"", name,
                  msg ? msg : "(null)");
    }

    /* the same bytes through the fuzz target, from an exactly-sized buffer */
    uint8_t *data = NULL;
    size_t size = 0;
    CHECK_MSG(read_whole(path, &data, &size), "%s: cannot read", name);
    g = NULL;
    toy_status st_mem = toy_gguf_open_memory(data ? data : (const uint8_t *)"", size, name, &g);
    CHECK_MSG((st_mem == TOY_OK) == (st == TOY_OK),
              "%s: toy_gguf_open says %s, toy_gguf_open_memory says %s", name,
              toy_status_str(st), toy_status_str(st_mem));
    if (st_mem == TOY_OK) toy_gguf_close(g);
    fuzz_gguf_input(data ? data : (const uint8_t *)"", size); /* traps on a problem */
    free(data);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The regular files of a folder, sorted; their count. */
static int list_dir(const char *dir, char **names, int max) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    return n;
}

static char *names[4096];

int main(void) {
    const char *dir = TOY_SOURCE_DIR "/fuzz/corpus";
    int n = list_dir(dir, names, 4096);
    if (n < 0) {
        printf("SKIP: no corpus at %s\n", dir);
        return TEST_SKIP_CODE;
    }
    int seeds = 0;
    for (int i = 0; i < n; i++) {
        seeds += strncmp(names[i], "seed-", 5) == 0;
        check_one(dir, names[i]);
        free(names[i]);
    }
    CHECK_MSG(seeds >= 1, "no seed-* files in %s", dir);
    printf("%d corpus files, %d seeds\n", n, seeds);

    static const struct {
        const char *dir;
        int (*input)(const uint8_t *, size_t);
        int (*init)(int *, char ***);
    } targets[] = {
        {TOY_SOURCE_DIR "/fuzz/corpus_request", fuzz_request_input, fuzz_request_init},
        {TOY_SOURCE_DIR "/fuzz/corpus_tokenizer", fuzz_tokenizer_input, fuzz_tokenizer_init},
        {TOY_SOURCE_DIR "/fuzz/corpus_chat_template", fuzz_chat_template_input, NULL},
        {TOY_SOURCE_DIR "/fuzz/corpus_jinja", fuzz_jinja_input, NULL},
        {TOY_SOURCE_DIR "/fuzz/corpus_train_data", fuzz_train_data_input, fuzz_train_data_init},
        {TOY_SOURCE_DIR "/fuzz/corpus_grammar", fuzz_grammar_input, fuzz_grammar_init},
    };
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        n = list_dir(targets[t].dir, names, 4096);
        CHECK_MSG(n > 0, "no corpus at %s", targets[t].dir);
        if (targets[t].init) targets[t].init(NULL, NULL);
        for (int i = 0; i < n; i++) {
            char path[4096];
            uint8_t *data = NULL;
            size_t size = 0;
            snprintf(path, sizeof path, "%s/%s", targets[t].dir, names[i]);
            CHECK_MSG(read_whole(path, &data, &size), "%s: cannot read", path);
            targets[t].input(data ? data : (const uint8_t *)"", size); /* traps on a broken promise */
            free(data);
            free(names[i]);
        }
        printf("%s: %d files\n", targets[t].dir, n > 0 ? n : 0);
    }
    return test_finish("test_fuzz_corpus");
}
