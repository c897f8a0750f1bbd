/*
 * torch_compare.h — reads the JSON file bench/torch_compare.py writes, for cgjit-bench --compare:
 *
 *   {"gpu": "...", "torch": "2.x",
 *    "results": {"mlp":  {"eager_us": x, "compile_us": y, "reduce_overhead_us": z},
 *                "cnn":  {...}, "gpt2": {...}},
 *    "note": "..."}
 *
 * Any value may be null or absent; other keys are ignored. Numbers that are not finite (Python's
 * json writes NaN and Infinity) count as absent.
 */
#ifndef CGJ_BENCH_TORCH_COMPARE_H
#define CGJ_BENCH_TORCH_COMPARE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { TORCH_EAGER, TORCH_COMPILE, TORCH_REDUCE_OVERHEAD, TORCH_COLS };
enum { TORCH_MAX_MODELS = 8 };

typedef struct torch_compare {
    int loaded;                  /* the file was read and is valid JSON with a "results" object */
    char note[512];              /* why the columns say n/a (empty when loaded without remarks) */
    char gpu[128], torch[64];    /* "" when absent */
    char file_note[512];         /* the file's own top-level "note", "" when absent */
    int found[TORCH_MAX_MODELS]; /* results has an object for this model */
    int has[TORCH_MAX_MODELS][TORCH_COLS];
    double us[TORCH_MAX_MODELS][TORCH_COLS];
} torch_compare_t;

/* Reads `path` and fills *tc for the models names[0..n-1] (n <= TORCH_MAX_MODELS). Never fails:
 * a missing or unreadable file, or one that is not the format above, leaves loaded = 0 and says
 * why in note. */
void torch_compare_load(const char *path, const char *const *names, int n, torch_compare_t *tc);

#ifdef __cplusplus
}
#endif
#endif /* CGJ_BENCH_TORCH_COMPARE_H */
