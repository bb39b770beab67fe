/* test_quantize_fixtures.c — toy's quantizer against llama.cpp's on the fixture model.
 *
 * The fixtures hold llama-spm in F32 and in 14 other types made from it by
 * llama-quantize. For each type toy can write, `toy quantize` of the F32 file must give
 * the same per-tensor types (the mix rules), and an error against the F32 weights no
 * worse than 1.05x llama.cpp's, per tensor type and overall. llama.cpp's own files
 * must dequantize to errors that the type allows. The table printed is the one the
 * Foundation issue asks for.
 */
#include <stdint.h>
#include <unistd.h>

#include "test.h"
#include "toy.h"

typedef struct {
    const char *file; /* fixture suffix */
    const char *ftype;
} variant;

static const variant variants[] = {
    {"f16", "F16"},   {"bf16", "BF16"},     {"q8_0", "Q8_0"},     {"q4_0", "Q4_0"},
    {"q4_1", "Q4_1"}, {"q5_0", "Q5_0"},     {"q5_1", "Q5_1"},     {"q2_k", "Q2_K"},
    {"q3_k_m", "Q3_K_M"}, {"q4_k_m", "Q4_K_M"}, {"q5_k_m", "Q5_K_M"}, {"q6_k", "Q6_K"},
    {"iq4_nl", "IQ4_NL"}, {"iq4_xs", NULL}, /* toy does not write IQ4_XS */
};

/* Upper bounds on relRMS = ||dequant - f32|| / ||f32|| for Gaussian weights, per
 * type: about 1.3x what llama.cpp's files measure here (the printed table), so a
 * dequantizer that is slightly off fails while rounding noise does not. */
static double type_bound(int type) {
    switch (type) {
    case TOY_TYPE_F32: return 0;
    case TOY_TYPE_F16: return 3e-4;
    case TOY_TYPE_BF16: return 2.2e-3;
    case TOY_TYPE_Q8_0: return 7e-3;
    case TOY_TYPE_Q6_K: return 2.3e-2;
    case TOY_TYPE_Q5_0: case TOY_TYPE_Q5_1: case TOY_TYPE_Q5_K: return 5.6e-2;
    case TOY_TYPE_Q4_0: case TOY_TYPE_Q4_1: case TOY_TYPE_Q4_K: case TOY_TYPE_IQ4_NL:
    case TOY_TYPE_IQ4_XS: return 1.12e-1;
    case TOY_TYPE_Q3_K: return 2.0e-1;
    case TOY_TYPE_Q2_K: return 3.9e-1;
    default: return 0;
    }
}

typedef struct {
    double err2[TOY_TYPE_COUNT]; /* sum of squared errors per tensor type */
    double ref2[TOY_TYPE_COUNT]; /* sum of squares of the f32 weights */
    int64_t n[TOY_TYPE_COUNT];
} error_sums;

/* Adds the error of every tensor of `q` against `f32` to `sums`. */
static void measure(const toy_gguf *f32, const toy_gguf *q, const char *label, error_sums *sums) {
    memset(sums, 0, sizeof *sums);
    for (int64_t i = 0; i < toy_gguf_n_tensors(q); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(q, i);
        const toy_gguf_tensor *r = toy_gguf_find_tensor(f32, t->name);
        CHECK_MSG(r != NULL, "%s: tensor %s not in the f32 model", label, t->name);
        if (!r) continue;
        int64_t n = toy_tensor_nelements(t);
        CHECK_EQ(n, toy_tensor_nelements(r));
        CHECK_EQ(r->type, TOY_TYPE_F32);
        float *x = malloc((size_t)n * sizeof *x);
        CHECK(toy_dequantize(t->type, t->data, x, n) == TOY_OK);
        const float *ref = r->data;
        double e2 = 0, r2 = 0;
        for (int64_t j = 0; j < n; j++) {
            double d = (double)x[j] - ref[j];
            e2 += d * d;
            r2 += (double)ref[j] * ref[j];
        }
        sums->err2[t->type] += e2;
        sums->ref2[t->type] += r2;
        sums->n[t->type] += n;
        free(x);
    }
}

static double rel_rms(const error_sums *s, int type) {
    return s->ref2[type] > 0 ? sqrt(s->err2[type] / s->ref2[type]) : 0;
}

int main(void) {
    const char *fix = test_fixtures_dir();
    if (!fix) {
        printf("SKIP: needs the fixtures' llama-spm in llama-quantize's types\n");
        return TEST_SKIP_CODE;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/models/llama-spm-f32.gguf", fix);
    toy_gguf *f32;
    if (toy_gguf_open(path, &f32) != TOY_OK) {
        fprintf(stderr, "%s\n", toy_last_error());
        return 1;
    }
    char tmp[] = "/tmp/toy_quantize_fixtures_XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);

    printf("%-8s %-7s %8s %12s %12s %8s %10s\n", "file", "type", "tensors", "llama.cpp",
           "toy", "ratio", "identical");
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        snprintf(path, sizeof path, "%s/models/llama-spm-%s.gguf", fix, variants[v].file);
        toy_gguf *ref;
        if (toy_gguf_open(path, &ref) != TOY_OK) {
            fprintf(stderr, "%s\n", toy_last_error());
            test_failures++;
            continue;
        }
        error_sums ref_err;
        measure(f32, ref, variants[v].file, &ref_err);
        for (int type = 0; type < TOY_TYPE_COUNT; type++)
            if (ref_err.n[type])
                CHECK_MSG(rel_rms(&ref_err, type) <= type_bound(type),
                          "llama.cpp's %s: %s tensors have relRMS %.4g > %.4g", variants[v].file,
                          toy_type_name(type), rel_rms(&ref_err, type), type_bound(type));

        if (!variants[v].ftype) {
            for (int type = 0; type < TOY_TYPE_COUNT; type++)
                if (ref_err.n[type] && type != TOY_TYPE_F32)
                    printf("%-8s %-7s %8s %12.6f %12s %8s %10s\n", variants[v].file,
                           toy_type_name(type), "-", rel_rms(&ref_err, type), "-", "-", "-");
            toy_gguf_close(ref);
            continue;
        }

        char out[4400];
        snprintf(out, sizeof out, "%s/%s.gguf", tmp, variants[v].file);
        toy_quantize_params params = toy_quantize_default_params();
        params.n_threads = 2;
        int ftype = toy_ftype_from_name(variants[v].ftype);
        snprintf(path, sizeof path, "%s/models/llama-spm-f32.gguf", fix);
        if (toy_quantize_file(path, out, ftype, &params) != TOY_OK) {
            fprintf(stderr, "quantize %s: %s\n", variants[v].ftype, toy_last_error());
            test_failures++;
            toy_gguf_close(ref);
            continue;
        }
        toy_gguf *mine;
        CHECK(toy_gguf_open(out, &mine) == TOY_OK);
        uint64_t file_type = 0;
        CHECK(toy_gguf_get_u64(mine, "general.file_type", &file_type) == TOY_OK);
        CHECK_EQ(file_type, ftype);

        /* the mix: the same type for every tensor, and which bytes agree */
        CHECK_EQ(toy_gguf_n_tensors(mine), toy_gguf_n_tensors(ref));
        int count[TOY_TYPE_COUNT] = {0}, same[TOY_TYPE_COUNT] = {0};
        for (int64_t i = 0; i < toy_gguf_n_tensors(ref); i++) {
            const toy_gguf_tensor *r = toy_gguf_tensor_at(ref, i);
            const toy_gguf_tensor *m = toy_gguf_find_tensor(mine, r->name);
            CHECK_MSG(m != NULL, "%s: toy's file lacks %s", variants[v].file, r->name);
            if (!m) continue;
            CHECK_MSG(m->type == r->type, "%s: %s is %s in toy's file, %s in llama.cpp's",
                      variants[v].file, r->name, toy_type_name(m->type), toy_type_name(r->type));
            count[r->type]++;
            if (m->type == r->type && m->size == r->size && memcmp(m->data, r->data, r->size) == 0)
                same[r->type]++;
        }

        error_sums my_err;
        measure(f32, mine, variants[v].ftype, &my_err);
        double all_ref = 0, all_mine = 0, all_r2 = 0;
        for (int type = 0; type < TOY_TYPE_COUNT; type++) {
            if (!ref_err.n[type] || type == TOY_TYPE_F32) continue;
            double a = rel_rms(&ref_err, type), b = rel_rms(&my_err, type);
            double ratio = a > 0 ? b / a : (b == 0 ? 1 : INFINITY);
            printf("%-8s %-7s %8d %12.6f %12.6f %8.4f %6d/%-3d\n", variants[v].file,
                   toy_type_name(type), count[type], a, b, ratio, same[type], count[type]);
            CHECK_MSG(ratio <= 1.05, "%s: %s error %.6g is more than 1.05x llama.cpp's %.6g",
                      variants[v].file, toy_type_name(type), b, a);
            all_ref += ref_err.err2[type];
            all_mine += my_err.err2[type];
            all_r2 += ref_err.ref2[type];
        }
        if (all_r2 > 0)
            CHECK_MSG(sqrt(all_mine / all_r2) <= 1.05 * sqrt(all_ref / all_r2),
                      "%s: overall error above 1.05x llama.cpp's", variants[v].file);
        toy_gguf_close(mine);
        toy_gguf_close(ref);
        unlink(out);
    }
    rmdir(tmp);
    toy_gguf_close(f32);
    return test_finish("test_quantize_fixtures");
}
