/* quant.c — the table of GGUF weight types. The rows of each live in quant_float.c (F32,
 * F16, BF16), quant_legacy.c (Q4_0..Q8_0), quant_k.c (K-quants) and quant_iq.c (IQ4_NL,
 * IQ4_XS). */
#include "quant.h"

#include <strings.h>
#include <string.h>

#include "error.h"

/* ---------------------------------------------------------------- the type table
 * Every type a GGUF file may hold is listed so that files with types toy cannot
 * convert can still be read and described; the sizes are ggml's. */

#define T(id, nm, bs, ts, to, from) [id] = {nm, bs, ts, to, from}

static const ty_type_traits type_traits[TOY_TYPE_COUNT] = {
    T(TOY_TYPE_F32, "F32", 1, 4, ty_dequantize_row_f32, ty_quantize_row_f32),
    T(TOY_TYPE_F16, "F16", 1, 2, ty_dequantize_row_f16, ty_quantize_row_f16),
    T(TOY_TYPE_Q4_0, "Q4_0", QK4_0, sizeof(block_q4_0), ty_dequantize_row_q4_0,
      ty_quantize_row_q4_0),
    T(TOY_TYPE_Q4_1, "Q4_1", QK4_1, sizeof(block_q4_1), ty_dequantize_row_q4_1,
      ty_quantize_row_q4_1),
    T(TOY_TYPE_Q5_0, "Q5_0", QK5_0, sizeof(block_q5_0), ty_dequantize_row_q5_0,
      ty_quantize_row_q5_0),
    T(TOY_TYPE_Q5_1, "Q5_1", QK5_1, sizeof(block_q5_1), ty_dequantize_row_q5_1,
      ty_quantize_row_q5_1),
    T(TOY_TYPE_Q8_0, "Q8_0", QK8_0, sizeof(block_q8_0), ty_dequantize_row_q8_0,
      ty_quantize_row_q8_0),
    T(TOY_TYPE_Q8_1, "Q8_1", QK8_1, sizeof(block_q8_1), NULL, NULL),
    T(TOY_TYPE_Q2_K, "Q2_K", QK_K, sizeof(block_q2_K), ty_dequantize_row_q2_K,
      ty_quantize_row_q2_K),
    T(TOY_TYPE_Q3_K, "Q3_K", QK_K, sizeof(block_q3_K), ty_dequantize_row_q3_K,
      ty_quantize_row_q3_K),
    T(TOY_TYPE_Q4_K, "Q4_K", QK_K, sizeof(block_q4_K), ty_dequantize_row_q4_K,
      ty_quantize_row_q4_K),
    T(TOY_TYPE_Q5_K, "Q5_K", QK_K, sizeof(block_q5_K), ty_dequantize_row_q5_K,
      ty_quantize_row_q5_K),
    T(TOY_TYPE_Q6_K, "Q6_K", QK_K, sizeof(block_q6_K), ty_dequantize_row_q6_K,
      ty_quantize_row_q6_K),
    T(TOY_TYPE_Q8_K, "Q8_K", QK_K, sizeof(block_q8_K), NULL, NULL),
    T(TOY_TYPE_IQ2_XXS, "IQ2_XXS", QK_K, 66, NULL, NULL),
    T(TOY_TYPE_IQ2_XS, "IQ2_XS", QK_K, 74, NULL, NULL),
    T(TOY_TYPE_IQ3_XXS, "IQ3_XXS", QK_K, 98, NULL, NULL),
    T(TOY_TYPE_IQ1_S, "IQ1_S", QK_K, 50, NULL, NULL),
    T(TOY_TYPE_IQ4_NL, "IQ4_NL", QK4_NL, sizeof(block_iq4_nl), ty_dequantize_row_iq4_nl,
      ty_quantize_row_iq4_nl),
    T(TOY_TYPE_IQ3_S, "IQ3_S", QK_K, 110, NULL, NULL),
    T(TOY_TYPE_IQ2_S, "IQ2_S", QK_K, 82, NULL, NULL),
    T(TOY_TYPE_IQ4_XS, "IQ4_XS", QK_K, sizeof(block_iq4_xs), ty_dequantize_row_iq4_xs,
      NULL),
    T(TOY_TYPE_I8, "I8", 1, 1, NULL, NULL),
    T(TOY_TYPE_I16, "I16", 1, 2, NULL, NULL),
    T(TOY_TYPE_I32, "I32", 1, 4, NULL, NULL),
    T(TOY_TYPE_I64, "I64", 1, 8, NULL, NULL),
    T(TOY_TYPE_F64, "F64", 1, 8, NULL, NULL),
    T(TOY_TYPE_IQ1_M, "IQ1_M", QK_K, 56, NULL, NULL),
    T(TOY_TYPE_BF16, "BF16", 1, 2, ty_dequantize_row_bf16, ty_quantize_row_bf16),
    T(TOY_TYPE_TQ1_0, "TQ1_0", QK_K, 54, NULL, NULL),
    T(TOY_TYPE_TQ2_0, "TQ2_0", QK_K, 66, NULL, NULL),
    T(TOY_TYPE_MXFP4, "MXFP4", 32, 17, NULL, NULL),
};

#undef T

const ty_type_traits *ty_type_traits_get(int type) {
    if (type < 0 || type >= TOY_TYPE_COUNT || !type_traits[type].name) return NULL;
    return &type_traits[type];
}

const char *toy_type_name(toy_type type) {
    const ty_type_traits *t = ty_type_traits_get(type);
    return t ? t->name : NULL;
}

toy_type toy_type_from_name(const char *name) {
    for (int i = 0; i < TOY_TYPE_COUNT; i++)
        if (type_traits[i].name && strcasecmp(type_traits[i].name, name) == 0) return (toy_type)i;
    return TOY_TYPE_NONE;
}

int64_t toy_type_block_size(toy_type type) {
    const ty_type_traits *t = ty_type_traits_get(type);
    return t ? t->block_size : 0;
}

size_t toy_type_size(toy_type type) {
    const ty_type_traits *t = ty_type_traits_get(type);
    return t ? t->type_size : 0;
}

toy_status toy_type_row_size(toy_type type, int64_t n, size_t *out) {
    const ty_type_traits *t = ty_type_traits_get(type);
    if (!t) return ty_error(TOY_ERR_UNSUPPORTED, "unknown tensor type %d", type);
    if (n < 0 || n % t->block_size != 0)
        return ty_error(TOY_ERR_INVALID, "type %s needs a multiple of %lld elements, got %lld",
                        t->name, (long long)t->block_size, (long long)n);
    if (ty_mul_overflows((size_t)(n / t->block_size), t->type_size, out))
        return ty_error(TOY_ERR_INVALID, "row of %lld %s elements overflows size_t",
                        (long long)n, t->name);
    return TOY_OK;
}

bool toy_type_can_dequantize(toy_type type) {
    const ty_type_traits *t = ty_type_traits_get(type);
    return t && t->to_float;
}

bool toy_type_can_quantize(toy_type type) {
    const ty_type_traits *t = ty_type_traits_get(type);
    return t && t->from_float;
}

toy_status toy_dequantize(toy_type type, const void *src, float *dst, int64_t n) {
    size_t size;
    toy_status st = toy_type_row_size(type, n, &size);
    if (st) return st;
    const ty_type_traits *t = ty_type_traits_get(type);
    if (!t->to_float)
        return ty_error(TOY_ERR_UNSUPPORTED, "cannot dequantize type %s", t->name);
    t->to_float(src, dst, n);
    return TOY_OK;
}

toy_status toy_quantize(toy_type type, const float *src, void *dst, int64_t n) {
    size_t size;
    toy_status st = toy_type_row_size(type, n, &size);
    if (st) return st;
    const ty_type_traits *t = ty_type_traits_get(type);
    if (!t->from_float)
        return ty_error(TOY_ERR_UNSUPPORTED, "cannot quantize to type %s", t->name);
    t->from_float(src, dst, n);
    return TOY_OK;
}
