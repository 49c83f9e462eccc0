/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The API's side of a sandbox spec: a CreateSandboxRequest turned into a
 * struct sbx_spec (sandbox/sandbox.h). */

#include "basic/err.h"
#include "warren/v1/sandboxes.pb-c.h"

struct store;
struct sbx_spec;

/* Validate req and build the spec it asks for: names, hostname, workdir,
 * entrypoint, resources → limits, lifetime, env (request env in order,
 * then whole secrets; stored secrets read from store in environment
 * envname, inline ones taken as sent), tags, and the request to keep with
 * the row (without inline secret values). Errors name the field and the
 * fix: -EINVAL (INVALID_ARGUMENT), -ENOENT (NOT_FOUND: a secret),
 * -EOPNOTSUPP (UNIMPLEMENTED: an option this warrend does not have yet),
 * -ENOMEM. On success *ret is the caller's (sbx_spec_free: it wipes the
 * secret values). */
int api_sandbox_spec(struct store *store, const char *envname,
                     const Warren__V1__CreateSandboxRequest *req, struct sbx_spec **ret,
                     struct wr_err *e);
