/* log.c — category mask, destination and formatting of cgjit's log; see log.h. */
#include "base/log.h"
#include "base/config.h"
#include "base/file.h"
#include "base/json.h"
#include "base/mem.h"

#include <errno.h>

#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

uint32_t cgj_log_mask;
static FILE *log_out;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const cat_names[] = {
#define CGJ_LOG_NAME(name, doc) #name,
    CGJ_LOG_LIST(CGJ_LOG_NAME)
#undef CGJ_LOG_NAME
};

/* A category of CGJIT_LOG; config.c warned about unknown ones when it read the variable. */
static void enable_category(const char *name, size_t len)
{
    if (len == 3 && strncmp(name, "all", 3) == 0) {
        cgj_log_mask = (1u << CGJ_LOG_COUNT) - 1;
        return;
    }
    for (int i = 0; i < CGJ_LOG_COUNT; i++)
        if (strlen(cat_names[i]) == len && strncmp(cat_names[i], name, len) == 0) cgj_log_mask |= 1u << i;
}

void cgj_log_forked(void)
{
    pthread_mutex_init(&log_lock, NULL);
}

void cgj_log_init(void)
{
    log_out = stderr;
    char path[4096];
    /* /dev/stderr is stderr itself: its lines keep stderr's form, and its buffering */
    if (cgj_cfg.LOG_FILE[0] && strcmp(cgj_file_expand(cgj_cfg.LOG_FILE, path, sizeof path), "/dev/stderr")) {
        FILE *f = cgj_file_open(path, false);
        if (f) {
            setvbuf(f, NULL, _IOLBF, 0);
            log_out = f;
        } else {
            cgj_log_message("warning: CGJIT_LOG_FILE='%s' cannot be opened (%s); logging to stderr", path,
                            cgj_file_strerror(errno));
        }
    }
    const char *s = cgj_cfg.LOG;
    while (*s) {
        size_t len = strcspn(s, ",");
        if (len) enable_category(s, len);
        s += len;
        if (*s == ',') s++;
    }
}

FILE *cgj_log_stream(void)
{
    return log_out ? log_out : stderr;
}

/* `prefix`, then fmt formatted and escaped (log.h), then a newline, to f. */
static void put_line(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    char line[1024], *text = line;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    if (n >= (int)sizeof line) { /* rare: formatted again into a buffer that fits */
        text = cgj_xmalloc((size_t)n + 1);
        vsnprintf(text, (size_t)n + 1, fmt, again);
    }
    va_end(again);
    flockfile(f);
    fputs(prefix, f);
    cgj_text_str(f, n < 0 ? "(a message that cannot be formatted)" : text);
    fputc('\n', f);
    funlockfile(f);
    if (text != line) cgj_free(text);
}

void cgj_log_write(cgj_log_cat_t cat, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&log_lock);
    FILE *f = cgj_log_stream();
    char prefix[64];
    if (f == stderr) snprintf(prefix, sizeof prefix, "cgjit[%s] ", cat_names[cat]);
    else /* a file several processes may append to: each line says whose it is */
        snprintf(prefix, sizeof prefix, "cgjit[%ld:%s] ", (long)getpid(), cat_names[cat]);
    put_line(f, prefix, fmt, ap);
    pthread_mutex_unlock(&log_lock);
    va_end(ap);
}

void cgj_log_message(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    put_line(stderr, "cgjit: ", fmt, ap);
    va_end(ap);
}

const char *cgj_log_hex(char *buf, const void *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = p;
    size_t m = n > 32 ? 32 : n, j = 0;
    for (size_t i = 0; i < m; i++) {
        buf[j++] = digits[b[i] >> 4];
        buf[j++] = digits[b[i] & 15];
    }
    if (m < n) buf[j++] = '.', buf[j++] = '.';
    buf[j] = '\0';
    return buf;
}
