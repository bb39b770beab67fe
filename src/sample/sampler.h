/* sampler.h — the sampler's stages, open to the tests (the library's users see only the
 * toy_sampler_* functions of toy.h). */
#ifndef TOY_SAMPLER_H
#define TOY_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "toy.h"

/* A token still in the running: its logit after the stages so far and, once the chain
 * has run, its probability. */
typedef struct {
    int32_t id;
    float logit;
    double p;
} ty_sampler_candidate;

/* Writes n_vocab logits with NaN read as -inf and the repetition, frequency and presence
 * penalties of the accepted history applied — the first stage of the chain. */
void ty_sampler_apply_penalties(const toy_sampler *sampler, const float *logits,
                                float *out);

/* Runs every stage but the random pick: logit bias, penalties, grammar, top-k, top-p,
 * min-p, temperature, softmax. *out points at the survivors (valid until the next call
 * on this sampler), each with its final probability, best first when top-k ran and in
 * id order otherwise; the return value is how many there are (at least 1, or 0 with
 * toy_last_error set when the grammar allows no token). Greedy (temperature <= 0)
 * leaves the one argmax token with p = 1. */
size_t ty_sampler_candidates(toy_sampler *sampler, const float *logits,
                             const ty_sampler_candidate **out);

/* Whether the sampler has a grammar whose text is complete where it stands (so a
 * generation that finds no token to sample has ended rather than failed). */
bool ty_sampler_grammar_complete(const toy_sampler *sampler);

/* The random number generator (xoshiro256** seeded through splitmix64): a uniform double
 * in [0, 1) with 53 random bits. */
double ty_sampler_uniform(toy_sampler *sampler);

#endif
