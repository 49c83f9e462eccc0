/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Process-wide logging to stderr as text or JSON lines. Only boundaries
 * (RPC handlers, daemon start-up, CLI main) log above debug. */

#include "basic/macro.h"

enum log_level {
        LOG_LEVEL_DEBUG = 0,
        LOG_LEVEL_INFO = 1,
        LOG_LEVEL_WARN = 2,
        LOG_LEVEL_ERROR = 3,
};

enum log_format {
        LOG_FORMAT_TEXT = 0,
        LOG_FORMAT_JSON = 1,
};

/* Set the minimum level written. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Set text or JSON-lines output. */
void log_set_format(enum log_format format);
enum log_format log_get_format(void);
/* Parse "debug|info|warn|error" / "text|json"; return 0 or -EINVAL. */
int log_level_from_string(const char *s, enum log_level *ret);
int log_format_from_string(const char *s, enum log_format *ret);

/* Write one record. In JSON mode the message is escaped into {"ts":..,
 * "level":..,"msg":..}. Never fails; drops the record on write errors. */
void log_write(enum log_level level, const char *fmt, ...) _printf_(2, 3);

#define log_debug(...)                                                                             \
        do {                                                                                       \
                if (log_get_level() <= LOG_LEVEL_DEBUG)                                            \
                        log_write(LOG_LEVEL_DEBUG, __VA_ARGS__);                                   \
        } while (0)
#define log_info(...) log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)
