/* IEEE half precision (binary16), the type of the CPU passes' key/value cache: attention over a
 * ~1000-token cache at width 1 waited on memory (28 layers: 4.6 ms streamed against 2.2 ms with the
 * keys in the core's cache), and half the bytes halves that wait. llama.cpp's cache is the same
 * type by default. Written once per position (layer.c, or decoding/lean.py's torch ops through
 * `specd_halves`), read by every later pass: a token's keys have the same bits whatever pass wrote
 * them, so rounding here changes no exactness promise.
 *
 * Plain integer code, no instructions a CPU may lack: rounding to nearest, ties to even, with
 * subnormals, overflow to infinity and NaN kept NaN (quiet), as F16C's vcvtps2ph and torch's
 * .half() round; widening is exact and is what F16C's vcvtph2ps computes (attend_avx2.c uses it).
 */
#ifndef SPECD_HALF_H
#define SPECD_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t half_bits_of(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

/* the nearest half to f, ties to even */
static inline uint16_t half_from_float(float f) {
    uint32_t x = half_bits_of(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);        /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);       /* 65520 and up (the tie past 65504): infinity */
    if (a >= 0x38800000u) {                                        /* a normal half: 2^-14 and up */
        uint32_t q = (a - (112u << 23)) >> 13, rest = a & 0x1fffu;
        q += rest > 0x1000u || (rest == 0x1000u && (q & 1u));      /* a carry moves into the exponent, as it must */
        return (uint16_t)(sign | q);
    }
    int shift = 126 - (int)(a >> 23);                              /* a subnormal half: units of 2^-24 */
    if (shift > 24) return (uint16_t)sign;                         /* below 2^-25: zero */
    uint32_t m = (a & 0x7fffffu) | 0x800000u, q = m >> shift, rest = m & ((1u << shift) - 1u), tie = 1u << (shift - 1);
    q += rest > tie || (rest == tie && (q & 1u));
    return (uint16_t)(sign | q);
}

/* the half h as a float (exact) */
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1fu)
        x = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u);  /* infinity, or NaN made quiet */
    else if (e == 0) {
        float f = (float)m * 0x1p-24f;                              /* zero or subnormal: exact */
        x = sign | half_bits_of(f);
    } else
        x = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

#endif
