/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Docker-compatible image references (the grammar of
 * github.com/distribution/reference):
 *
 *   reference := name [ ":" tag ] [ "@" digest ]
 *   name      := [ domain "/" ] path-component ( "/" path-component )*
 *   domain    := host [ ":" port ]      host: DNS labels, or "[v6addr]"
 *   path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
 *   tag       := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
 *   digest    := "sha256:" 64 lower-case hex digits
 *
 * The first component is a domain when it contains '.' or ':', is
 * "localhost", or holds upper case; otherwise the domain is docker.io, and
 * a single-component docker.io path gets "library/" in front.
 * "index.docker.io" is docker.io. A reference with neither tag nor digest
 * gets the tag "latest". Pure code: no I/O, no allocation (fuzzed by
 * tests/fuzz/fuzz-ref.c). */

#include <stdbool.h>
#include <stddef.h>

#include "basic/err.h"

#define IMG_REF_DOCKER_HUB "docker.io"
#define IMG_REF_NAME_MAX 255 /* domain + "/" + path, as in distribution */

struct img_ref {
        char domain[IMG_REF_NAME_MAX + 1]; /* "docker.io", "127.0.0.1:5000", "[::1]:5000" */
        char path[IMG_REF_NAME_MAX + 1];   /* "library/ubuntu" */
        char tag[129];                     /* "" only when a digest is given alone */
        char digest[72];                   /* "" or "sha256:<64 hex>" */
};

/* Parse and normalize s into *ret. -EINVAL (INVALID_ARGUMENT, client
 * fault) with a message naming what is wrong ("invalid reference
 * \"Ubuntu\": repository name must be lowercase"). */
int img_ref_parse(const char *s, struct img_ref *ret, struct wr_err *e);

/* The fully-qualified form: "docker.io/library/ubuntu:latest",
 * "127.0.0.1:5000/a/b:v1@sha256:...". Truncated to outsz (>= 512 always
 * fits). Returns the length it needed. */
size_t img_ref_format(const struct img_ref *r, char *out, size_t outsz);

/* The familiar repository ("ubuntu" for docker.io/library/ubuntu,
 * "user/repo" for docker.io/user/repo, "host:5000/repo" otherwise) into
 * out (>= 512 fits). */
size_t img_ref_familiar_repo(const struct img_ref *r, char *out, size_t outsz);

/* The local image name a pull stores ("ubuntu:latest",
 * "127.0.0.1:5000/a:v1"): familiar repo + ":" + tag. Digest-only
 * references have no name: returns -ENOENT (out = ""). */
int img_ref_local_name(const struct img_ref *r, char *out, size_t outsz);

/* The manifest reference to ask the registry for: the digest when given
 * (it pins the content even when a tag is given too), else the tag. */
const char *img_ref_manifest_ref(const struct img_ref *r);

/* Host (and port) to contact for a domain: "registry-1.docker.io" for
 * docker.io, the domain itself otherwise. */
const char *img_ref_api_host(const char *domain);

/* True for domains on loopback: "localhost", 127.0.0.0/8, "[::1]",
 * each with or without a port. Such registries are spoken to over plain
 * http unless configured otherwise (as Docker does). */
bool img_ref_domain_is_loopback(const char *domain);
