/*
 * no_cuda — a program that never touches CUDA. Preloading libcgjit.so must change nothing: the
 * same stdout byte for byte, the same exit status. It prints environment-independent arithmetic:
 * primes, a 64-bit generator, floating-point sums as hex-floats, and a string built on the heap.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(void)
{
    enum { LIMIT = 100000 };
    char *composite = calloc(LIMIT + 1, 1);
    if (!composite) {
        fprintf(stderr, "no_cuda: out of memory\n");
        return 1;
    }
    int nprimes = 0;
    uint64_t psum = 0;
    for (int i = 2; i <= LIMIT; i++) {
        if (composite[i]) continue;
        nprimes++;
        psum += (uint64_t)i;
        for (long j = (long)i * i; j <= LIMIT; j += i) composite[j] = 1;
    }
    free(composite);
    printf("primes <= %d: %d, sum %llu\n", LIMIT, nprimes, (unsigned long long)psum);

    uint64_t state = 42;
    for (int i = 0; i < 8; i++) printf("rng %d: %016llx\n", i, (unsigned long long)splitmix64(&state));

    double harmonic = 0.0;
    float fsum = 0.0f;
    for (int i = 1; i <= 1000000; i++) {
        harmonic += 1.0 / (double)i;
        fsum += 1.0f / (float)i;
    }
    printf("harmonic(1e6) = %a (double), %a (float)\n", harmonic, (double)fsum);

    size_t cap = 16, len = 0;
    char *s = malloc(cap);
    if (!s) return 1;
    for (int i = 0; i < 200; i++) {
        char word[16];
        int w = snprintf(word, sizeof word, "%d,", (i * i) % 97);
        if (len + (size_t)w + 1 > cap) {
            cap *= 2;
            char *t = realloc(s, cap);
            if (!t) {
                free(s);
                return 1;
            }
            s = t;
        }
        memcpy(s + len, word, (size_t)w);
        len += (size_t)w;
        s[len] = '\0';
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    printf("string of %zu bytes, fnv1a %016llx\n", len, (unsigned long long)h);
    free(s);
    return 0;
}
