/* SPDX-License-Identifier: Apache-2.0 */
#include "basic/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum log_level min_level = LOG_LEVEL_INFO;
static enum log_format out_format = LOG_FORMAT_TEXT;

void log_set_level(enum log_level level) {
        min_level = level;
}
enum log_level log_get_level(void) {
        return min_level;
}
void log_set_format(enum log_format format) {
        out_format = format;
}

enum log_format log_get_format(void) {
        return out_format;
}

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int log_level_from_string(const char *s, enum log_level *ret) {
        for (size_t i = 0; i < ELEMENTSOF(level_names); i++)
                if (strcmp(s, level_names[i]) == 0) {
                        *ret = (enum log_level) i;
                        return 0;
                }
        return -EINVAL;
}

int log_format_from_string(const char *s, enum log_format *ret) {
        if (strcmp(s, "text") == 0)
                *ret = LOG_FORMAT_TEXT;
        else if (strcmp(s, "json") == 0)
                *ret = LOG_FORMAT_JSON;
        else
                return -EINVAL;
        return 0;
}

/* Escape s as the inside of a JSON string into buf (always terminated). */
static void json_escape(char *buf, size_t size, const char *s) {
        size_t o = 0;
        for (; *s && o + 7 < size; s++) {
                unsigned char c = (unsigned char) *s;
                if (c == '"' || c == '\\') {
                        buf[o++] = '\\';
                        buf[o++] = (char) c;
                } else if (c == '\n') {
                        buf[o++] = '\\';
                        buf[o++] = 'n';
                } else if (c < 0x20) {
                        o += (size_t) snprintf(buf + o, size - o, "\\u%04x", c);
                } else
                        buf[o++] = (char) c;
        }
        buf[o] = 0;
}

void log_write(enum log_level level, const char *fmt, ...) {
        if (level < min_level)
                return;
        int saved = errno;
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);

        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        char when[40];
        size_t n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + n, sizeof(when) - n, ".%03ldZ", ts.tv_nsec / 1000000);

        if (out_format == LOG_FORMAT_JSON) {
                char esc[sizeof(msg) * 2];
                json_escape(esc, sizeof(esc), msg);
                fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", when,
                        level_names[level], esc);
        } else
                fprintf(stderr, "%s %-5s %s\n", when, level_names[level], msg);
        fflush(stderr);
        errno = saved;
}
