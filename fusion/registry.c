/*
 * registry.c — the kernels registered as elementwise: by the program (cgj_op_register_elementwise)
 * and by the registry file CGJIT_OPS, read once, the first time fusion looks a kernel up.
 *
 * A kernel is named as the driver names it: the mangled name of a C++ kernel, the plain name of
 * an extern "C" one. A registration's plain name also finds a C++ kernel of that name
 * (`scale` finds `_Z5scalePfPKfi`): overloads are told apart by the layout check (spec.h).
 * Entries are never removed (cgj_fusion_registry_reset, for tests and fuzzers, aside), so a
 * spec found stays valid; a later registration of the same name wins. A registry file is read
 * line by line, and a line that cannot be read whole as written (too long, a NUL byte, a name
 * too long) is reported and registers nothing: a spec cut short could mean something else.
 * The file is read as every file cgjit reads is (base/file.h): a regular file only, never
 * blocking (a FIFO is refused at once), of at most REGISTRY_MAX_BYTES, else one message and
 * nothing registered. Messages quote the file's bytes escaped (base/log.h).
 * The descriptions of library calls (runtime/libs_*.c) are specs of static text, parsed once
 * each and kept likewise.
 */
#include "fusion/fusion.h"
#include "base/config.h"
#include "base/file.h"
#include "base/mem.h"

#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct entry {
    char *name;
    cgj_ew_spec_t spec;
} entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t **entries;
static uint32_t nentries, cap;
static pthread_once_t file_once = PTHREAD_ONCE_INIT;

void cgj_fusion_registry_forked(void)
{
    pthread_mutex_init(&lock, NULL);
}

bool cgj_fusion_register(const char *kernel, const char *spec, char *err, size_t errlen)
{
    if (!kernel || !*kernel) {
        snprintf(err, errlen, "no kernel name");
        return false;
    }
    entry_t *e = cgj_xcalloc(1, sizeof *e);
    if (!cgj_ew_parse(spec, &e->spec, err, errlen)) {
        cgj_free(e);
        return false;
    }
    e->name = cgj_xstrdup(kernel);
    pthread_mutex_lock(&lock);
    if (nentries == cap) {
        cap = cap ? 2 * cap : 16;
        entries = cgj_xrealloc(entries, cap * sizeof *entries);
    }
    entries[nentries++] = e;
    pthread_mutex_unlock(&lock);
    return true;
}

/* Does the driver's name `kernel` name registration `reg`: equal, or the C++ mangling of a
 * function of that plain name (_Z<length><name>...)? */
static bool names(const char *reg, const char *kernel)
{
    if (!strcmp(reg, kernel)) return true;
    char len[32]; /* "_Z<length>", then the name: a long name is compared whole, not cut short */
    int n = snprintf(len, sizeof len, "_Z%zu", strlen(reg));
    return !strncmp(kernel, len, (size_t)n) && !strncmp(kernel + n, reg, strlen(reg));
}

/* A registry file is read line by line into a buffer of LINE_MAX_BYTES: a longer line, or one
 * with a NUL byte, is reported and skipped whole, never cut into a shorter spec that means
 * something else (`x = x * 2` read as `x = x`) and a next line made of its tail. */
#define LINE_MAX_BYTES 4096
#define NAME_MAX_BYTES 256
#define REGISTRY_MAX_BYTES (16u << 20)

/* The next line of f, its '\n' dropped, into line[LINE_MAX_BYTES] (cut if longer); *n its whole
 * length. False at the end of the file. */
static bool read_line(FILE *f, char *line, size_t *n)
{
    int c;
    *n = 0;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (*n < LINE_MAX_BYTES - 1) line[*n] = (char)c;
        ++*n;
    }
    line[*n < LINE_MAX_BYTES - 1 ? *n : LINE_MAX_BYTES - 1] = 0;
    return c != EOF || *n;
}

/* Register line `no` of `path` (line[n], read by read_line). True if it registered a kernel or
 * is blank or a comment; false with a message on stderr if it is bad. The kernel's name ends at
 * the first '(' or blank; its spec starts after the blanks that follow. */
static bool load_line(const char *path, unsigned no, char *line, size_t n)
{
    if (n >= LINE_MAX_BYTES || memchr(line, 0, n)) {
        if (n >= LINE_MAX_BYTES)
            cgj_log_message("%s:%u: a line longer than %d bytes; the line is ignored", path, no, LINE_MAX_BYTES - 1);
        else cgj_log_message("%s:%u: a NUL byte in the line; the line is ignored", path, no);
        return false;
    }
    line[strcspn(line, "\r")] = 0;
    const char *p = line + strspn(line, " \t");
    if (!*p || *p == '#') return true;
    size_t len = strcspn(p, " \t(");
    if (len >= NAME_MAX_BYTES) {
        cgj_log_message("%s:%u: a kernel name longer than %d bytes; the line is ignored", path, no, NAME_MAX_BYTES - 1);
        return false;
    }
    char name[NAME_MAX_BYTES], err[200];
    snprintf(name, sizeof name, "%.*s", (int)len, p);
    const char *spec = p + len + strspn(p + len, " \t");
    if (!*spec) {
        cgj_log_message("%s:%u: '%s' has no spec ('KERNEL (PARAMS): OUT = EXPR'); the kernel stays opaque", path, no,
                        name);
        return false;
    }
    if (!cgj_fusion_register(name, spec, err, sizeof err)) {
        cgj_log_message("%s:%u: kernel '%s': %s; the kernel stays opaque", path, no, name, err);
        return false;
    }
    return true;
}

int cgj_fusion_load_stream(FILE *f, const char *path)
{
    char *line = cgj_xmalloc(LINE_MAX_BYTES); /* off the stack: readers may run on small ones */
    int bad = 0;
    size_t n;
    for (unsigned no = 1; read_line(f, line, &n); no++) bad += !load_line(path, no, line, n);
    cgj_free(line);
    return bad;
}

int cgj_fusion_load_file(const char *path)
{
    size_t len = 0;
    char *text = cgj_file_read(path, REGISTRY_MAX_BYTES, &len);
    FILE *f = text && len ? fmemopen(text, len, "r") : NULL;
    if (!text || (len && !f)) {
        if (errno == EFBIG)
            cgj_log_message("CGJIT_OPS=%s: larger than %u bytes; no kernel is registered from it", path,
                            REGISTRY_MAX_BYTES);
        else cgj_log_message("CGJIT_OPS=%s: %s; no kernel is registered from it", path, cgj_file_strerror(errno));
        cgj_free(text);
        return -1;
    }
    int bad = f ? cgj_fusion_load_stream(f, path) : 0; /* an empty file registers nothing */
    if (f) fclose(f);
    cgj_free(text);
    return bad;
}

static void load_configured_file(void)
{
    if (cgj_cfg.OPS && cgj_cfg.OPS[0]) cgj_fusion_load_file(cgj_cfg.OPS);
}

void cgj_fusion_registry_reset(void)
{
    pthread_mutex_lock(&lock);
    for (uint32_t k = 0; k < nentries; k++) {
        cgj_free(entries[k]->name);
        cgj_free(entries[k]);
    }
    nentries = 0;
    pthread_mutex_unlock(&lock);
}

const cgj_ew_spec_t *cgj_fusion_lookup(const char *kernel)
{
    if (!kernel) return NULL;
    pthread_once(&file_once, load_configured_file);
    const cgj_ew_spec_t *found = NULL;
    pthread_mutex_lock(&lock);
    for (uint32_t k = nentries; k-- > 0 && !found;)
        if (names(entries[k]->name, kernel)) found = &entries[k]->spec;
    pthread_mutex_unlock(&lock);
    return found;
}

/* Parsed library descriptions, by the address of their (static) text. */
typedef struct lib_entry {
    const char *text;
    cgj_ew_spec_t *spec; /* NULL: it does not parse */
} lib_entry_t;
static lib_entry_t *lib_specs;
static uint32_t nlib, libcap;

const cgj_ew_spec_t *cgj_fusion_lib_spec(const cgj_libop_t *l)
{
    if (!l->ew.spec) return NULL;
    pthread_mutex_lock(&lock);
    for (uint32_t k = 0; k < nlib; k++)
        if (lib_specs[k].text == l->ew.spec) {
            const cgj_ew_spec_t *sp = lib_specs[k].spec;
            pthread_mutex_unlock(&lock);
            return sp;
        }
    cgj_ew_spec_t *sp = cgj_xcalloc(1, sizeof *sp);
    char err[200];
    if (!cgj_ew_parse(l->ew.spec, sp, err, sizeof err)) {
        CGJ_LOG(trace, "a library call's elementwise description does not parse: %s: %s", err, l->ew.spec);
        cgj_free(sp);
        sp = NULL;
    }
    if (nlib == libcap)
        libcap = libcap ? 2 * libcap : 16, lib_specs = cgj_xrealloc(lib_specs, libcap * sizeof *lib_specs);
    lib_specs[nlib++] = (lib_entry_t){.text = l->ew.spec, .spec = sp};
    pthread_mutex_unlock(&lock);
    return sp;
}
