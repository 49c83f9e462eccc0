/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The API's side of a sandbox spec: a CreateSandboxRequest turned into a
 * struct sbx_spec (sandbox/sandbox.h). */

#include "basic/err.h"
#include "warren/v1/sandboxes.pb-c.h"

struct store;
struct vol_manager;
struct sbx_spec;
struct sbx_exec_spec;

/* Validate req and build the spec it asks for: names, hostname, workdir,
 * entrypoint, resources → limits, lifetime, env (request env in order,
 * then whole secrets; stored secrets read from store in environment
 * envname, inline ones taken as sent), tags, volumes (bind mounts of the
 * volumes of envname in volumes, each mounted on the host first; NULL:
 * volumes answer UNIMPLEMENTED), and the request to keep with the row
 * (without inline secret values). Errors name the field and the fix:
 * -EINVAL (INVALID_ARGUMENT), -ENOENT (NOT_FOUND: a secret, a volume),
 * -EOPNOTSUPP (UNIMPLEMENTED: an option this warrend does not have yet),
 * -ENOMEM. On success *ret is the caller's (sbx_spec_free: it wipes the
 * secret values). */
int api_sandbox_spec(struct store *store, struct vol_manager *volumes, const char *envname,
                     const Warren__V1__CreateSandboxRequest *req, struct sbx_spec **ret,
                     struct wr_err *e);

/* The vectors an exec spec points into: argv (into the request) and env
 * as "K=V" strings, NULL-terminated, in one allocation. */
struct api_exec_vectors {
        char **argv, **env;
};

/* Free v; the environment strings are wiped first. */
void api_exec_vectors_free(struct api_exec_vectors *v);

/* Validate an ExecStart and describe it in *spec (borrowing from start and
 * v: keep both while spec is used; free v with api_exec_vectors_free).
 * -EINVAL with INVALID_ARGUMENT naming the field ("start.argv: ..."), or
 * -ENOMEM. What needs the sandbox (its user names, its workdir) is checked
 * by sbx_exec_start. */
int api_exec_start_spec(const Warren__V1__ExecStart *start, struct sbx_exec_spec *spec,
                        struct api_exec_vectors *v, struct wr_err *e);
