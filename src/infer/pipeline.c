/* pipeline.c — see pipeline.h. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "mpi_world.h"

#ifdef TOY_HAVE_MPI
#include <mpi.h>
#endif

#define MAX_HANDLES 64

static struct {
    bool on; /* a pipeline of several processes */
    int rank, size;
    bool ended;  /* rank 0 sent PIPE_QUIT */
    int expected; /* a worker: the id of the model or context being made */
    void *handles[2][MAX_HANDLES];
} pipe = {.expected = -1};

bool ty_pipeline_on(void) { return pipe.on; }
int ty_pipeline_rank(void) { return pipe.rank; }
int ty_pipeline_size(void) { return pipe.size; }

toy_status ty_pipeline_split(const toy_gguf *g, int n_layer, bool tied, const int32_t *split, int n_split,
                             int32_t *first) {
    const int L = n_layer, n_stages = pipe.size;
    const char *path = toy_gguf_path(g);
    if (L < n_stages)
        return ty_error(TOY_ERR_INVALID, "%s: %d layers cannot be split into %d stages (mpirun -np %d)", path, L,
                        n_stages, n_stages);
    first[0] = 0;
    if (split) {
        if (n_split != n_stages)
            return ty_error(TOY_ERR_INVALID, "--split gives %d stages, and there are %d processes", n_split, n_stages);
        int64_t sum = 0;
        for (int s = 0; s < n_stages; s++) {
            if (split[s] < 1)
                return ty_error(TOY_ERR_INVALID, "--split: stage %d has %d layers, and each needs one at least", s,
                                split[s]);
            sum += split[s];
        }
        if (sum != L) return ty_error(TOY_ERR_INVALID, "--split gives %lld layers, %s has %d", (long long)sum, path, L);
        for (int s = 0; s < n_stages; s++) first[s + 1] = first[s] + split[s];
        return TOY_OK;
    }
    /* balanced by bytes: the split whose largest stage (the last holds the output matrix
     * too) is smallest, by dynamic programming over the layers */
    double *bytes = calloc((size_t)L + 1, sizeof *bytes), *best = malloc(sizeof(double) * (size_t)(L + 1) * n_stages);
    int *cut = malloc(sizeof(int) * (size_t)(L + 1) * n_stages);
    if (!bytes || !best || !cut) {
        free(bytes), free(best), free(cut);
        return ty_error(TOY_ERR_NOMEM, "no memory");
    }
    double output = 0;
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        int il, len = 0;
        if (sscanf(t->name, "blk.%d.%n", &il, &len) == 1 && len && il >= 0 && il < L) bytes[il + 1] += (double)t->size;
        else if (!strcmp(t->name, tied ? "token_embd.weight" : "output.weight")) output = (double)t->size;
    }
    for (int i = 1; i <= L; i++) bytes[i] += bytes[i - 1]; /* prefix sums */
    for (int s = 0; s < n_stages; s++) /* best[s][i]: layers 0..i-1 in stages 0..s */
        for (int i = s + 1; i <= L; i++) {
            const double tail = s == n_stages - 1 && i == L ? output : 0;
            double *b = &best[s * (L + 1) + i];
            *b = 1e300;
            for (int j = s; j < i; j++) {
                const double stage = bytes[i] - bytes[j] + tail, before = s ? best[(s - 1) * (L + 1) + j] : j ? 1e300 : 0;
                const double worst = stage > before ? stage : before;
                if (worst < *b) *b = worst, cut[s * (L + 1) + i] = j;
            }
        }
    first[n_stages] = L;
    for (int s = n_stages - 1; s > 0; s--) first[s] = cut[s * (L + 1) + first[s + 1]];
    free(bytes), free(best), free(cut);
    return TOY_OK;
}

int ty_pipeline_add(int kind, void *p) {
    int id = pipe.expected;
    if (pipe.rank == 0)
        for (id = 0; id < MAX_HANDLES && pipe.handles[kind][id]; id++) continue;
    if (id < 0 || id >= MAX_HANDLES) return -1;
    pipe.handles[kind][id] = p;
    return id;
}

void *ty_pipeline_get(int kind, int id) { return id >= 0 && id < MAX_HANDLES ? pipe.handles[kind][id] : NULL; }
void ty_pipeline_remove(int kind, int id) {
    if (id >= 0 && id < MAX_HANDLES) pipe.handles[kind][id] = NULL;
}
void ty_pipeline_expect(int id) { pipe.expected = id; }

/* a batch: per token its id, position, sequence (int32 each) and whether it wants logits */
enum { BATCH_ROW = 13 };

void ty_pipeline_send_batch(int id, const toy_batch *b) {
    const int64_t n = b->n_tokens;
    uint8_t *buf = malloc((size_t)n * BATCH_ROW);
    if (!buf) {
        ty_error(TOY_ERR_NOMEM, "no memory for a batch of %lld tokens", (long long)n);
        ty_pipeline_abort("sending a batch"); /* the others wait for it: nothing sensible is left */
    }
    for (int64_t t = 0; t < n; t++) {
        uint8_t *row = buf + t * BATCH_ROW;
        memcpy(row, &b->token[t], 4);
        memcpy(row + 4, &b->pos[t], 4);
        memcpy(row + 8, &b->seq_id[t], 4);
        row[12] = (uint8_t)(b->logits ? b->logits[t] != 0 : t == n - 1);
    }
    ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_DECODE, .id = id, .x = {n}, .payload = buf, .len = n * BATCH_ROW});
    free(buf);
}

toy_status ty_pipeline_batch_of(const ty_pipe_msg *m, toy_batch *b) {
    const int64_t n = m->x[0];
    if (n < 1 || n > INT32_MAX || m->len != n * BATCH_ROW) return ty_error(TOY_ERR_FORMAT, "a batch of %lld tokens", (long long)n);
    int32_t *ids = malloc((size_t)n * (3 * sizeof *ids + 1));
    if (!ids) return ty_error(TOY_ERR_NOMEM, "no memory for a batch of %lld tokens", (long long)n);
    int8_t *want = (int8_t *)(ids + 3 * n);
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *row = m->payload + t * BATCH_ROW;
        memcpy(&ids[t], row, 4);
        memcpy(&ids[n + t], row + 4, 4);
        memcpy(&ids[2 * n + t], row + 8, 4);
        want[t] = (int8_t)row[12];
    }
    *b = (toy_batch){(int32_t)n, ids, ids + n, ids + 2 * n, want};
    return TOY_OK;
}

#ifdef TOY_HAVE_MPI

void ty_pipeline_send(const ty_pipe_msg *m) {
    if (!pipe.on || pipe.rank != 0 || pipe.ended) return; /* the others are gone after PIPE_QUIT */
    int64_t h[8] = {m->cmd, m->id, m->x[0], m->x[1], m->x[2], m->x[3], m->x[4], m->len};
    MPI_Bcast(h, 8, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (m->len) MPI_Bcast(m->payload, (int)m->len, MPI_BYTE, 0, MPI_COMM_WORLD);
}

void ty_pipeline_receive(ty_pipe_msg *m) {
    int64_t h[8];
    MPI_Bcast(h, 8, MPI_INT64_T, 0, MPI_COMM_WORLD);
    *m = (ty_pipe_msg){.cmd = (int)h[0], .id = (int)h[1], .x = {h[2], h[3], h[4], h[5], h[6]}, .len = h[7]};
    if (m->len <= 0) return;
    if (!(m->payload = malloc((size_t)m->len))) {
        ty_error(TOY_ERR_NOMEM, "no memory for %lld bytes", (long long)m->len);
        ty_pipeline_abort("a message from rank 0");
    }
    MPI_Bcast(m->payload, (int)m->len, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static void host_name(char *host, size_t cap) {
    char h[MPI_MAX_PROCESSOR_NAME] = "?";
    int len = 0;
    MPI_Get_processor_name(h, &len);
    snprintf(host, cap, "%s", h);
}

toy_status ty_pipeline_agree(toy_status st) {
    char mine[512], host[256];
    host_name(host, sizeof host);
    snprintf(mine, sizeof mine, "%d\t%s\t%s", (int)st, host, st ? toy_last_error() : "");
    char *all = pipe.rank == 0 ? malloc((size_t)pipe.size * sizeof mine) : NULL;
    if (pipe.rank == 0 && !all) ty_pipeline_abort("no memory");
    MPI_Gather(mine, sizeof mine, MPI_CHAR, all, sizeof mine, MPI_CHAR, 0, MPI_COMM_WORLD);
    for (int r = 1; all && r < pipe.size && !st; r++) {
        char *m = all + (size_t)r * sizeof mine, *tab = strchr(m, '\t'), *tab2 = tab ? strchr(tab + 1, '\t') : NULL;
        if (!atoi(m) || !tab2) continue;
        *tab2 = 0;
        st = ty_error((toy_status)atoi(m), "rank %d (%s): %s", r, tab + 1, tab2 + 1);
    }
    free(all);
    return st;
}

_Noreturn void ty_pipeline_abort(const char *what) {
    char host[256];
    host_name(host, sizeof host);
    fprintf(stderr, "toy: rank %d (%s): %s: %s\n", pipe.rank, host, what, toy_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* in chunks within MPI's int counts */
#define FLOAT_CHUNK (1 << 28)

void ty_pipeline_send_floats(const float *x, int64_t n, int dest, int tag) {
    for (int64_t i = 0; i < n; i += FLOAT_CHUNK)
        MPI_Send(x + i, (int)(n - i < FLOAT_CHUNK ? n - i : FLOAT_CHUNK), MPI_FLOAT, dest, tag, MPI_COMM_WORLD);
}

void ty_pipeline_recv_floats(float *x, int64_t n, int src, int tag) {
    for (int64_t i = 0; i < n; i += FLOAT_CHUNK)
        MPI_Recv(x + i, (int)(n - i < FLOAT_CHUNK ? n - i : FLOAT_CHUNK), MPI_FLOAT, src, tag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
}

/* sends posted and not yet known complete, each from a copy of its own */
static struct posted_send {
    MPI_Request req;
    float *copy;
} *posted;
static int n_posted, cap_posted;

/* Frees the copies of the sends that have completed. */
static void reap(void) {
    int kept = 0;
    for (int i = 0; i < n_posted; i++) {
        int done = 0;
        MPI_Test(&posted[i].req, &done, MPI_STATUS_IGNORE);
        if (done) free(posted[i].copy);
        else posted[kept++] = posted[i];
    }
    n_posted = kept;
}

void ty_pipeline_post_floats(const float *x, int64_t n, int dest, int tag) {
    reap();
    for (int64_t i = 0; i < n; i += FLOAT_CHUNK) {
        const int m = (int)(n - i < FLOAT_CHUNK ? n - i : FLOAT_CHUNK);
        float *copy = malloc((size_t)m * sizeof *copy);
        if (n_posted == cap_posted) {
            const int cap = cap_posted ? 2 * cap_posted : 16;
            struct posted_send *p = realloc(posted, (size_t)cap * sizeof *p);
            if (p) posted = p, cap_posted = cap;
        }
        if (!copy || n_posted == cap_posted) { /* no room to keep it: sent now, rank 0 takes it in turn */
            free(copy);
            MPI_Send(x + i, m, MPI_FLOAT, dest, tag, MPI_COMM_WORLD);
            continue;
        }
        memcpy(copy, x + i, (size_t)m * sizeof *copy);
        MPI_Isend(copy, m, MPI_FLOAT, dest, tag, MPI_COMM_WORLD, &posted[n_posted].req);
        posted[n_posted++].copy = copy;
    }
}

void ty_pipeline_flush(void) {
    for (int i = 0; i < n_posted; i++) {
        MPI_Wait(&posted[i].req, MPI_STATUS_IGNORE);
        free(posted[i].copy);
    }
    n_posted = 0;
    free(posted);
    posted = NULL;
    cap_posted = 0;
}

/* rank 0's exit releases the others from toy_pipeline_worker */
static void quit(void) {
    if (pipe.on && pipe.rank == 0 && !pipe.ended) {
        ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_QUIT});
        pipe.ended = true;
    }
}

toy_status toy_pipeline_init(int *rank, int *size) {
    toy_status st = ty_mpi_join(&pipe.rank, &pipe.size);
    if (st) return st;
    if (pipe.size > 1 && !pipe.on) {
        pipe.on = true;
        if (pipe.rank == 0) atexit(quit); /* registered after MPI_Finalize's: runs before it */
    }
    if (rank) *rank = pipe.rank;
    if (size) *size = pipe.size;
    return TOY_OK;
}

#else /* without MPI: one process, never a pipeline */

void ty_pipeline_send(const ty_pipe_msg *m) { (void)m; }
void ty_pipeline_receive(ty_pipe_msg *m) { *m = (ty_pipe_msg){.cmd = PIPE_QUIT}; }
toy_status ty_pipeline_agree(toy_status st) { return st; }
_Noreturn void ty_pipeline_abort(const char *what) {
    fprintf(stderr, "toy: %s: %s\n", what, toy_last_error());
    exit(1);
}
void ty_pipeline_send_floats(const float *x, int64_t n, int dest, int tag) { (void)x, (void)n, (void)dest, (void)tag; }
void ty_pipeline_recv_floats(float *x, int64_t n, int src, int tag) { (void)x, (void)n, (void)src, (void)tag; }
void ty_pipeline_post_floats(const float *x, int64_t n, int dest, int tag) { (void)x, (void)n, (void)dest, (void)tag; }
void ty_pipeline_flush(void) {}

toy_status toy_pipeline_init(int *rank, int *size) {
    toy_status st = ty_mpi_join(&pipe.rank, &pipe.size);
    if (rank) *rank = pipe.rank;
    if (size) *size = pipe.size;
    return st;
}

#endif
