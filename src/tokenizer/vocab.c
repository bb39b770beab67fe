/* vocab.c — the containers a vocabulary is made of: the string -> id hash map (token
 * texts, BPE merges) and the growing list of ids that a tokenizer appends to. */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

static uint32_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

toy_status ty_strmap_init(ty_strmap *m, uint32_t n_max) {
    uint32_t n_slots = 16;
    while (n_slots < 2ull * n_max) n_slots *= 2;
    m->entries = malloc((n_max ? n_max : 1) * sizeof *m->entries);
    m->slots = calloc(n_slots, sizeof *m->slots);
    m->n = 0;
    m->cap = n_max;
    m->mask = n_slots - 1;
    if (!m->entries || !m->slots) return ty_error(TOY_ERR_NOMEM, "vocabulary: out of memory");
    return TOY_OK;
}

void ty_strmap_free(ty_strmap *m) {
    free(m->entries);
    free(m->slots);
    memset(m, 0, sizeof *m);
}

bool ty_strmap_insert(ty_strmap *m, const char *key, uint32_t len, int32_t value) {
    uint32_t i = hash_bytes(key, len) & m->mask;
    for (; m->slots[i]; i = (i + 1) & m->mask) {
        const ty_strmap_entry *e = &m->entries[m->slots[i] - 1];
        if (e->len == len && !memcmp(e->key, key, len)) return false;
    }
    if (m->n == m->cap) return false; /* sized by the caller; cannot happen */
    m->entries[m->n] = (ty_strmap_entry){key, len, value};
    m->slots[i] = ++m->n;
    return true;
}

int32_t ty_strmap_find(const ty_strmap *m, const char *key, size_t len) {
    if (!m->slots) return -1;
    uint32_t i = hash_bytes(key, len) & m->mask;
    for (; m->slots[i]; i = (i + 1) & m->mask) {
        const ty_strmap_entry *e = &m->entries[m->slots[i] - 1];
        if (e->len == len && !memcmp(e->key, key, len)) return e->value;
    }
    return -1;
}

void ty_ids_push(ty_ids *ids, int32_t id) {
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? 2 * ids->cap : 64;
        int32_t *v = realloc(ids->v, cap * sizeof *v);
        if (!v) {
            ids->oom = true;
            return;
        }
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
}
