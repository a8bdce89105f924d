/* Several matmuls that share their input, in one call of the pool (matmul.c): what layer.c runs a
 * decoder layer's projections with. */
#ifndef SPECD_MATMUL_H
#define SPECD_MATMUL_H

#include <stdint.h>

/* One linear layer: W [n, k] in `type` blocks (GGML's numbers, or layout.c's paired ones), an
 * optional bias [n] (NULL: none). Mirrored by decoding/fused.py's Linear. */
typedef struct {
    int type, n;
    const void *w;
    const float *bias;
} linear;

/* y_i [m, n_i] = x [m, k] @ W_i.T (+ bias_i) for `count` (<= MANY) layers sharing x: x quantized
 * once per activation format, every layer's columns split among the threads in one pool call.
 * Each value is the very dot product specd_matmul computes. Returns 0, or -1 for a type or shape
 * it cannot take. `scratch` holds matmul_scratch(k, m) bytes. */
#define MANY 4
int matmul_many(const linear *layers, int count, int k, const float *x, int m, float **y, uint8_t *scratch);
size_t matmul_scratch(int k, int m);

#endif
