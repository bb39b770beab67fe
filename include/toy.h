/* toy.h — the public C API of libtoy.
 *
 * Conventions (in the spirit of llama.h and sqlite3.h):
 *   - handles are opaque; every object has one create and one free function;
 *   - functions that can fail return a toy_status; on failure the message naming
 *     the file, key, tensor or byte offset is available from toy_last_error()
 *     (per thread, valid until the next failing call on that thread);
 *   - the library never prints, never exits and exports no global variables.
 */
#ifndef TOY_H
#define TOY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TOY_API __attribute__((visibility("default")))
#else
#define TOY_API
#endif

/* ---------------------------------------------------------------- versions and the ABI
 *
 * toy's versions are MAJOR.MINOR.PATCH, and the shared library's soname is
 * libtoy.so.MAJOR. Within one major version, a program built against an older release
 * runs against a newer one unchanged:
 *   - functions, enum values and #defines are added, never removed or changed;
 *   - a struct the caller fills in (the *_params) begins with `size`, which its *_init
 *     function (or the static inline *_default_params) sets to the caller's sizeof; new
 *     fields are only ever appended, and the library gives the fields a shorter struct
 *     lacks their defaults. A size of 0 (a struct not initialised so) is an error;
 *   - a struct the library fills in for the caller (the *_result, *_stats) begins with
 *     `size` too, set by the caller; the library writes no more bytes than it says;
 *   - a struct the library owns and hands out by const pointer (toy_gguf_tensor,
 *     toy_train_progress) only grows at its end;
 *   - toy_batch and toy_chat_message never change.
 * Only the functions marked TOY_API are exported. TOY_VERSION_* is the header a program
 * was built against; toy_version() the library it runs against. */

#define TOY_VERSION_MAJOR 3
#define TOY_VERSION_MINOR 1
#define TOY_VERSION_PATCH 0
#define TOY_VERSION_STRING "3.1.0"

/* MAJOR * 1000000 + MINOR * 1000 + PATCH of the running library; each of major, minor
 * and patch may be NULL. */
TOY_API int toy_version(int *major, int *minor, int *patch);

/* Frees what the library returned as malloc'd (toy_detokenize's and toy_chat_apply's
 * text, toy_cka_models' matrix); the same as free() in C, for callers in other
 * languages. NULL is fine. */
TOY_API void toy_free(void *p);

/* ---------------------------------------------------------------- status */

typedef enum {
    TOY_OK = 0,
    TOY_ERR_IO,          /* open/read/write/mmap failed */
    TOY_ERR_FORMAT,      /* the file is malformed */
    TOY_ERR_NOMEM,       /* allocation failed */
    TOY_ERR_INVALID,     /* a bad argument or request */
    TOY_ERR_UNSUPPORTED, /* well-formed, but not something toy handles */
    TOY_ERR_NOT_FOUND,   /* a key or tensor that was asked for is absent */
    TOY_ERR_BUFFER,      /* the caller's buffer is too small; the size needed is reported */
} toy_status;

TOY_API const char *toy_status_str(toy_status status);
/* The message of the last failure on this thread ("" if none). */
TOY_API const char *toy_last_error(void);
/* The instruction set toy's kernels use on this CPU: "amx", "avx512", "avxvnni", "avx2"
 * or "scalar" (the environment variable TOY_ISA may ask for a lower one). Results are the
 * same bits. */
TOY_API const char *toy_kernel_isa(void);
/* How `--compute bf16` training products run: "vdpbf16ps" (AVX-512 BF16 dot products,
 * F32 sums), else why not: "absent" (the CPU lacks AVX512_BF16), "off (kernels below
 * avx512)" or "off (probe differs: ...)" (the instruction's results differ from toy's
 * definition on this CPU, in what it names); then operands are rounded to BF16 for the
 * F32 products. */
TOY_API const char *toy_kernel_bf16_dot(void);
/* TOY_OK, or TOY_ERR_INVALID naming the allowed values when the environment variable
 * TOY_ISA names no instruction set (contexts and training fail the same way). */
TOY_API toy_status toy_kernel_init(void);

/* ---------------------------------------------------------------- weight types
 * The numbering is ggml's (enum ggml_type), which is what GGUF files store. */

typedef enum {
    TOY_TYPE_F32 = 0,
    TOY_TYPE_F16 = 1,
    TOY_TYPE_Q4_0 = 2,
    TOY_TYPE_Q4_1 = 3,
    TOY_TYPE_Q5_0 = 6,
    TOY_TYPE_Q5_1 = 7,
    TOY_TYPE_Q8_0 = 8,
    TOY_TYPE_Q8_1 = 9,
    TOY_TYPE_Q2_K = 10,
    TOY_TYPE_Q3_K = 11,
    TOY_TYPE_Q4_K = 12,
    TOY_TYPE_Q5_K = 13,
    TOY_TYPE_Q6_K = 14,
    TOY_TYPE_Q8_K = 15,
    TOY_TYPE_IQ2_XXS = 16,
    TOY_TYPE_IQ2_XS = 17,
    TOY_TYPE_IQ3_XXS = 18,
    TOY_TYPE_IQ1_S = 19,
    TOY_TYPE_IQ4_NL = 20,
    TOY_TYPE_IQ3_S = 21,
    TOY_TYPE_IQ2_S = 22,
    TOY_TYPE_IQ4_XS = 23,
    TOY_TYPE_I8 = 24,
    TOY_TYPE_I16 = 25,
    TOY_TYPE_I32 = 26,
    TOY_TYPE_I64 = 27,
    TOY_TYPE_F64 = 28,
    TOY_TYPE_IQ1_M = 29,
    TOY_TYPE_BF16 = 30,
    TOY_TYPE_TQ1_0 = 34,
    TOY_TYPE_TQ2_0 = 35,
    TOY_TYPE_MXFP4 = 39,
    TOY_TYPE_COUNT = 40,
    TOY_TYPE_NONE = -1, /* no type: a name toy_type_from_name does not know */
} toy_type;

/* Name as ggml spells it ("Q4_K"), or NULL for a number that is no known type. */
TOY_API const char *toy_type_name(toy_type type);
/* Parses a type name, case-insensitive. Returns TOY_TYPE_NONE if unknown. */
TOY_API toy_type toy_type_from_name(const char *name);
/* Elements per block and bytes per block; 0 for an unknown type. */
TOY_API int64_t toy_type_block_size(toy_type type);
TOY_API size_t toy_type_size(toy_type type);
/* Bytes of a row of n elements; fails if n is not a whole number of blocks or the
 * size overflows. */
TOY_API toy_status toy_type_row_size(toy_type type, int64_t n, size_t *out);
TOY_API bool toy_type_can_dequantize(toy_type type);
TOY_API bool toy_type_can_quantize(toy_type type);
/* Converts n elements (a whole number of blocks) to float / from float. */
TOY_API toy_status toy_dequantize(toy_type type, const void *src, float *dst, int64_t n);
TOY_API toy_status toy_quantize(toy_type type, const float *src, void *dst, int64_t n);

/* ---------------------------------------------------------------- GGUF reading */

typedef enum {
    TOY_GGUF_UINT8 = 0,
    TOY_GGUF_INT8 = 1,
    TOY_GGUF_UINT16 = 2,
    TOY_GGUF_INT16 = 3,
    TOY_GGUF_UINT32 = 4,
    TOY_GGUF_INT32 = 5,
    TOY_GGUF_FLOAT32 = 6,
    TOY_GGUF_BOOL = 7,
    TOY_GGUF_STRING = 8,
    TOY_GGUF_ARRAY = 9,
    TOY_GGUF_UINT64 = 10,
    TOY_GGUF_INT64 = 11,
    TOY_GGUF_FLOAT64 = 12,
    TOY_GGUF_TYPE_COUNT = 13,
} toy_gguf_type;

TOY_API const char *toy_gguf_type_name(toy_gguf_type type);

#define TOY_GGUF_DEFAULT_ALIGNMENT 32
#define TOY_MAX_DIMS 4

typedef struct toy_gguf toy_gguf;
/* A metadata value, or an element of an array value. Owned by its toy_gguf. */
typedef struct toy_gguf_value toy_gguf_value;

typedef struct {
    const char *name;             /* NUL-terminated */
    toy_type type;
    int n_dims;                   /* 0..TOY_MAX_DIMS (0: a scalar) */
    int64_t ne[TOY_MAX_DIMS];     /* elements per dimension, fastest first; unused = 1 */
    uint64_t offset;              /* within the data section */
    size_t size;                  /* bytes */
    const void *data;             /* in place, inside the mapped file */
} toy_gguf_tensor;

/* Maps and validates a GGUF file (versions 2 and 3). Tensor data stays in the map. */
TOY_API toy_status toy_gguf_open(const char *path, toy_gguf **out);
/* The same with the whole file read into allocated memory instead of mapped. */
TOY_API toy_status toy_gguf_open_read(const char *path, toy_gguf **out);
/* The same over a caller-owned buffer that must outlive the handle; `name` is used
 * in error messages. */
TOY_API toy_status toy_gguf_open_memory(const void *data, size_t size, const char *name,
                                        toy_gguf **out);
TOY_API void toy_gguf_close(toy_gguf *gguf);

TOY_API const char *toy_gguf_path(const toy_gguf *gguf);
/* The path of the open GGUF file whose memory mapping holds addr, NULL if none. A mapped
 * file that another program truncates faults (SIGBUS) on the pages it lost; a program's
 * SIGBUS handler can name the file with this. Safe to call from a signal handler. */
TOY_API const char *toy_gguf_mapped_file(const void *addr);
TOY_API uint32_t toy_gguf_version(const toy_gguf *gguf);
TOY_API size_t toy_gguf_alignment(const toy_gguf *gguf);
TOY_API size_t toy_gguf_file_size(const toy_gguf *gguf);
TOY_API size_t toy_gguf_data_offset(const toy_gguf *gguf);

TOY_API int64_t toy_gguf_n_kv(const toy_gguf *gguf);
TOY_API const char *toy_gguf_key(const toy_gguf *gguf, int64_t i);
TOY_API const toy_gguf_value *toy_gguf_kv(const toy_gguf *gguf, int64_t i);
/* Index of a key, or -1. */
TOY_API int64_t toy_gguf_find_key(const toy_gguf *gguf, const char *key);
/* The value of a key, or NULL. */
TOY_API const toy_gguf_value *toy_gguf_get(const toy_gguf *gguf, const char *key);

TOY_API toy_gguf_type toy_gguf_value_type(const toy_gguf_value *v);
/* Integer values of any width and signedness; fails if the value is no integer or
 * does not fit. */
TOY_API toy_status toy_gguf_value_u64(const toy_gguf_value *v, uint64_t *out);
TOY_API toy_status toy_gguf_value_i64(const toy_gguf_value *v, int64_t *out);
/* FLOAT32, FLOAT64 (and integers, converted). */
TOY_API toy_status toy_gguf_value_f64(const toy_gguf_value *v, double *out);
TOY_API toy_status toy_gguf_value_bool(const toy_gguf_value *v, bool *out);
/* A STRING's bytes (not NUL-terminated, may contain any byte) and length. */
TOY_API toy_status toy_gguf_value_str(const toy_gguf_value *v, const char **s, size_t *len);
/* Arrays: element type and count. Elements of arrays of strings or of arrays are
 * values (toy_gguf_array_get, NULL otherwise); elements of arrays of numbers or bools
 * are read with the typed accessors, which convert like the toy_gguf_value_* ones. */
TOY_API toy_gguf_type toy_gguf_array_type(const toy_gguf_value *v);
TOY_API uint64_t toy_gguf_array_len(const toy_gguf_value *v);
TOY_API const toy_gguf_value *toy_gguf_array_get(const toy_gguf_value *v, uint64_t j);
TOY_API toy_status toy_gguf_array_u64(const toy_gguf_value *v, uint64_t j, uint64_t *out);
TOY_API toy_status toy_gguf_array_i64(const toy_gguf_value *v, uint64_t j, int64_t *out);
TOY_API toy_status toy_gguf_array_f64(const toy_gguf_value *v, uint64_t j, double *out);
TOY_API toy_status toy_gguf_array_str(const toy_gguf_value *v, uint64_t j, const char **s,
                                      size_t *len);
/* Raw little-endian elements of an array of numbers or bools (possibly unaligned),
 * NULL for arrays of strings or arrays. */
TOY_API const void *toy_gguf_array_data(const toy_gguf_value *v);

/* Convenience lookups by key: TOY_ERR_NOT_FOUND if absent, TOY_ERR_FORMAT (naming the
 * key) if present with the wrong type. */
TOY_API toy_status toy_gguf_get_u64(const toy_gguf *gguf, const char *key, uint64_t *out);
TOY_API toy_status toy_gguf_get_f64(const toy_gguf *gguf, const char *key, double *out);
TOY_API toy_status toy_gguf_get_bool(const toy_gguf *gguf, const char *key, bool *out);
TOY_API toy_status toy_gguf_get_str(const toy_gguf *gguf, const char *key, const char **s,
                                    size_t *len);

TOY_API int64_t toy_gguf_n_tensors(const toy_gguf *gguf);
TOY_API const toy_gguf_tensor *toy_gguf_tensor_at(const toy_gguf *gguf, int64_t i);
/* mlock()s the mapped file. */
TOY_API toy_status toy_gguf_mlock(toy_gguf *gguf);
/* NULL if absent. */
TOY_API const toy_gguf_tensor *toy_gguf_find_tensor(const toy_gguf *gguf, const char *name);
TOY_API int64_t toy_tensor_nelements(const toy_gguf_tensor *t);

/* ---------------------------------------------------------------- GGUF writing
 * Collect metadata and tensor infos, then either write everything at once
 * (toy_gguf_writer_write, tensor data given at add time) or stream the tensor data in
 * order (begin / write_tensor_data / finish). The file appears atomically: it is
 * written to PATH.tmp.XXXXXX and renamed when complete. */

typedef struct toy_gguf_writer toy_gguf_writer;

TOY_API toy_gguf_writer *toy_gguf_writer_new(void);
TOY_API void toy_gguf_writer_free(toy_gguf_writer *w);

/* Setting a key that is already present replaces its value in place. */
TOY_API toy_status toy_gguf_writer_set_u8(toy_gguf_writer *w, const char *key, uint8_t v);
TOY_API toy_status toy_gguf_writer_set_i8(toy_gguf_writer *w, const char *key, int8_t v);
TOY_API toy_status toy_gguf_writer_set_u16(toy_gguf_writer *w, const char *key, uint16_t v);
TOY_API toy_status toy_gguf_writer_set_i16(toy_gguf_writer *w, const char *key, int16_t v);
TOY_API toy_status toy_gguf_writer_set_u32(toy_gguf_writer *w, const char *key, uint32_t v);
TOY_API toy_status toy_gguf_writer_set_i32(toy_gguf_writer *w, const char *key, int32_t v);
TOY_API toy_status toy_gguf_writer_set_u64(toy_gguf_writer *w, const char *key, uint64_t v);
TOY_API toy_status toy_gguf_writer_set_i64(toy_gguf_writer *w, const char *key, int64_t v);
TOY_API toy_status toy_gguf_writer_set_f32(toy_gguf_writer *w, const char *key, float v);
TOY_API toy_status toy_gguf_writer_set_f64(toy_gguf_writer *w, const char *key, double v);
TOY_API toy_status toy_gguf_writer_set_bool(toy_gguf_writer *w, const char *key, bool v);
TOY_API toy_status toy_gguf_writer_set_str(toy_gguf_writer *w, const char *key, const char *s,
                                           size_t len);
/* An array of numbers or bools: n elements of `elem_type`, little-endian. */
TOY_API toy_status toy_gguf_writer_set_array(toy_gguf_writer *w, const char *key,
                                             toy_gguf_type elem_type, const void *data,
                                             uint64_t n);
TOY_API toy_status toy_gguf_writer_set_str_array(toy_gguf_writer *w, const char *key,
                                                 const char *const *strs, const size_t *lens,
                                                 uint64_t n);
/* Copies any value, arrays of arrays included (e.g. from a file being converted). */
TOY_API toy_status toy_gguf_writer_set_value(toy_gguf_writer *w, const char *key,
                                             const toy_gguf_value *v);
TOY_API toy_status toy_gguf_writer_remove(toy_gguf_writer *w, const char *key);

/* `data` may be NULL when streaming; otherwise it must stay valid until written. */
TOY_API toy_status toy_gguf_writer_add_tensor(toy_gguf_writer *w, const char *name, toy_type type,
                                              int n_dims, const int64_t *ne, const void *data);

TOY_API toy_status toy_gguf_writer_write(toy_gguf_writer *w, const char *path);
TOY_API toy_status toy_gguf_writer_begin(toy_gguf_writer *w, const char *path);
/* Data of the next tensor, in the order the tensors were added; `size` must be its
 * size. */
TOY_API toy_status toy_gguf_writer_write_tensor_data(toy_gguf_writer *w, const void *data,
                                                     size_t size);
TOY_API toy_status toy_gguf_writer_finish(toy_gguf_writer *w);

/* ---------------------------------------------------------------- vocabulary
 * The tokenizer described by a GGUF file's tokenizer.* metadata: SentencePiece-style
 * ("llama"), byte-level BPE ("gpt2", with the pre-tokenizer named by
 * tokenizer.ggml.pre) and WordPiece ("bert"), producing llama.cpp's token ids. */

typedef struct toy_vocab toy_vocab;

/* Token attributes, as tokenizer.ggml.token_type stores them. */
typedef enum {
    TOY_TOKEN_UNDEFINED = 0,
    TOY_TOKEN_NORMAL = 1,
    TOY_TOKEN_UNKNOWN = 2,
    TOY_TOKEN_CONTROL = 3,
    TOY_TOKEN_USER_DEFINED = 4,
    TOY_TOKEN_UNUSED = 5,
    TOY_TOKEN_BYTE = 6,
} toy_token_type;

typedef enum {
    TOY_VOCAB_SPM = 1,  /* tokenizer.ggml.model "llama" */
    TOY_VOCAB_BPE = 2,  /* "gpt2" */
    TOY_VOCAB_WPM = 3,  /* "bert" */
} toy_vocab_kind;

/* Reads the vocabulary from a file's metadata; the handle keeps no pointer into it. */
TOY_API toy_status toy_vocab_load(const toy_gguf *gguf, toy_vocab **out);
TOY_API void toy_vocab_free(toy_vocab *vocab);

TOY_API toy_vocab_kind toy_vocab_kind_of(const toy_vocab *vocab);
TOY_API int32_t toy_vocab_n_tokens(const toy_vocab *vocab);
/* -1 when the vocabulary has no such token. */
TOY_API int32_t toy_vocab_bos(const toy_vocab *vocab);
TOY_API int32_t toy_vocab_eos(const toy_vocab *vocab);
TOY_API int32_t toy_vocab_eot(const toy_vocab *vocab);
TOY_API bool toy_vocab_add_bos(const toy_vocab *vocab);
TOY_API bool toy_vocab_add_eos(const toy_vocab *vocab);
/* End of generation: EOS, EOT and the tokens llama.cpp treats so (<|im_end|>,
 * <|eot_id|>, <|end|>, <end_of_turn>, ...). */
TOY_API bool toy_vocab_is_eog(const toy_vocab *vocab, int32_t token);
TOY_API toy_token_type toy_vocab_token_type(const toy_vocab *vocab, int32_t token);
/* The token's text as stored in the vocabulary (NUL-terminated), NULL if out of range. */
TOY_API const char *toy_vocab_token_text(const toy_vocab *vocab, int32_t token);

/* Text to token ids, as llama_tokenize(text, add_special, parse_special): with
 * add_special, BOS/EOS are added as the vocabulary asks; with parse_special, the text of
 * control and user-defined tokens in `text` becomes those tokens. *n_tokens is the
 * number of ids the text needs; when that is more than n_max, nothing is written and
 * the status is TOY_ERR_BUFFER (retry with a buffer of *n_tokens, or use
 * toy_tokenize_alloc). A text can need more ids than it has bytes: an invalid UTF-8
 * byte becomes U+FFFD, three byte tokens in a byte-level vocabulary. */
TOY_API toy_status toy_tokenize(const toy_vocab *vocab, const char *text, size_t len,
                                bool add_special, bool parse_special, int32_t *tokens,
                                int32_t n_max, int32_t *n_tokens);
/* The same into *tokens, malloc'd to the count the text needs (free with toy_free;
 * never NULL on success, even for no tokens). */
TOY_API toy_status toy_tokenize_alloc(const toy_vocab *vocab, const char *text, size_t len,
                                      bool add_special, bool parse_special, int32_t **tokens,
                                      int32_t *n_tokens);
/* The bytes a token stands for in output text (SPM's U+2581 as a space, byte tokens as
 * their byte, BPE's byte-level characters as bytes). Control tokens give "" unless
 * `special`. *len is the full length; when that is more than cap, nothing is written and
 * the status is TOY_ERR_BUFFER. */
TOY_API toy_status toy_token_to_piece(const toy_vocab *vocab, int32_t token, bool special,
                                      char *buf, size_t cap, size_t *len);
/* Token ids to text (llama_detokenize with remove_special = false,
 * unparse_special = `special`), exact to the byte. `*out` is malloc'd, NUL-terminated. */
TOY_API toy_status toy_detokenize(const toy_vocab *vocab, const int32_t *tokens,
                                  int32_t n_tokens, bool special, char **out, size_t *len);

/* ---------------------------------------------------------------- pipelines
 * A model larger than one machine: under `mpirun -np N`, its layers split into N
 * contiguous stages, one per process (balanced by bytes, or toy_model_params.split).
 * Every process calls toy_pipeline_init first. Rank 0 then runs the program as alone;
 * its models, contexts, batches and KV-cache edits are mirrored on the other ranks,
 * which call toy_pipeline_worker and return from it when rank 0 exits. A batch's
 * activations pass from rank to rank ([tokens x n_embd] F32), and the last rank sends
 * the logits (and embeddings) to rank 0: the same bits as one process. Each rank maps
 * the whole file but reads and repacks only its own layers (and the first the
 * embeddings, the last the output); LoRA adapters and tracing are not supported there.
 * A rank that dies ends every rank (mpirun's doing). Alone (no mpirun, or -np 1):
 * *size 1 and nothing changes. */
TOY_API toy_status toy_pipeline_init(int *rank, int *size);
TOY_API toy_status toy_pipeline_worker(void);

/* ---------------------------------------------------------------- models */

typedef struct toy_model toy_model;

typedef struct {
    size_t size;   /* sizeof (toy_model_params), as toy_model_default_params sets it */
    /* true (default): the weights stay in the memory-mapped file; false: the file is
     * read into allocated memory (filesystems without mmap). Same logits either way. */
    bool use_mmap;
    /* In a pipeline (toy_pipeline_init): the layers of each stage, n_split of them, one per
     * process (NULL: balanced by the bytes of their tensors). Alone: must be NULL. */
    const int32_t *split;
    int32_t n_split;
} toy_model_params;

TOY_API void toy_model_params_init(toy_model_params *params, size_t size);
static inline toy_model_params toy_model_default_params(void) {
    toy_model_params p;
    toy_model_params_init(&p, sizeof p);
    return p;
}

/* Maps a GGUF model, reads its hyperparameters and tokenizer and binds every weight in
 * place. A missing or mis-shaped tensor is an error naming it. */
TOY_API toy_status toy_model_load(const char *path, toy_model **out);
/* The same with parameters (NULL: the defaults, which toy_model_load uses). */
TOY_API toy_status toy_model_load_with(const char *path, const toy_model_params *params,
                                       toy_model **out);
TOY_API void toy_model_free(toy_model *model);
TOY_API const toy_vocab *toy_model_vocab(const toy_model *model);
TOY_API const toy_gguf *toy_model_gguf(const toy_model *model);
TOY_API int32_t toy_model_n_vocab(const toy_model *model);
TOY_API int32_t toy_model_n_ctx_train(const toy_model *model);
TOY_API int32_t toy_model_n_embd(const toy_model *model);
TOY_API int32_t toy_model_n_layer(const toy_model *model);
TOY_API int32_t toy_model_n_head(const toy_model *model);    /* query heads */
TOY_API int32_t toy_model_n_head_kv(const toy_model *model); /* key/value heads */

/* How an embedding's token states become one vector (llama.cpp's enum llama_pooling_type
 * numbering, which GGUF's <arch>.pooling_type stores): the mean of every token's, the
 * first token's (CLS), the last token's; NONE keeps one vector per token; RANK is a
 * reranker's classification head, which toy does not have. */
typedef enum {
    TOY_POOLING_UNSPECIFIED = -1,
    TOY_POOLING_NONE = 0,
    TOY_POOLING_MEAN = 1,
    TOY_POOLING_CLS = 2,
    TOY_POOLING_LAST = 3,
    TOY_POOLING_RANK = 4,
} toy_pooling;

/* The file's <arch>.pooling_type; TOY_POOLING_UNSPECIFIED when it has none (llama-server
 * then pools a causal model's tokens by their mean). */
TOY_API toy_pooling toy_model_pooling(const toy_model *model);
/* Bytes of weights a forward pass reads per token at batch size 1: every matrix, the
 * active share of MoE experts, one embedding row (the whole matrix when it is also the
 * output projection). The numerator of the memory roofline. */
TOY_API uint64_t toy_model_weight_bytes_per_token(const toy_model *model);
/* Locks the mapped weights in RAM (mlock), so they are never paged out. */
TOY_API toy_status toy_model_mlock(toy_model *model);
/* Repacks the weights, now, for this CPU's products of several rows at once (the
 * interleaved groups of docs/performance.md, "Start-up"), on n_threads threads; once per
 * model, later calls return at once. Without it toy_decode repacks before the first
 * batch of 128 tokens or more, or of tokens of several sequences: shorter prompts and one
 * sequence's decoding run on the row kernels, as packing costs more than it saves them.
 * A server calls it before it says it is ready, so that its first request is as fast as
 * the next. In a pipeline every rank repacks its stage. Logits are the same bits packed
 * or not. */
TOY_API toy_status toy_model_pack(toy_model *model, int n_threads);

/* ---------------------------------------------------------------- contexts
 * A context holds the KV cache and scratch for one model, allocated once. toy_decode
 * runs one forward pass over a batch of tokens, each with its sequence id and
 * position, like llama_decode: a prompt, one token per sequence, or any mix. */

typedef struct toy_context toy_context;

/* Called during a forward pass with each named intermediate tensor (a tap), n_tokens rows
 * of n floats, in this order: "embed"; for each layer N, "LN.attn_norm", "LN.q_pre" and
 * "LN.k_pre" (before RoPE), "LN.q", "LN.k", "LN.v" (as attention reads them), "LN.kq" and
 * "LN.kq_soft" (the scores and their softmax: TOY_ATTN_PLAIN only), "LN.attn" (the heads'
 * outputs, head h in columns h * head_dim ...), "LN.attn_proj" (its output projection),
 * "LN.attn_post_norm" (post-norm models), "LN.attn_out" (what the residual stream
 * gets), "LN.ffn_norm", then "LN.ffn_gate", "LN.ffn_up", "LN.ffn_act" (the activation of
 * the gate, or of up without one), "LN.ffn_gated" (act * up), "LN.ffn_down" in a dense
 * FFN, or "LN.moe_router" (router logits) and "LN.moe_experts" (each token's chosen
 * experts' outputs, weighted, in rank order) in a mixture of experts; "LN.ffn_post_norm"
 * (post-norm models), "LN.ffn_out", "LN.out" (the residual stream after the block); then
 * "final_norm" and "logits". A context with a trace computes ffn_act apart (its one
 * extra cost); without one, nothing is traced and nothing costs. */
typedef void (*toy_trace_fn)(void *user, const char *name, const float *data,
                             int64_t n_tokens, int64_t n);

/* How attention runs: fused (one pass, online softmax, nothing of size tokens x cells
 * kept), or plain, the scaled scores QK^T, their softmax and its product with V each
 * materialised in turn, as the trace tensors "Ln.kq" and "Ln.kq_soft" (n_head x n_kv
 * per token, the cells of its sequence; those it does not see -inf, then 0). The two
 * agree to rounding; each is deterministic. */
typedef enum {
    TOY_ATTN_FUSED = 0,
    TOY_ATTN_PLAIN = 1,
} toy_attn;

typedef struct {
    size_t size;       /* sizeof (toy_context_params), as toy_context_default_params sets it */
    int32_t n_ctx;     /* KV cache cells per sequence (0: the model's training context) */
    int32_t n_batch;   /* most tokens one toy_decode call takes */
    int32_t n_seq_max; /* sequences the cache holds (ids 0..n_seq_max-1) */
    int32_t n_outputs; /* most tokens of one batch with logits (0: n_seq_max) */
    int32_t n_threads;
    toy_type cache_type_k; /* KV cache types: TOY_TYPE_F32 (default), F16, BF16 or Q8_0 */
    toy_type cache_type_v;
    /* Use attention.sliding_window where llama.cpp ignores it (phi3); off by default so
     * the numbers match llama.cpp's. */
    bool honor_sliding_window;
    toy_trace_fn trace; /* NULL: no tracing, no cost */
    void *trace_user;
    /* Keep the final-norm hidden state of every token of a batch (the input of the output
     * projection, the "final_norm" trace tensor; llama.cpp's embeddings before pooling)
     * for toy_get_embeddings, whether or not the token's logits were asked for. Off
     * (default): no memory, no cost. */
    bool embeddings;
    toy_attn attn; /* TOY_ATTN_FUSED (default) or TOY_ATTN_PLAIN */
} toy_context_params;

/* Defaults: the model's context, n_batch 512, one sequence, 1 thread, F32 cache. */
TOY_API void toy_context_params_init(toy_context_params *params, size_t size);
static inline toy_context_params toy_context_default_params(void) {
    toy_context_params p;
    toy_context_params_init(&p, sizeof p);
    return p;
}
TOY_API toy_status toy_context_new(toy_model *model, const toy_context_params *params,
                                   toy_context **out);
TOY_API void toy_context_free(toy_context *ctx);
TOY_API int32_t toy_n_ctx(const toy_context *ctx);
TOY_API int32_t toy_n_batch(const toy_context *ctx);

typedef struct {
    int32_t n_tokens;
    const int32_t *token;
    const int32_t *pos;
    const int32_t *seq_id;
    const int8_t *logits; /* per token: compute its logits? NULL: only the last token */
} toy_batch;

TOY_API toy_status toy_decode(toy_context *ctx, const toy_batch *batch);
/* The same in two halves, for a pipeline (toy_pipeline_init): submit returns once this
 * process's stage is done, and up to toy_decode_depth batches (the stages) may be in
 * flight; wait makes the oldest one's outputs readable (toy_get_logits, with that
 * batch's indices). A server keeps every stage busy with batches of different
 * sequences. Alone the depth is 1: submit, then wait. */
TOY_API toy_status toy_decode_submit(toy_context *ctx, const toy_batch *batch);
TOY_API toy_status toy_decode_wait(toy_context *ctx);
TOY_API int toy_decode_depth(const toy_context *ctx);
/* Logits (n_vocab floats) of token i of the last batch, NULL if not requested. */
TOY_API const float *toy_get_logits(const toy_context *ctx, int32_t i);
/* The final-norm hidden state (n_embd floats) of token i of the last batch, any token,
 * with or without its logits; NULL if the context was made without `embeddings` or i is
 * out of range. Row i is the same bits whatever else the batch held, so a sequence may
 * be evaluated in chunks and pooled (mean, first, last) by the caller. */
TOY_API const float *toy_get_embeddings(const toy_context *ctx, int32_t i);

/* KV cache: drop positions [p0, p1) of a sequence (p1 < 0: to the end); shift positions
 * [p0, p1) by delta (keys are re-rotated); the largest position held (-1: empty). */
TOY_API toy_status toy_kv_seq_rm(toy_context *ctx, int32_t seq_id, int32_t p0, int32_t p1);
/* Copies positions [p0, p1) (p0 < 0: from 0, p1 < 0: to the end) of seq_src into seq_dst,
 * whose own cells in that range are dropped: the copies hold the same K and V bytes, so
 * decoding on seq_dst goes on as if it had computed them. They go before seq_dst's first
 * cell at a position >= p1 (rising positions stay rising). Fails, changing nothing, when
 * seq_dst would hold more than n_ctx cells. Same sequence: nothing to do. */
TOY_API toy_status toy_kv_seq_cp(toy_context *ctx, int32_t seq_src, int32_t seq_dst, int32_t p0, int32_t p1);
TOY_API toy_status toy_kv_seq_add(toy_context *ctx, int32_t seq_id, int32_t p0, int32_t p1,
                                  int32_t delta);
TOY_API int32_t toy_kv_seq_pos_max(const toy_context *ctx, int32_t seq_id);

/* ---------------------------------------------------------------- LoRA adapters
 * Adapters in llama.cpp's LoRA GGUF format (general.type "adapter", adapter.lora.alpha,
 * W.lora_a / W.lora_b named after the base tensors W), applied on the fly: each adapted
 * product becomes W x + scale * alpha / rank * B (A x), the base left as it is. toy's
 * design's per-head LoRA-Q adapters load too (blk.N.attn_q.head_H.lora_a.weight and
 * lora_b.weight, one rank-r pair per query head, scale alpha / r; docs/training.md). */

typedef struct toy_lora toy_lora;

/* Reads an adapter and checks it against the base model (architecture, every tensor's
 * name and shape). */
TOY_API toy_status toy_lora_load(const toy_model *base, const char *path, toy_lora **out);
TOY_API void toy_lora_free(toy_lora *lora);
/* The adapters every later toy_decode of the context applies, in order, each with its
 * scale (replacing the previous set; n = 0: none). They must outlive that use. The KV
 * cache is not recomputed: clear it when the set changes mid-conversation. */
TOY_API toy_status toy_context_set_lora(toy_context *ctx, toy_lora *const *loras, const float *scales,
                                        int n);
/* Writes the base model with every adapted matrix replaced by W + sum over the adapters
 * of scale * alpha / rank * B A, in `type` (the other tensors as they are), atomically.
 * At most TOY_LORA_MERGE_MAX adapters. */
#define TOY_LORA_MERGE_MAX 8
TOY_API toy_status toy_lora_merge(const toy_model *base, toy_lora *const *loras, const float *scales, int n,
                                  toy_type type, int n_threads, const char *path);

/* ---------------------------------------------------------------- grammars
 * Constrained generation: a grammar in GBNF, the notation of llama.cpp's grammars
 * (rules `name ::= ...`, start rule "root"; docs/grammars.md), limits what a sampler
 * may pick to the texts of its language. */

typedef struct toy_grammar toy_grammar;

/* Parses and compiles GBNF text whose start rule is `root`, for generating with the
 * tokens of `vocab` (NULL: only toy_grammar_accepts works). An error names the line
 * and column ("line 3, column 12: ..."). A grammar may be shared by several samplers
 * (also on other threads) and must outlive them. */
TOY_API toy_status toy_grammar_new(const toy_vocab *vocab, const char *gbnf, toy_grammar **out);
TOY_API void toy_grammar_free(toy_grammar *grammar);
/* Whether the whole text is in the grammar's language. */
TOY_API bool toy_grammar_accepts(const toy_grammar *grammar, const char *text, size_t len);

/* Converts a JSON Schema (JSON text) to GBNF that accepts the JSON texts the schema
 * allows, in llama.cpp's json-schema-to-grammar form: properties in the schema's order,
 * bounded whitespace and digits (docs/json-schema.md lists what is supported). With
 * strict, a keyword or format toy does not support is an error (TOY_ERR_UNSUPPORTED);
 * without, it is ignored. Invalid JSON or an invalid schema is TOY_ERR_INVALID, the
 * message naming the line and column or the schema's JSON pointer ("#/properties/a").
 * *gbnf is malloc'd (toy_free). */
TOY_API toy_status toy_json_schema_to_gbnf(const char *schema_json, bool strict, char **gbnf);
/* The same, compiled for a vocabulary. */
TOY_API toy_status toy_grammar_from_json_schema(const toy_vocab *vocab, const char *schema_json, bool strict,
                                                toy_grammar **out);

/* ---------------------------------------------------------------- sampling */

/* Added to a token's logit before sampling; a bias of -100 or less bans the token. */
typedef struct {
    int32_t token;
    float bias;
} toy_logit_bias;

typedef struct {
    size_t size;             /* sizeof (toy_sampler_params), as its _default_params sets it */
    float temperature;       /* <= 0: greedy (argmax, lowest id wins a tie) */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off */
    int32_t repeat_last_n;   /* tokens of history the penalties look at (0: off, -1: all) */
    float frequency_penalty; /* 0: off */
    float presence_penalty;  /* 0: off */
    uint64_t seed;           /* same seed, same choices */
    /* Only tokens the grammar allows (NULL: none), masked before every other stage; an
     * end-of-generation token only where the grammar's text is complete. The sampler
     * keeps its own place in the grammar, moved on by each token it samples. */
    const toy_grammar *grammar;
    const toy_logit_bias *logit_bias; /* n_logit_bias entries, copied */
    size_t n_logit_bias;
} toy_sampler_params;

typedef struct toy_sampler toy_sampler;

/* Defaults as llama.cpp's: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_penalty 1.0, repeat_last_n 64, no frequency/presence penalty, seed 0. */
TOY_API void toy_sampler_params_init(toy_sampler_params *params, size_t size);
static inline toy_sampler_params toy_sampler_default_params(void) {
    toy_sampler_params p;
    toy_sampler_params_init(&p, sizeof p);
    return p;
}
TOY_API toy_status toy_sampler_new(const toy_sampler_params *params, int32_t n_vocab,
                                   toy_sampler **out);
TOY_API void toy_sampler_free(toy_sampler *sampler);
/* Picks a token from one row of logits (n_vocab floats; not modified). -1 with
 * toy_last_error set when the grammar allows no token, or logit_bias bans every token
 * it allows (or no memory). */
TOY_API int32_t toy_sampler_sample(toy_sampler *sampler, const float *logits);
/* Records a token (prompt or generated) in the history the penalties use. */
TOY_API void toy_sampler_accept(toy_sampler *sampler, int32_t token);
TOY_API void toy_sampler_reset(toy_sampler *sampler);

/* Stop strings over streamed output: feed each piece of text; the matcher says how many
 * bytes are safe to print now (never the start of a possible stop string, never half
 * a UTF-8 character) and whether a stop string was completed. */
typedef struct toy_stop toy_stop;
TOY_API toy_status toy_stop_new(const char *const *stops, size_t n_stops, toy_stop **out);
TOY_API void toy_stop_free(toy_stop *stop);
/* Appends `piece`; emit and emit_len give the bytes that may be printed now (valid until
 * the next call). Returns true once a stop string has appeared (the text before it
 * is emitted, the stop string itself is not). */
TOY_API bool toy_stop_feed(toy_stop *stop, const char *piece, size_t len, const char **emit,
                           size_t *emit_len);
/* At the end of generation: whatever is held back (a partial UTF-8 character is dropped
 * only if it can never complete). */
TOY_API void toy_stop_flush(toy_stop *stop, const char **emit, size_t *emit_len);

/* ---------------------------------------------------------------- generation
 * The loop of `toy run` and `toy chat`: a prompt evaluated after what sequence 0 of the
 * context already holds, then one token after another sampled, shown and fed back until
 * an end-of-generation token, max_tokens, a stop string, a full context or the caller
 * says stop. */

typedef enum {
    TOY_FINISH_EOG = 1, /* the model ended its text (an end-of-generation token) */
    TOY_FINISH_LENGTH,  /* max_tokens were generated */
    TOY_FINISH_STOP,    /* a stop string appeared (it is not shown) */
    TOY_FINISH_CONTEXT, /* the context is full and context_shift is off */
    TOY_FINISH_CALLER,  /* on_text returned false */
} toy_finish_reason;

/* Called after each generated token with its id and the text now safe to show: possibly
 * empty, since text that may begin a stop string or ends in half a UTF-8 character is
 * held back. At the end, once more with token -1 for whatever was held back, if any.
 * Returning false stops the generation (TOY_FINISH_CALLER). */
typedef bool (*toy_text_fn)(void *user, int32_t token, const char *text, size_t len);

typedef struct {
    size_t size;            /* sizeof (toy_generate_params), as its _default_params sets it */
    int32_t max_tokens;     /* tokens to generate at most (-1, the default: no limit) */
    const char *const *stops; /* stop strings (n_stops of them) */
    size_t n_stops;
    /* When the context is full: false (default) ends the generation; true drops the
     * older half of the tokens after the first n_keep and goes on, as llama.cpp does. */
    bool context_shift;
    int32_t n_keep;
    toy_text_fn on_text;    /* may be NULL */
    void *user;
    /* true (default): the last token is fed back into the cache when max_tokens ends the
     * generation; false saves that forward pass where nothing follows (toy run) */
    bool feed_last;
} toy_generate_params;

TOY_API void toy_generate_params_init(toy_generate_params *params, size_t size);
static inline toy_generate_params toy_generate_default_params(void) {
    toy_generate_params p;
    toy_generate_params_init(&p, sizeof p);
    return p;
}

typedef struct {
    size_t size;            /* set by the caller: sizeof (toy_generate_result) */
    toy_finish_reason finish;
    int32_t n_prompt;       /* prompt tokens evaluated */
    int32_t n_generated;    /* tokens generated (an end-of-generation token not counted) */
    int32_t n_discarded;    /* tokens dropped from the cache by context shifts */
    double prompt_seconds, gen_seconds;
} toy_generate_result;

/* Generates on sequence 0 of ctx: the prompt goes after the tokens the sequence holds
 * (none after toy_kv_seq_rm(ctx, 0, 0, -1)) and into the sampler's history; the sampler
 * picks every token. The cache then holds the prompt and the generated tokens, all of
 * them when max_tokens ended the generation (unless feed_last is false), all but the
 * last when a stop string, the full context or the callback did (an end-of-generation
 * token is never fed back).
 * When the sampler's grammar allows no token, TOY_ERR_INVALID with the sampler's
 * message ("generated token 5: ..."). result may be NULL. */
TOY_API toy_status toy_generate(toy_context *ctx, toy_sampler *sampler, const int32_t *prompt,
                                int32_t n_prompt, const toy_generate_params *params,
                                toy_generate_result *result);

/* ---------------------------------------------------------------- chat templates */

typedef struct {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} toy_chat_message;

/* The template family of a Jinja chat template (tokenizer.chat_template) or of a name
 * ("chatml", "llama2", "llama3", "gemma", "phi3", "mistral", "zephyr", ...). NULL if
 * unrecognised. */
TOY_API const char *toy_chat_template_detect(const char *template_or_name);
/* The family of a file's tokenizer.chat_template in *family: TOY_ERR_NOT_FOUND when
 * the file has none and TOY_ERR_UNSUPPORTED when toy does not recognise it, with
 * *family = "chatml", the fallback, in both cases. */
TOY_API toy_status toy_chat_template_of(const toy_gguf *gguf, const char **family);
/* Formats the conversation with a family's template; with add_assistant the prompt
 * ends where the assistant's reply begins. *out is malloc'd, NUL-terminated. Special
 * tokens appear as text, to be tokenized with parse_special. */
TOY_API toy_status toy_chat_apply(const char *family, const toy_chat_message *messages,
                                  size_t n_messages, bool add_assistant, char **out);

/* A model's own chat template, run as transformers' apply_chat_template runs it: the
 * Jinja text of tokenizer.chat_template with python3-jinja2's semantics (docs/
 * chat-templates.md). Parsed once; rendering only reads it (any threads at once). */
typedef struct toy_chat_template toy_chat_template;

/* From Jinja text, with the bos and eos text the template may read (NULL: ""). A
 * syntax error is TOY_ERR_INVALID naming its LINE:COLUMN. */
TOY_API toy_status toy_chat_template_new(const char *text, const char *bos_token, const char *eos_token,
                                         toy_chat_template **out);
/* A model's: tokenizer.chat_template, or with name its variant tokenizer.chat_template.NAME
 * (e.g. "tool_use"), with the vocabulary's bos and eos text. TOY_ERR_NOT_FOUND when the
 * file has none. */
TOY_API toy_status toy_model_chat_template(const toy_model *model, const char *name, toy_chat_template **out);
/* The prompt of a conversation. messages_json: OpenAI's messages (a JSON array; an
 * assistant's tool call arguments may be a JSON string, given to the template as an
 * object); tools_json: a JSON array of tools, or NULL; kwargs_json: a JSON object of
 * further variables (chat_template_kwargs, e.g. {"enable_thinking": false}), or NULL.
 * *prompt is malloc'd; its special tokens are text, to be tokenized with parse_special,
 * and without add_special where it begins with the template's BOS text (the template
 * wrote it). A template's raise_exception is TOY_ERR_INVALID "the chat template refused
 * the conversation: MESSAGE"; a limit of the sandbox (time, steps, memory, output,
 * depth) TOY_ERR_INVALID naming it. */
TOY_API toy_status toy_chat_template_render(const toy_chat_template *t, const char *messages_json,
                                            const char *tools_json, const char *kwargs_json,
                                            bool add_generation_prompt, char **prompt);
/* The prompt a chat answers (toy chat, toy serve, Python's Model.chat): the rendering with
 * the generation prompt, where the conversation's tools, calls and results are written
 * in toy's generic form (docs/chat-templates.md) when the template writes no tools of its
 * own, and text parts are joined where it takes only strings. With a template that
 * writes tools, and without tools, it is toy_chat_template_render's prompt. */
TOY_API toy_status toy_chat_template_prompt(const toy_chat_template *t, const char *messages_json,
                                            const char *tools_json, const char *kwargs_json,
                                            bool parallel_tool_calls, char **prompt);
/* A built-in family (toy_chat_template_detect's names: "chatml", "llama3", ...), as
 * toy_chat_apply writes it; it takes each message's role and text (a family's tools are
 * toy serve's, docs/server.md) and no kwargs. TOY_ERR_INVALID for an unknown name. */
TOY_API toy_status toy_chat_template_builtin(const char *name, toy_chat_template **out);
/* The family of a built-in template, NULL for a Jinja one. */
TOY_API const char *toy_chat_template_family(const toy_chat_template *t);
/* Whether the template reads the variable (e.g. "tools", "enable_thinking"); false for
 * a family. */
TOY_API bool toy_chat_template_reads(const toy_chat_template *t, const char *variable);
/* The BOS text it was given. */
TOY_API const char *toy_chat_template_bos(const toy_chat_template *t);
/* A reply read as the template's model writes (docs/chat-templates.md): OpenAI's
 * assistant message as JSON, {"role": "assistant", "content", "reasoning_content",
 * "tool_calls"} (absent where there are none; content null beside calls). prompt: the
 * prompt the reply answers (when it opened the model's thinking, the reply starts
 * inside it); tools_json: the tools it was given (a JSON array; calls of others stay
 * content), or NULL for none; reasoning false keeps the thinking in the content. */
TOY_API toy_status toy_chat_template_parse(const toy_chat_template *t, const char *prompt, const char *reply,
                                           const char *tools_json, bool reasoning, char **message_json);
/* The same for a reply still being written: only what no later text can change (a
 * marker's first characters, trailing white space and a call not yet closed are held
 * back), so the texts of successive calls on a growing reply extend each other and end
 * in toy_chat_template_parse's, and its calls are a prefix of the final ones. */
TOY_API toy_status toy_chat_template_parse_partial(const toy_chat_template *t, const char *prompt,
                                                   const char *reply, const char *tools_json, bool reasoning,
                                                   char **message_json);
/* A GBNF grammar (for toy_grammar_new) that forces the reply to prompt to call the
 * tools in the model's syntax: one call, or up to 8 with parallel, of the function named
 * `function` (NULL: any of them), its arguments matching its parameters' schema. A
 * schema the grammar cannot express is TOY_ERR_INVALID naming the tool. */
TOY_API toy_status toy_chat_template_tool_grammar(const toy_chat_template *t, const char *prompt,
                                                  const char *tools_json, const char *function, bool parallel,
                                                  char **gbnf);
TOY_API void toy_chat_template_free(toy_chat_template *t);

/* ---------------------------------------------------------------- quantization */

/* llama.cpp's llama_ftype numbering, stored as general.file_type. */
typedef enum {
    TOY_FTYPE_ALL_F32 = 0,
    TOY_FTYPE_MOSTLY_F16 = 1,
    TOY_FTYPE_MOSTLY_Q4_0 = 2,
    TOY_FTYPE_MOSTLY_Q4_1 = 3,
    TOY_FTYPE_MOSTLY_Q8_0 = 7,
    TOY_FTYPE_MOSTLY_Q5_0 = 8,
    TOY_FTYPE_MOSTLY_Q5_1 = 9,
    TOY_FTYPE_MOSTLY_Q2_K = 10,
    TOY_FTYPE_MOSTLY_Q3_K_S = 11,
    TOY_FTYPE_MOSTLY_Q3_K_M = 12,
    TOY_FTYPE_MOSTLY_Q3_K_L = 13,
    TOY_FTYPE_MOSTLY_Q4_K_S = 14,
    TOY_FTYPE_MOSTLY_Q4_K_M = 15,
    TOY_FTYPE_MOSTLY_Q5_K_S = 16,
    TOY_FTYPE_MOSTLY_Q5_K_M = 17,
    TOY_FTYPE_MOSTLY_Q6_K = 18,
    TOY_FTYPE_MOSTLY_IQ4_NL = 25,
    TOY_FTYPE_MOSTLY_BF16 = 32,
    TOY_FTYPE_NONE = -1, /* no file type: a name toy_ftype_from_name does not know */
} toy_ftype;

/* Parses "Q4_K_M", "q8_0", "F16", ...; TOY_FTYPE_NONE if unknown. */
TOY_API toy_ftype toy_ftype_from_name(const char *name);
TOY_API const char *toy_ftype_name(toy_ftype ftype);

/* Called once per tensor after it is written (toy_quantize_file, toy_init): its index
 * and name, its type before and after, and its bytes before and after. */
typedef void (*toy_tensor_progress_fn)(void *user, int64_t index, int64_t count, const char *name,
                                       toy_type type_in, toy_type type_out, size_t bytes_in,
                                       size_t bytes_out);

typedef struct {
    size_t size; /* sizeof (toy_quantize_params), as toy_quantize_default_params sets it */
    int n_threads;
    /* Every quantizable tensor gets the mix's base type: no per-tensor choices
     * (llama-quantize --pure). */
    bool pure;
    toy_tensor_progress_fn progress; /* may be NULL */
    void *progress_user;
    bool no_mmap; /* read the input file into memory instead of mapping it */
} toy_quantize_params;

/* Defaults: 1 thread, llama.cpp's mixes, no progress. */
TOY_API void toy_quantize_params_init(toy_quantize_params *params, size_t size);
static inline toy_quantize_params toy_quantize_default_params(void) {
    toy_quantize_params p;
    toy_quantize_params_init(&p, sizeof p);
    return p;
}

TOY_API toy_status toy_quantize_file(const char *in_path, const char *out_path, toy_ftype ftype,
                                     const toy_quantize_params *params);

/* ---------------------------------------------------------------- random models
 * Models of real shapes with random weights and a real tokenizer, for measuring speed
 * without downloads and as the start of training from scratch. */

typedef struct {
    size_t size;            /* sizeof (toy_init_params), as toy_init_default_params sets it */
    const char *arch;       /* "llama" or "qwen2"; must match the preset's */
    const char *preset;     /* toy_init_preset_name(i), or NULL: every dimension below given */
    /* dimensions replacing the preset's (0: the preset's) */
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    int tied;               /* 1: output tied to the embedding, -1: untied, 0: the preset's
                               (without a preset: tied) */
    const char *name;       /* general.name (NULL: the preset's, or "custom") */
    const char *vocab_path; /* a GGUF whose tokenizer.* metadata is copied */
    toy_ftype ftype;        /* F32, F16, Q8_0, Q4_K_M, ... */
    uint64_t seed;
    int n_threads;
    toy_tensor_progress_fn progress; /* may be NULL */
    void *progress_user;
} toy_init_params;

/* Defaults: every field 0 or NULL, but ftype F32 and seed 42. */
TOY_API void toy_init_params_init(toy_init_params *params, size_t size);
static inline toy_init_params toy_init_default_params(void) {
    toy_init_params p;
    toy_init_params_init(&p, sizeof p);
    return p;
}

/* Preset i's name and architecture; NULL past the last. */
TOY_API const char *toy_init_preset_name(int i);
TOY_API const char *toy_init_preset_arch(int i);
TOY_API toy_status toy_init_model(const toy_init_params *params, const char *out_path);
/* The same model made in memory, with no file: params as for toy_init_model (arch,
 * preset or dimensions, the tokenizer of vocab_path, ftype, seed); vocab_path NULL
 * gives it a byte-level tokenizer of 259 tokens (the 256 bytes, then <|endoftext|>,
 * <|im_start|> and <|im_end|>: toy tokenizer train's before any merge). toy_model_save
 * writes it (or any model) to a file. */
TOY_API toy_status toy_model_new(const toy_init_params *params, toy_model **out);
/* Writes the model's GGUF as it is in memory (metadata and tensors), atomically. */
TOY_API toy_status toy_model_save(const toy_model *model, const char *path);

/* ------------- tokenizer training
 * Learns a byte-level BPE tokenizer from plain text and writes it as a GGUF holding
 * only tokenizer metadata (as llama.cpp's vocabulary files), which toy and llama.cpp
 * tokenize with alike. Tokens: ids 0..255 the single bytes, then one token per merge,
 * then the special tokens (CONTROL): "<|endoftext|>" (BOS and EOS), "<|im_start|>",
 * "<|im_end|>" and the caller's; a ChatML chat template. The text is pre-tokenized as
 * the tokenizer will be (special-token text is cut out, never learned), and the most
 * frequent adjacent pair is merged, again and again; a tie goes to the pair whose left
 * token's bytes, then right token's bytes, come first in byte order. A pair whose bytes
 * are already a token, or spell a special token's text in GPT-2's byte characters, is
 * not merged (every token text has one id). The same data and parameters give the same
 * file, byte for byte, whatever n_threads; memory follows the distinct pre-tokens. */

typedef struct {
    size_t size;          /* set by the caller: sizeof (toy_tokenizer_train_stats) */
    uint64_t n_bytes;     /* bytes of text read */
    uint64_t n_pretokens; /* pre-tokens counted (special-token text left out) */
    uint64_t n_distinct;  /* distinct pre-tokens */
    int32_t n_merges;     /* merges learned */
    int32_t n_tokens;     /* tokens written: 256 + n_merges + specials */
} toy_tokenizer_train_stats;

typedef struct {
    size_t size; /* sizeof (toy_tokenizer_train_params), as its _default_params sets it */
    const char *const *data_paths; /* plain-text files, in order */
    size_t n_data;
    /* every token: 256 bytes + merges + special tokens. Fewer are written when the text
     * runs out of pairs to merge (stats->n_tokens says how many). */
    int32_t vocab_size;
    /* tokenizer.ggml.pre (NULL: "qwen2"). Names under which llama.cpp looks a whole
     * pre-token up before merging (llama-bpe, llama3, tekken, ...) are refused: that is
     * not the merging learned here ("smaug-bpe" splits as "llama-bpe" without it). */
    const char *pre;
    const char *const *special; /* special tokens after the default three */
    size_t n_special;
    const char *name;           /* general.name (NULL: "toy-bpe") */
    int n_threads;              /* pre-tokenizing and counting (<= 0: 1) */
    toy_tokenizer_train_stats *stats; /* filled in on success, if not NULL */
} toy_tokenizer_train_params;

/* Defaults: every field 0 or NULL (vocab_size must then be given). */
TOY_API void toy_tokenizer_train_params_init(toy_tokenizer_train_params *params, size_t size);
static inline toy_tokenizer_train_params toy_tokenizer_train_default_params(void) {
    toy_tokenizer_train_params p;
    toy_tokenizer_train_params_init(&p, sizeof p);
    return p;
}

TOY_API toy_status toy_tokenizer_train(const toy_tokenizer_train_params *p, const char *out_path);

/* ---------------------------------------------------------------- training */

typedef struct {
    size_t size;            /* sizeof (toy_grad_params), as toy_grad_default_params sets it */
    const toy_model *model; /* the model (toy_model_load_with: mapped or read into memory), */
    const char *model_path; /* or, with model NULL, the file to load for this call */
    /* A LoRA adapter on the model (NULL: none): the gradients of the adapter's tensors
     * only (W.lora_a, W.lora_b, as in the adapter file), the model frozen in its own type.
     * One rank for all pairs, on q, k, v, o, gate, up, down. */
    const char *lora_path;
    int n_threads;          /* 1 by default; the result is the same bits for any number */
} toy_grad_params;

/* Defaults: no model, no adapter, 1 thread. */
TOY_API void toy_grad_params_init(toy_grad_params *params, size_t size);
static inline toy_grad_params toy_grad_default_params(void) {
    toy_grad_params p;
    toy_grad_params_init(&p, sizeof p);
    return p;
}

/* The next-token loss of one causal sequence (positions 0..n-1; the mean over the n - 1
 * predicted tokens) and its gradient with respect to every tensor of the model (or of
 * the adapter), written to out_path as a GGUF of F32 tensors with the model's names and
 * shapes and the loss as the float key toy.loss. Quantized and half-precision weights
 * are differentiated as their dequantized values, GELU as the smooth tanh-GELU. Dense
 * architectures only (MoE is an error naming the architecture). *loss may be NULL. */
TOY_API toy_status toy_grad(const toy_grad_params *params, const int32_t *tokens, int32_t n_tokens,
                            const char *out_path, double *loss);

/* Where a run stands, after each optimizer step. */
typedef struct {
    int64_t step, n_steps; /* steps done, steps in all */
    int64_t epoch;         /* 0-based */
    double loss;           /* this step's mean loss over its scored tokens */
    double lr, grad_norm;  /* the step's learning rate; the gradient norm before clipping */
    double tokens_per_s;   /* scored tokens per second over this step */
    double elapsed_s, eta_s;
    bool has_eval;         /* this step ran an evaluation: */
    double eval_loss, eval_ppl;
    bool saved;            /* a checkpoint was written after this step */
} toy_train_progress;

typedef struct {
    size_t size; /* sizeof (toy_train_params), as toy_train_default_params sets it */
    /* The model: a base to fine-tune (model_path), or a new one (model_path NULL) from
     * `*init` (arch, preset and/or dimensions, vocab_path for the tokenizer, seed). */
    const char *model_path;
    const toy_init_params *init;
    /* Data: plain text files, or .jsonl chat records (loss on the assistant's tokens). */
    const char *const *data;
    int n_data;
    const char *const *eval_data; /* validation loss and perplexity, n_eval_data may be 0 */
    int n_eval_data;
    int64_t eval_every;    /* steps between evaluations (0: only at the end) */
    /* Batches: grad_accum micro-batches of `batch` sequences of `seq` tokens per step. */
    int32_t batch, seq, grad_accum;
    int64_t steps;         /* optimizer steps (0: `epochs` passes over the data) */
    int32_t epochs;
    /* AdamW and the schedule (linear warmup, cosine decay to min_lr) */
    float lr, min_lr;
    int64_t warmup;
    float weight_decay, beta1, beta2, eps;
    float clip;            /* the global gradient norm is clipped to this (0: off) */
    uint64_t seed;         /* the order of the data (and a new model's weights) */
    int n_threads;
    /* Output: the model (also OUT.optim.gguf, the state to resume from, OUT.csv, the loss
     * log, and OUT.svg, the loss curve), in out_ftype (TOY_FTYPE_NONE: the base's type;
     * F32 for a new model), every save_every steps (0: at the end only) and when *stop
     * becomes nonzero. */
    const char *out_path;
    toy_ftype out_ftype;
    int64_t save_every;
    bool resume;           /* continue from OUT.optim.gguf (and OUT) */
    /* LoRA (lora_rank > 0): the base (model_path) stays as it is, memory-mapped in its own
     * type; OUT is an adapter in llama.cpp's format on the products named by lora_targets
     * (bits 1 << i for q, k, v, o, gate, up, down), scaled by lora_alpha / lora_rank
     * (lora_alpha 0: the rank), its input dropped with probability lora_dropout. */
    int32_t lora_rank;
    float lora_alpha;
    uint32_t lora_targets;
    float lora_dropout;
    /* Mixed precision: TOY_TYPE_BF16 or TOY_TYPE_F16 round both operands of every
     * training product to that type (F32 accumulation, F32 master weights and moments);
     * 0 or TOY_TYPE_F32: F32 throughout. */
    toy_type compute_type;
    /* Under `mpirun -np N` (a build with MPI) the N processes split each step's
     * grad_accum micro-batches (a multiple of N) and sum their gradients in rank order;
     * rank 0 writes the checkpoints and reports progress. */
    void (*progress)(void *user, const toy_train_progress *p);
    void *progress_user;
    /* A flag to stop at: when *stop becomes nonzero (a SIGINT handler may set it: a
     * volatile sig_atomic_t is a volatile int on every platform toy builds on), the run
     * writes a checkpoint and returns. NULL: none. */
    const volatile int *stop;
    bool no_mmap; /* read the base model into memory instead of mapping it */
    /* toy's design's LoRA-Q: one rank-lora_rank pair per query head (lora_targets q only),
     * written in the design's per-head format with the AdamW moments beside each tensor. */
    bool lora_per_head;
    float lora_init_scale; /* the standard deviation of A's start (0: 1 / lora_rank) */
    /* An adapter to train further (llama.cpp's format or the design's): its values, and
     * the design's moments where it has them, in place of a fresh start. Its rank,
     * targets, per-head form and alpha are the run's (lora_rank 0, or the same). */
    const char *lora_from;
} toy_train_params;

typedef struct {
    size_t size;            /* set by the caller: sizeof (toy_train_result) */
    int64_t steps;          /* steps done in all (a resumed run counts the earlier ones) */
    int64_t n_params;       /* trainable parameters */
    int64_t n_train_tokens, n_eval_tokens; /* scored tokens of the data */
    double loss;            /* the last step's loss */
    double eval_loss;       /* the last evaluation's (NAN: none) */
    bool stopped;           /* *stop ended the run early (after a checkpoint) */
    int rank, n_procs;      /* under mpirun: this process, and how many share the steps */
} toy_train_result;

/* Whether this build trains under mpirun (it found the MPI development package). */
TOY_API bool toy_have_mpi(void);
/* Under mpirun, after an error one process cannot recover from: ends every process of
 * the run with exit code `code` (the others would wait for it forever). Alone: nothing. */
TOY_API void toy_mpi_abort(int code);

/* Defaults: batch 8, seq 256, grad_accum 1, 1 epoch, lr 1e-3 to 1e-4, warmup 100, weight
 * decay 0.1, betas 0.9 / 0.95, eps 1e-8, clip 1.0, seed 42, out_ftype TOY_FTYPE_NONE. */
TOY_API void toy_train_params_init(toy_train_params *params, size_t size);
static inline toy_train_params toy_train_default_params(void) {
    toy_train_params p;
    toy_train_params_init(&p, sizeof p);
    return p;
}
/* Trains as the parameters say. Same data, seed and options give the same losses bit
 * for bit, whatever n_threads, and a resumed run the losses of an uninterrupted one. */
TOY_API toy_status toy_train(const toy_train_params *params, toy_train_result *result);

typedef struct {
    size_t size;           /* set by the caller: sizeof (toy_train_bench_result) */
    double tokens_per_s;   /* median over the steps measured */
    double step_s;         /* median seconds per step */
    double utilisation;    /* 6 * n_params * tokens_per_s / (peak_gflops * 1e9) */
    double peak_gflops;    /* this machine's F32 FMA peak with n_threads, measured */
    double peak_rss_mb;
    int64_t n_params, tokens_per_step;
    int threads;
    double loss;           /* the mean loss of the last step measured (random tokens) */
} toy_train_bench_result;

/* Full training steps (forward, backward, AdamW) of the model on random tokens: batch x
 * seq tokens per step, `steps` measured after one warm-up step. */
TOY_API toy_status toy_train_bench(const char *model_path, int32_t batch, int32_t seq, int steps,
                                   int n_threads, toy_train_bench_result *result);
/* The same with the products' operand type of toy_train_params.compute_type (TOY_TYPE_F32,
 * BF16 or F16; toy_kernel_bf16_dot says how BF16 runs). */
TOY_API toy_status toy_train_bench_compute(const char *model_path, int32_t batch, int32_t seq, int steps,
                                           int n_threads, toy_type compute_type, toy_train_bench_result *result);
/* ------------- training step by step
 * A model trained one step at a time over batches in the caller's memory (toy's design's
 * training block): every step's loss, the gradient of every tensor and the activations
 * the caller asked to keep are readable after it, the weights readable and writable. */

typedef struct toy_trainer toy_trainer;

typedef struct {
    size_t size;             /* sizeof (toy_trainer_params), as its _default_params sets it */
    int32_t batch, seq;      /* the largest step: batch sequences of seq + 1 tokens */
    float lr;                /* AdamW's rate (toy_trainer_set_lr changes it between steps) */
    float weight_decay, beta1, beta2, eps;
    float clip;              /* the global gradient norm is clipped to this (0: off) */
    toy_type compute_type;   /* as toy_train_params.compute_type */
    /* LoRA (lora_rank > 0): adapters on the frozen model, as toy_train_params has them */
    int32_t lora_rank;
    float lora_alpha;
    uint32_t lora_targets;
    bool lora_per_head;
    float lora_init_scale;
    uint64_t seed;           /* LoRA's A */
    /* the activations to keep from each step's forward: comma-separated globs of tap
     * names "L<layer>.<tap>", tap attn_norm, attn_out, ffn_norm, ffn_out or out (the
     * residual stream after the layer), as toy_trace_fn names them ("L*.out"); NULL: none */
    const char *taps;
    int n_threads;           /* 1 by default; the bits are the same for any number */
} toy_trainer_params;

/* Defaults: batch 8, seq 256, lr 1e-3, weight decay 0.1, betas 0.9 / 0.95, eps 1e-8,
 * clip 1.0, LoRA off (targets all seven when a rank is given), seed 42, no taps, 1 thread. */
TOY_API void toy_trainer_params_init(toy_trainer_params *params, size_t size);
static inline toy_trainer_params toy_trainer_default_params(void) {
    toy_trainer_params p;
    toy_trainer_params_init(&p, sizeof p);
    return p;
}
/* A trainer of a copy of the model's weights (F32; LoRA: the adapters, the model frozen
 * in its own type and needed while the trainer lives). Dense architectures only. */
TOY_API toy_status toy_trainer_new(const toy_model *model, const toy_trainer_params *params, toy_trainer **out);
TOY_API void toy_trainer_free(toy_trainer *trainer);
/* One step over n_seq sequences of n_tokens tokens, tokens[s * n_tokens + i]: each
 * position predicts the next, the loss is the mean over the n_seq (n_tokens - 1)
 * predictions. With update, AdamW then changes the weights (the gradients are those
 * before clipping); without, only the loss and the gradients. Same inputs, same bits,
 * whatever n_threads. */
TOY_API toy_status toy_trainer_step(toy_trainer *trainer, const int32_t *tokens, int32_t n_seq, int32_t n_tokens,
                                    bool update, double *loss);
TOY_API void toy_trainer_set_lr(toy_trainer *trainer, float lr);
TOY_API int64_t toy_trainer_n_steps(const toy_trainer *trainer); /* updates made */
/* The trained tensors, by index (0 .. n - 1) or name (the model's, or the adapter's). */
TOY_API int toy_trainer_n_tensors(const toy_trainer *trainer);
TOY_API const char *toy_trainer_tensor_name(const toy_trainer *trainer, int i);
/* Tensor `name`'s values (F32, writable: set them to load weights from memory) or the
 * gradient of the last step; ne receives its shape (GGUF order, unused dimensions 1).
 * NULL, with an error naming it, for a tensor the trainer does not have. */
TOY_API float *toy_trainer_param(toy_trainer *trainer, const char *name, int64_t ne[4]);
TOY_API const float *toy_trainer_grad(const toy_trainer *trainer, const char *name, int64_t ne[4]);
/* A kept tap of the last step ("L3.out"): n_seq * (n_tokens - 1) rows of n_embd,
 * sequence after sequence. NULL for a tap not kept, or before any step. */
TOY_API const float *toy_trainer_tap(const toy_trainer *trainer, const char *name, int64_t *rows, int64_t *cols);
/* Writes the trained model in ftype (the model's metadata and tokenizer), or for LoRA
 * the adapter (ftype ignored), atomically. */
TOY_API toy_status toy_trainer_save(toy_trainer *trainer, const char *path, toy_ftype ftype);

/* The F32 fused multiply-add peak of this CPU with n_threads threads, in GFLOP/s. */
TOY_API double toy_cpu_peak_gflops(int n_threads);

/* The memory's read bandwidth, as decode meets it: a probe of 512 MiB of random data
 * (far larger than the caches; random, as some machines compress or share pages of
 * simple patterns), read by n_threads threads. toy_bandwidth_probe_measure returns bytes
 * per second now: the median of three passes, each the faster of one stream and four
 * per thread (the two ways decode reads rows); a machine's bandwidth drifts with its
 * neighbours, so toy bench measures it around every run with one probe. */
typedef struct toy_bandwidth_probe toy_bandwidth_probe;
TOY_API toy_status toy_bandwidth_probe_new(toy_bandwidth_probe **out);
TOY_API double toy_bandwidth_probe_measure(toy_bandwidth_probe *probe, int n_threads);
TOY_API void toy_bandwidth_probe_free(toy_bandwidth_probe *probe);

/* ---------------------------------------------------------------- model comparison */

/* Linear CKA of two sets of n activations (rows of x [n x dx] and y [n x dy]):
 * ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F), Xc, Yc the column-centred matrices,
 * computed through the n x n Gram matrices (accumulated in double). 0 when either set
 * is constant. */
TOY_API double toy_linear_cka(const float *x, int64_t n, int64_t dx, const float *y, int64_t dy);

/* The linear CKA of every layer pair of two models on one token stream: the residual
 * stream after each block of A (n_layer_a taps) against each block of B, in windows of
 * at most `window` tokens (0: 512, at most each model's training context) from position
 * 0. The models must share the tokenizer (an error says where they differ). *cka is
 * malloc'd [n_layer_a][n_layer_b]. */
TOY_API toy_status toy_cka_models(toy_model *a, toy_model *b, const int32_t *tokens, int32_t n_tokens,
                                  int32_t window, int n_threads, double **cka, int *n_layer_a, int *n_layer_b);
/* The same for any per-layer tap of toy_trace_fn ("attn_norm", "ffn_out", "q", ...; "resid"
 * is "out", the residual stream; NULL: "out"): every layer of each model must have it,
 * with rows of one width (the two models' widths may differ). */
TOY_API toy_status toy_cka_models_tap(toy_model *a, toy_model *b, const char *tap, const int32_t *tokens,
                                      int32_t n_tokens, int32_t window, int n_threads, double **cka, int *n_layer_a,
                                      int *n_layer_b);

#ifdef __cplusplus
}
#endif
#endif
