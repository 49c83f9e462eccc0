/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The host's own addresses, as warren-egress's --deny-addr list (warrend in
 * process, src/sandbox/egress.c; warren-priv under --privsep,
 * src/priv/helpers.c). */

#include <netinet/in.h>
#include <stddef.h>

/* Up to max addresses (IPv4 and IPv6, text form) of every interface whose
 * name does not start with skip_prefix (the sandboxes' veths); how many. */
size_t host_addrs_list(char addrs[][INET6_ADDRSTRLEN], size_t max, const char *skip_prefix);
