/* splitmix.h — splitmix64 (Steele, Lea and Flood): a stream of well-mixed 64-bit values
 * from a counter, for seeding generators and for keyed, reproducible random choices. */
#ifndef TOY_SPLITMIX_H
#define TOY_SPLITMIX_H

#include <stdint.h>

/* Advances *state and returns the next value of its stream. */
static inline uint64_t ty_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
