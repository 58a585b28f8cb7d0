/*
 * What the C harnesses share (tests/c/test_native.c,
 * tests/c/test_route.c): CHECK, which counts a failure and says
 * where, and a seeded random number generator (and permutations from it),
 * so that every run of a seed sees the same cases.
 */
#ifndef NUMTHUNK_TEST_CHECK_H
#define NUMTHUNK_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            failures++;                                                   \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

static uint64_t rng_state;

static inline uint64_t
rng(void)   /* splitmix64: seeded, reproducible */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* p[0..n) becomes a random permutation of 0..n-1 (Fisher-Yates). */
static inline void
random_permutation(int *p, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng() % (uint64_t)(i + 1));
        int x = p[i];
        p[i] = p[j];
        p[j] = x;
    }
}

#endif /* NUMTHUNK_TEST_CHECK_H */
