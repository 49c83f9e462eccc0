/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the phase 4b tests (test-priv-upper*.c) share: a process in a user
 * namespace of the test's own, and a process's start time. Include after
 * <cmocka.h>; each fails the running test on error. */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A child in a user namespace of its own (ids 0..65535 = base..), parked
 * until killed; its pidfd in *pidfd. */
pid_t upper_test_userns_child(unsigned base, int *pidfd);

/* Field 22 of /proc/<pid>/stat. */
uint64_t upper_test_start_time(pid_t pid);

struct priv_target;
/* A target the decoders accept: "sb-1", pid 42, start time 9. */
void upper_test_target(struct priv_target *t);

/* The refusals of a {struct priv_target, flags, reserved} request
 * (UPPER_PACK, UPPER_SESSION) encoded in buf (n bytes, n_fds its right fd
 * count): each field of the target, flags, reserved; buf restored. */
void upper_test_target_refusals(uint8_t *buf, size_t n, size_t n_fds);
