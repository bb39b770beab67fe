/* test_huge_pages.c — the thread that makes the packed weights' pages huge (model.c,
 * "huge pages") waits while a forward pass runs, goes on once none does, and stops when
 * the model is freed, even while it waits.
 *
 * The model: one llama layer made in memory with n_embd 1024 and n_ff 2048 in Q8_0, so
 * that its FFN matrices pack to 2.2 MB each, a whole 2 MiB page at least. The checks wait
 * for the collapser's own flags (collapse_waiting, collapse_done), never for a time. */
#include <sched.h>

#include "cpu.h"
#include "model.h"
#include "test.h"
#include "toy.h"

/* Polls *flag until it reads `want`; false after a minute (a hang guard, not a timing). */
static bool wait_flag(const int *flag, int want) {
    const time_t deadline = time(NULL) + 60;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != want)
        if (time(NULL) > deadline) return false;
        else sched_yield();
    return true;
}

static toy_model *new_model(void) {
    toy_init_params p = toy_init_default_params();
    p.arch = "llama";
    p.n_embd = 1024, p.n_layer = 1, p.n_head = 8, p.n_head_kv = 8, p.n_ff = 2048, p.n_ctx = 64;
    p.ftype = TOY_FTYPE_MOSTLY_Q8_0;
    p.n_threads = 2;
    toy_model *m = NULL;
    CHECK_MSG(toy_model_new(&p, &m) == TOY_OK, "%s", toy_last_error());
    return m;
}

static int total_pages(const toy_model *m) {
    int pages = 0;
    for (int i = 0; i < m->n_regions; i++) pages += (int)(m->regions[i].bytes >> 21);
    return pages;
}

int main(void) {
    if (!ty_packed_get(TOY_TYPE_Q8_0)) {
        printf("test_huge_pages: skipped: no packed Q8_0 products on this CPU (TOY_ISA)\n");
        return TEST_SKIP_CODE;
    }

    /* a forward pass holds the collapser; its end lets every page through */
    toy_model *m = new_model();
    if (!m) return test_finish("test_huge_pages");
    ty_model_forward_begin(m);
    CHECK_MSG(toy_model_pack(m, 2) == TOY_OK, "%s", toy_last_error());
    CHECK_MSG(total_pages(m) >= 2, "%d huge pages of packed weights", total_pages(m));
    CHECK_MSG(m->collapser_started, "the collapser did not start");
    CHECK_MSG(wait_flag(&m->collapse_waiting, 1), "the collapser never waited for the forward pass");
    CHECK_EQ(__atomic_load_n(&m->collapse_pages, __ATOMIC_ACQUIRE), 0);
    ty_model_forward_end(m);
    CHECK_MSG(wait_flag(&m->collapse_done, 1), "the collapser did not go on after the forward pass ended");
    /* where the kernel lacks MADV_COLLAPSE it marks the pages once and counts none */
    const int pages = __atomic_load_n(&m->collapse_pages, __ATOMIC_ACQUIRE);
    CHECK_MSG(pages == total_pages(m) || pages == 0, "%d of %d pages", pages, total_pages(m));
    toy_model_free(m);

    /* freeing the model stops a collapser that waits */
    m = new_model();
    if (!m) return test_finish("test_huge_pages");
    ty_model_forward_begin(m);
    CHECK_MSG(toy_model_pack(m, 2) == TOY_OK, "%s", toy_last_error());
    CHECK_MSG(wait_flag(&m->collapse_waiting, 1), "the collapser never waited for the forward pass");
    toy_model_free(m); /* returns: the join above would hang otherwise */
    return test_finish("test_huge_pages");
}
