/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internals shared by the files of src/net: quoting hostile bytes for
 * error messages, ASCII character classes. Nothing here is exported to
 * other modules. */

#include <stdbool.h>
#include <stddef.h>

/* Room for a quoted excerpt of hostile input in an error message. */
#define NET_QUOTE_MAX 100

/* Write a printable, double-quoted excerpt of the len bytes at s into out
 * (NET_QUOTE_MAX bytes): printable ASCII as is, '"' and '\\' escaped,
 * every other byte as \xNN; cut with "..." when too long. Returns out, so
 * it can be used as a printf argument. */
const char *net_quote(const void *s, size_t len, char out[static NET_QUOTE_MAX]);

static inline bool net_is_digit(unsigned char c) {
        return c >= '0' && c <= '9';
}
static inline bool net_is_alpha(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static inline bool net_is_hex(unsigned char c) {
        return net_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static inline unsigned char net_lower(unsigned char c) {
        return (c >= 'A' && c <= 'Z') ? (unsigned char) (c + 32) : c;
}
