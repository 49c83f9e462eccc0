/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared between the API files; not for other modules. */

#include "api/api.h"

/* warren.v1.Sandboxes/Exec (exec.c), registered by api_sandboxes_register. */
extern const struct rpc_method api_exec_method;
/* warren.v1.Sandboxes/Tunnel (tunnel.c), registered by api_sandboxes_register. */
extern const struct rpc_method api_tunnel_method;

/* warren.v1.Sandboxes/ListProcesses (exec.c), registered next to Exec. */
extern const struct rpc_method api_list_processes_method;
