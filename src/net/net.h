/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The net module's public header: the egress policy's pure core (no I/O),
 * shared by warrend and the egress proxy. One concern per header:
 *   net/host.h    hostname canonicalisation, IP literals in every notation
 *   net/addr.h    addresses, CIDR blocks, port ranges, the built-in deny list
 *   net/policy.h  the policy model, its decision and its wire form
 *   net/sni.h     the TLS ClientHello reader
 *   net/http.h    the strict HTTP/1.1 request-head parser
 * The model, decision order and error messages: docs/network.md. */

#include "net/addr.h"
#include "net/host.h"
#include "net/http.h"
#include "net/policy.h"
#include "net/sni.h"
