/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The default network's host side, between network.c (start-up,
 * allocation, recovery) and nft.c (the table). */

#include <stdbool.h>
#include <stdint.h>

#include "basic/err.h"
#include "sandbox/netaddr.h"
#include "sandbox/network.h"

/* Replace the inet table `table` with warrend's rules for the sandbox
 * range `range` ("100.96.0.0/16"), in one transaction. 0 or -EIO with
 * nft's first error line in e. */
int sbx_nft_table_apply(const char *table, const char *range, uint16_t proxy_port,
                        uint16_t dns_port, struct wr_err *e);

/* Move addr (dotted quad) from the set of class `from` to that of `to`
 * (SBX_NET_OPEN: open4, SBX_NET_PASS: pass4, SBX_NET_POLICED: none), in
 * one transaction. 0 or -EIO. */
int sbx_nft_class_set(const char *table, const char *addr, enum sbx_net_class from,
                      enum sbx_net_class to, struct wr_err *e);

/* The names of every inet table (NULL-terminated, malloc'd, the caller
 * frees each and the vector). Returns how many, or -EIO / -ENOMEM. */
int sbx_nft_tables(char ***ret, struct wr_err *e);

/* Delete the inet table `table` (none: fine). 0 or -EIO. */
int sbx_nft_table_remove(const char *table, struct wr_err *e);
