// libxxhash (Debian's libxxhash-dev 0.8.1): the XXH3 128-bit streaming hash ASC MHL calls xxh128.
#ifndef COORD_CXXHASH_SHIM_H
#define COORD_CXXHASH_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

/// The canonical (big-endian) 16 bytes of a 128-bit digest, as `xxhsum -H2` and ASC MHL print them in hex.
static inline void cxxh_canonical128(XXH128_hash_t hash, unsigned char out[16]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, hash);
    for (int i = 0; i < 16; i++) out[i] = c.digest[i];
}

#endif
