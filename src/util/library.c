/* library.c — the library as a whole: its version (toy.h: versions and the ABI) and
 * freeing the memory it hands out. */
#include <stdlib.h>

#include "toy.h"

int toy_version(int *major, int *minor, int *patch) {
    if (major) *major = TOY_VERSION_MAJOR;
    if (minor) *minor = TOY_VERSION_MINOR;
    if (patch) *patch = TOY_VERSION_PATCH;
    return TOY_VERSION_MAJOR * 1000000 + TOY_VERSION_MINOR * 1000 + TOY_VERSION_PATCH;
}

void toy_free(void *p) { free(p); }
