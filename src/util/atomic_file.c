/* atomic_file.c — see atomic_file.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "error.h"

toy_status ty_atomic_open(ty_atomic_file *a, const char *path) {
    memset(a, 0, sizeof *a);
    const size_t plen = strlen(path);
    a->path = strdup(path);
    a->tmp_path = malloc(plen + 16);
    if (!a->path || !a->tmp_path) {
        ty_atomic_abort(a);
        return ty_error(TOY_ERR_NOMEM, "%s: no memory", path);
    }
    snprintf(a->tmp_path, plen + 16, "%s.tmp.XXXXXX", path);
    const int fd = mkstemp(a->tmp_path);
    if (fd < 0) {
        const int e = errno;
        free(a->tmp_path);
        a->tmp_path = NULL;
        ty_atomic_abort(a);
        return ty_error(TOY_ERR_IO, "%s: cannot create a temporary file beside it: %s", path,
                        strerror(e));
    }
    /* mkstemp creates 0600; the file is as readable as any other file. */
    const mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask)) { /* not fatal: the file stays private */
    }
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        close(fd);
        ty_atomic_abort(a);
        return ty_error(TOY_ERR_IO, "%s: cannot open the temporary file", path);
    }
    return TOY_OK;
}

toy_status ty_atomic_commit(ty_atomic_file *a) {
    int bad = fflush(a->f) != 0 || fsync(fileno(a->f)) != 0;
    int e = errno;
    bad |= fclose(a->f) != 0;
    a->f = NULL;
    if (bad || rename(a->tmp_path, a->path) != 0) {
        if (!bad) e = errno;
        toy_status st = ty_error(TOY_ERR_IO, "%s: cannot complete the file: %s", a->path, strerror(e));
        ty_atomic_abort(a);
        return st;
    }
    free(a->tmp_path);
    a->tmp_path = NULL;
    ty_atomic_abort(a);
    return TOY_OK;
}

void ty_atomic_abort(ty_atomic_file *a) {
    if (a->f) fclose(a->f);
    if (a->tmp_path) unlink(a->tmp_path);
    free(a->tmp_path);
    free(a->path);
    memset(a, 0, sizeof *a);
}

toy_status ty_write_file_atomic(const char *path, const void *data, size_t len) {
    ty_atomic_file a;
    toy_status st = ty_atomic_open(&a, path);
    if (st) return st;
    if (len && fwrite(data, 1, len, a.f) != len) {
        st = ty_error(TOY_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        ty_atomic_abort(&a);
        return st;
    }
    return ty_atomic_commit(&a);
}
