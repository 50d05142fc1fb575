/*
 * SHA-256 blocks with the x86 SHA extensions (SHA256RNDS2, SHA256MSG1, SHA256MSG2).
 *
 * The instructions keep the eight working words as two vectors, {A,B,E,F} and {C,D,G,H} (A in the
 * highest lane); each SHA256RNDS2 runs two rounds and returns the new {A,B,E,F}, the old one becoming
 * {C,D,G,H}. The message schedule is kept as the last sixteen words, four vectors of four.
 * Only the functions marked with the target attribute use the extensions: the rest of the library
 * builds for the baseline CPU, and ph_sha256_accelerated() decides at run time.
 */
#include "ph_digest.h"

/* FIPS 180-4 §4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64
 * primes. The one copy: PluginSDK's Swift code reads it through ph_sha256_round_constants(). */
static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

const uint32_t *ph_sha256_round_constants(void) { return round_constants; }

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>


int ph_sha256_accelerated(void) {
    /* Asked once: PluginSDK keeps the answer. */
    unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    int ssse3 = (ecx >> 9) & 1, sse41 = (ecx >> 19) & 1;
    if (!ssse3 || !sse41 || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    return (ebx >> 29) & 1;
}

__attribute__((target("sha,sse4.1,ssse3")))
void ph_sha256_compress(uint32_t state[8], const uint8_t *data, size_t blocks) {
    /* Big-endian words: reverse the bytes of each 32-bit lane. */
    const __m128i word_order = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i abcd = _mm_loadu_si128((const __m128i *)&state[0]); /* lanes a b c d */
    __m128i efgh = _mm_loadu_si128((const __m128i *)&state[4]); /* lanes e f g h */
    __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);               /* b a d c */
    __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);               /* h g f e */
    __m128i abef = _mm_alignr_epi8(badc, hgfe, 8);              /* f e b a: A highest */
    __m128i cdgh = _mm_blend_epi16(hgfe, badc, 0xF0);           /* h g d c: C highest */

    for (size_t block = 0; block < blocks; block++, data += 64) {
        const __m128i abef_in = abef, cdgh_in = cdgh;
        __m128i w0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 0)), word_order);
        __m128i w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16)), word_order);
        __m128i w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 32)), word_order);
        __m128i w3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 48)), word_order);
        for (int quad = 0; quad < 16; quad++) {
            /* Four rounds on words 4·quad … 4·quad+3 (in w0), two per instruction. */
            __m128i sum = _mm_add_epi32(w0, _mm_loadu_si128((const __m128i *)&round_constants[4 * quad]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, sum);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(sum, 0x0E));
            if (quad < 12) {
                /* The next four words: W[t-16] + σ0(W[t-15]) + W[t-7] + σ1(W[t-2]). */
                __m128i next = _mm_add_epi32(_mm_sha256msg1_epu32(w0, w1), _mm_alignr_epi8(w3, w2, 4));
                next = _mm_sha256msg2_epu32(next, w3);
                w0 = w1;
                w1 = w2;
                w2 = w3;
                w3 = next;
            } else {
                w0 = w1;
                w1 = w2;
                w2 = w3;
            }
        }
        abef = _mm_add_epi32(abef, abef_in);
        cdgh = _mm_add_epi32(cdgh, cdgh_in);
    }

    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);      /* a b e f */
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);      /* g h c d */
    abcd = _mm_blend_epi16(feba, dchg, 0xF0);           /* a b c d */
    efgh = _mm_alignr_epi8(dchg, feba, 8);              /* e f g h */
    _mm_storeu_si128((__m128i *)&state[0], abcd);
    _mm_storeu_si128((__m128i *)&state[4], efgh);
}

#else

int ph_sha256_accelerated(void) { return 0; }

void ph_sha256_compress(uint32_t state[8], const uint8_t *data, size_t blocks) {
    (void)state;
    (void)data;
    (void)blocks;
}

#endif
