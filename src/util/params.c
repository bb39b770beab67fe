/* params.c — see params.h. */
#include "params.h"

#include <string.h>

#include "error.h"

toy_status ty_params_read(void *dst, size_t dst_size, const void *src, const char *name) {
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size < sizeof size)
        return ty_error(TOY_ERR_INVALID,
                        "%s: size is %zu; initialise the struct with its _default_params() "
                        "or _params_init()", name, size);
    if (size > dst_size)
        return ty_error(TOY_ERR_INVALID,
                        "%s: size is %zu, but this library's is %zu: the program was built "
                        "against a newer toy.h than the library it runs with", name, size, dst_size);
    memcpy((char *)dst + sizeof size, (const char *)src + sizeof size, size - sizeof size);
    return TOY_OK;
}

toy_status ty_result_check(const void *dst, const char *name) {
    if (!dst) return TOY_OK;
    size_t size;
    memcpy(&size, dst, sizeof size);
    if (size < sizeof size)
        return ty_error(TOY_ERR_INVALID, "%s: size is %zu; set it to the struct's sizeof", name, size);
    return TOY_OK;
}

toy_status ty_result_write(void *dst, const void *src, size_t src_size, const char *name) {
    toy_status st = ty_result_check(dst, name);
    if (st) return st;
    size_t size;
    memcpy(&size, dst, sizeof size);
    const size_t n = size < src_size ? size : src_size;
    memcpy((char *)dst + sizeof size, (const char *)src + sizeof size, n - sizeof size);
    return TOY_OK;
}

void ty_params_init(void *dst, size_t size, const void *defaults, size_t defaults_size) {
    if (!dst || size < sizeof size) return;
    const size_t n = size < defaults_size ? size : defaults_size;
    memcpy(dst, defaults, n);
    memset((char *)dst + n, 0, size - n);
    memcpy(dst, &size, sizeof size);
}
