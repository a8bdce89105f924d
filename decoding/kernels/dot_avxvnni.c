/* The AVX2 K-quant kernels (kquants256.h) with AVX-VNNI: each product pair and scale summed into
 * the lanes by one vpdpwssd where AVX2 takes vpmaddwd and an add. Intel's cores since Alder Lake
 * (laptops included) and AMD's since Zen 5 have it, most of the former without AVX-512. The same
 * integer sums, so the same bits. Chosen at run time like dot_avx2.c.
 */
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "blocks.h"

#define TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define INLINE TARGET static inline __attribute__((always_inline))
#define KQ(name) name##_avxvnni
#define ADD_LANES(sum, w, q, scale) _mm256_dpwssd_avx_epi32(sum, _mm256_maddubs_epi16(w, q), scale)

#include "lanes8.h"
#include "kquants256.h"
#endif
