/* CRC-32 (zlib's: the IEEE polynomial, reflected, with zlib's pre- and post-inversion) by carry-less
   multiplication where the CPU has it, by tables elsewhere; the same value either way.

   Every row Seam publishes is summed by its CRC-32 twice, once by the task that publishes it and once by the
   sink that stages it (END's check): a call of zlib's crc32 per row piece cost the tasks about 5% of a full
   load's CPU (perf, lineitem); folding 16 bytes per multiply, and short pieces without a call, cut that to
   about a fifth.

   How: the message, 16 bytes at a time, is a polynomial over GF(2) whose CRC is its remainder modulo P
   (times x^32). Four 128-bit lanes are each moved 512 bits on by multiplying their halves by x^n mod P
   (n chosen below) and added to the next 64 bytes; then the lanes are folded into one by the 128-bit
   constants, and eight-byte tables finish the last lane and the bytes that do not fill one. In a register loaded from
   memory, bit i of the lane is the coefficient of x^(127 - i) (the reflected order); a 64-bit constant
   keeps c's coefficient of x^d at bit 63 - d, so that a product (bit k: x^(126 - k)) lands in lane order
   once the constant is c = x^(shift - 1) mod P. tests/unit/test_fast_crc32.py compares it with zlib.

   Delivery guarantee: none (a checksum). */
#ifndef SEAM_FAST_CRC32_H
#define SEAM_FAST_CRC32_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include <string.h>

/* zlib's CRC-32 without a call into zlib, for short pieces and what the folds leave: eight bytes a step by
   the tables of each byte's effect 0 - 7 bytes on (built once) */
static uint32_t seam_crc32_tables[8][256];
static int seam_crc32_ready, seam_clmul;

static void seam_crc32_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320U ^ (c >> 1) : c >> 1;
        seam_crc32_tables[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++) {
            uint32_t c = seam_crc32_tables[t - 1][n];
            seam_crc32_tables[t][n] = (c >> 8) ^ seam_crc32_tables[0][c & 0xff];
        }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    seam_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
#endif
    seam_crc32_ready = 1;
}

static uint32_t seam_crc32_small(uint32_t crc, const unsigned char *buf, size_t len) {
    uint32_t (*t)[256] = seam_crc32_tables;
    crc = ~crc;
    for (; len >= 8; buf += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, buf, 8); /* little-endian: x86-64, where the folds run; elsewhere only the byte loop below */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        w ^= crc;
        crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
              t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
#else
        for (int i = 0; i < 8; i++) crc = (crc >> 8) ^ t[0][(crc ^ buf[i]) & 0xff];
#endif
    }
    for (; len; buf++, len--) crc = (crc >> 8) ^ t[0][(crc ^ *buf) & 0xff];
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#include <wmmintrin.h>

/* x^n mod P in the 64-bit layout above: the low half of a lane moves by 64 + shift bits, the high by shift */
#define SEAM_K_512_LO 0x653d982200000000ULL /* x^575 */
#define SEAM_K_512_HI 0xcad38e8f00000000ULL /* x^511 */
#define SEAM_K_128_LO 0x65673b4600000000ULL /* x^191 */
#define SEAM_K_128_HI 0x9ba54c6f00000000ULL /* x^127 */

__attribute__((target("pclmul,sse2"))) static inline __m128i seam_fold(__m128i lane, __m128i k, __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(lane, k, 0x00), _mm_clmulepi64_si128(lane, k, 0x11)),
                         next);
}

__attribute__((target("pclmul,sse2"))) static uint32_t seam_crc32_clmul(uint32_t crc, const unsigned char *buf,
                                                                        size_t len) {
    __m128i x0 = _mm_loadu_si128((const __m128i *)buf), x1 = _mm_loadu_si128((const __m128i *)(buf + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(buf + 32)), x3 = _mm_loadu_si128((const __m128i *)(buf + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc)); /* zlib's pre-inversion, on the first 4 bytes */
    buf += 64;
    len -= 64;
    const __m128i k512 = _mm_set_epi64x((long long)SEAM_K_512_HI, (long long)SEAM_K_512_LO);
    for (; len >= 64; buf += 64, len -= 64) {
        x0 = seam_fold(x0, k512, _mm_loadu_si128((const __m128i *)buf));
        x1 = seam_fold(x1, k512, _mm_loadu_si128((const __m128i *)(buf + 16)));
        x2 = seam_fold(x2, k512, _mm_loadu_si128((const __m128i *)(buf + 32)));
        x3 = seam_fold(x3, k512, _mm_loadu_si128((const __m128i *)(buf + 48)));
    }
    const __m128i k128 = _mm_set_epi64x((long long)SEAM_K_128_HI, (long long)SEAM_K_128_LO);
    x0 = seam_fold(seam_fold(seam_fold(x0, k128, x1), k128, x2), k128, x3);
    for (; len >= 16; buf += 16, len -= 16) x0 = seam_fold(x0, k128, _mm_loadu_si128((const __m128i *)buf));
    unsigned char last[16];
    _mm_storeu_si128((__m128i *)last, x0);
    /* the lane holds the pre-inverted message's remainder so far: its CRC from a zero register */
    return seam_crc32_small(seam_crc32_small(0xffffffffU, last, 16), buf, len);
}

#endif

static inline uint32_t seam_crc32(uint32_t crc, const unsigned char *buf, size_t len) {
    if (!seam_crc32_ready) seam_crc32_init();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (len >= 64 && seam_clmul) return seam_crc32_clmul(crc, buf, len);
#endif
    return len >= 4096 ? (uint32_t)crc32(crc, buf, (uInt)len) : seam_crc32_small(crc, buf, len);
}

#endif
