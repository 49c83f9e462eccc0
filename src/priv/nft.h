/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warrend's nftables table for its sandbox range (nft.c): built from
 * fixed fields only (a table name that priv_nft_table_ok accepts, a range
 * as base and prefix, ports), never from a command string. warren-priv
 * carries out the NFT_* requests of priv-proto.h with it; warrend without
 * --privsep calls it in process (src/sandbox/network.c). Any thread: the
 * libnftables calls (apply, tables, remove) are serialized inside;
 * nftab_class_set talks nfnetlink directly and runs concurrently. */

#include <stdbool.h>
#include <stdint.h>

#include "basic/err.h"
#include "priv/priv-proto.h"

/* The host end of every sandbox veth starts with this (=
 * SBX_NET_PEER_PREFIX = PRIV_LINK_PREFIX): the rules match "wr*". */
#define NFTAB_PEER_PREFIX PRIV_LINK_PREFIX

/* Which set a sandbox's address is in (= enum sbx_net_class): none
 * (policed), open4, pass4. */
enum nftab_class { NFTAB_POLICED = 0, NFTAB_OPEN = 1, NFTAB_PASS = 2 };

/* Replace the inet table `table` with warrend's rules for the sandbox
 * range base/prefix (base in host byte order, no host bits), with the
 * egress redirects to proxy_port and dns_port (both 0: no warren-egress),
 * in one transaction. 0, -EINVAL (a field priv_nft_apply_check refuses)
 * or -EIO with nft's first error line in e. */
int nftab_table_apply(const char *table, uint32_t base, uint8_t prefix, uint16_t proxy_port,
                      uint16_t dns_port, struct wr_err *e);

/* Move addr (host byte order) from the set of class `from` to that of `to`
 * in one nfnetlink batch (~0.1 ms). 0, -EINVAL or -EIO. */
int nftab_class_set(const char *table, uint32_t addr, enum nftab_class from, enum nftab_class to,
                    struct wr_err *e);

/* The names of the inet tables that priv_nft_table_ok accepts (warren's;
 * NULL-terminated, malloc'd, the caller frees each and the vector).
 * Returns how many, or -EIO / -ENOMEM. */
int nftab_tables(char ***ret, struct wr_err *e);

/* Delete the inet table `table` (none: fine). 0, -EINVAL or -EIO. */
int nftab_table_remove(const char *table, struct wr_err *e);
