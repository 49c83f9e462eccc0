/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The default network's host side, between network.c (start-up,
 * allocation, recovery) and the table: src/priv/nft.h (nftab_*), called in
 * process, or by warren-priv (priv/client.h priv_nft_*) with --privsep. */

#include <stdbool.h>
#include <stdint.h>

#include "basic/err.h"
#include "priv/nft.h"
#include "sandbox/netaddr.h"
#include "sandbox/network.h"

_Static_assert((int) NFTAB_POLICED == (int) SBX_NET_POLICED &&
                       (int) NFTAB_OPEN == (int) SBX_NET_OPEN &&
                       (int) NFTAB_PASS == (int) SBX_NET_PASS,
               "one numbering of the classes");
_Static_assert(SBX_NET_PREFIX_MIN == PRIV_NFT_PREFIX_MIN &&
                       SBX_NET_PREFIX_MAX == PRIV_NFT_PREFIX_MAX,
               "warren-priv accepts every range warrend does");
