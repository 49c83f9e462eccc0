/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Remove dirfd/name and everything under it: any depth and width with a
 * constant number of fds, never following a symlink, never descending into
 * another mount (-EBUSY), directories without write/search permission
 * fixed up first. 0 when name is gone (or never was), else a negative
 * errno; what could be removed is removed either way. */
int rm_rf_at(int dirfd, const char *name);
