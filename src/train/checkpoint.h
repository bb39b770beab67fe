/* checkpoint.h — what training writes: the model as a standard GGUF (the source's
 * metadata and tokenizer, llama.cpp's tensor names), and beside it the state that
 * resumes the run exactly: AdamW's moments, the F32 master weights when the model file
 * holds a narrower type, the step, the position in the data and the loss history. */
#ifndef TOY_TRAIN_CHECKPOINT_H
#define TOY_TRAIN_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "train_model.h"

typedef struct {
    int64_t step;       /* optimizer steps done */
    int64_t epoch;      /* the epoch the next window comes from */
    int64_t position;   /* windows of that epoch consumed */
    uint64_t seed;
    int32_t batch, seq, grad_accum;
    int64_t n_windows;  /* of the training data, to refuse other data on resume */
    int64_t tokens;     /* scored tokens trained on */
    int64_t adam_step0; /* steps AdamW's moments had taken before the run (a --lora-from adapter's) */
    double seconds;     /* training time so far */
} train_state;

/* Per step: loss, learning rate, gradient norm; per evaluation: step and loss. */
typedef struct {
    float *loss, *lr, *grad_norm;
    int64_t n, cap;
    int64_t *eval_step;
    float *eval_loss;
    int64_t n_eval, cap_eval;
} train_history;

toy_status ty_history_add(train_history *h, float loss, float lr, float grad_norm);
toy_status ty_history_add_eval(train_history *h, int64_t step, float loss);
void ty_history_free(train_history *h);

/* The model's tensors converted to ftype (a toy_ftype, with llama.cpp's per-tensor mix
 * rules) and the metadata of `source`, written atomically to path. */
toy_status ty_checkpoint_write_model(train_model *tm, const toy_gguf *source, int ftype, int n_threads,
                                  const char *path);

/* A LoRA run's adapters, atomically: in llama.cpp's adapter format, or (per-head pairs)
 * in toy's design's, with their AdamW moments m, v at step adam_step (lora.h). */
toy_status ty_checkpoint_write_adapter(train_model *tm, const toy_gguf *source, const float *m, const float *v,
                                       int64_t adam_step, const char *path);
/* The LoRA settings of the adapter at path (either format) on model m: rank, targets,
 * per-head, alpha (the rank when it has none: llama.cpp's scale 1). */
toy_status ty_checkpoint_adapter_params(const toy_model *m, const char *path, train_lora_params *lp);
/* The adapter's values in place of tm's fresh ones, tensor by name (a pair it lacks stays
 * fresh, or is zeroed with zero_missing); with m and v its moments too, where it has them,
 * and *adam_step the step they are at (0 without). */
toy_status ty_checkpoint_read_adapter(const char *path, train_model *tm, float *m, float *v, bool zero_missing,
                                      int64_t *adam_step);

/* The state file; with master the parameters themselves are kept too. */
toy_status ty_checkpoint_write_state(const char *path, train_model *tm, const float *m, const float *v,
                                  bool master, const train_state *s, const train_history *h);
/* Reads it back into m, v (and the parameters, if it holds them); an error names what
 * does not match the model. */
toy_status ty_checkpoint_read_state(const char *path, train_model *tm, float *m, float *v,
                                 train_state *s, train_history *h);

#endif
