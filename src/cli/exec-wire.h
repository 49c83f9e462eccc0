/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The output messages of an Exec stream read in place: the CLI writes a
 * chunk of stdout straight from the received message, without unpacking
 * (copying) it first. */

#include <stddef.h>
#include <stdint.h>

/* If msg (len bytes) is an ExecResponse that holds exactly stdout or
 * stderr output — one top-level field 2 or 3 whose ExecOutput has at most
 * one `data` and one `offset` and nothing else — set *stream (1 stdout, 2
 * stderr) and *data and *n (pointing inside msg), and return 1. Anything else (other
 * kinds, repeated or unknown fields, malformed input) returns 0: unpack
 * the message the usual way. Agrees with protobuf-c on every input it
 * accepts (the fuzz target fuzz-exec-output checks that). */
int cli_exec_output_parse(const uint8_t *msg, size_t len, int *stream, const uint8_t **data,
                          size_t *n);
