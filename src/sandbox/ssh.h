/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Managed SSH (docs/network.md "Managed SSH"): a sandbox's destinations
 * ("alias" -> host, user, port, pinned host keys, a private key from the
 * secrets store). The keys go into one ssh-agent per sandbox that runs
 * beside it (runtime.h: rt_sandbox_spawn_beside) as an unprivileged user;
 * the sandbox gets the agent's directory read-only at SBX_SSH_DIR, and a
 * /root/.ssh/config and known_hosts naming the destinations. The private
 * keys are never in the sandbox's files, environment or memory.
 *
 * The pure half (ssh-config.c: checks and the files' text) is unit tested
 * and fuzzed; the agent half (ssh.c) lives in the sandbox module. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

/* Where the sandbox sees the agent's directory, its socket, and the env
 * variable naming it. */
#define SBX_SSH_DIR "/run/warren/ssh"
#define SBX_SSH_SOCK SBX_SSH_DIR "/agent.sock"
#define SBX_SSH_CONFIG "/root/.ssh/config"
#define SBX_SSH_KNOWN_HOSTS "/root/.ssh/known_hosts"

#define SBX_SSH_DESTS_MAX 16
#define SBX_SSH_HOST_KEYS_MAX 16
#define SBX_SSH_ALIAS_MAX 64
#define SBX_SSH_USER_MAX 32
#define SBX_SSH_HOST_KEY_MAX 8192   /* "type base64" of one key (RSA 16384 fits) */
#define SBX_SSH_KEY_MAX (64u << 10) /* a private key's text */

struct sbx_ssh_dest {
        char *alias;      /* the Host alias the sandbox connects to */
        char *host;       /* HostName as given (a name or an IP literal), checked */
        char *user;       /* User ("root" when the request gave none) */
        uint16_t port;    /* 1..65535 */
        char **host_keys; /* pinned keys, "type base64" each; none = trust on first use */
        size_t n_host_keys;
        uint8_t *key; /* the private key (wiped when freed) */
        size_t key_len;
};

/* Free what d holds (the key wiped first) and zero it. */
void sbx_ssh_dest_clear(struct sbx_ssh_dest *d);

/* Checks, each -EINVAL with INVALID_ARGUMENT in e naming field (e.g.
 * "managed_ssh.github.username") and the fix:
 *  alias: 1-64 of [A-Za-z0-9._-], starting with a letter or digit (it is a
 *         Host pattern in ssh_config: no '*', '?', '!', spaces);
 *  user:  1-32 of [A-Za-z0-9._-], starting with a letter, digit or '_';
 *  host:  a hostname net_host_canon accepts, or an IP literal;
 *  port:  1..65535 (0 is taken as 22 by the caller). */
int sbx_ssh_alias_check(const char *field, const char *s, struct wr_err *e);
int sbx_ssh_user_check(const char *field, const char *s, struct wr_err *e);
int sbx_ssh_host_check(const char *field, const char *s, struct wr_err *e);

/* Parse one pinned host key as an OpenSSH public key line ("type base64
 * [comment]"; the comment is dropped) into *ret ("type base64", heap).
 * The type must be one OpenSSH knows for host keys (ssh-ed25519,
 * ecdsa-sha2-nistp256/384/521, ssh-rsa, rsa-sha2-256/512, and the sk-
 * and certificate forms), the base64 well formed and its decoded key
 * blob must start with the same type name. -EINVAL naming field. */
int sbx_ssh_host_key_parse(const char *field, const char *s, size_t len, char **ret,
                           struct wr_err *e);

/* A private key's text must look like one (a PEM or OpenSSH armour line
 * "-----BEGIN ... PRIVATE KEY-----"), at most SBX_SSH_KEY_MAX bytes; the
 * agent decides the rest. -EINVAL naming field, never quoting the key. */
int sbx_ssh_key_check(const char *field, const uint8_t *key, size_t len, struct wr_err *e);

/* The sandbox's /root/.ssh/config and known_hosts for dests (n >= 1):
 * one Host block per alias (HostName, User, Port, IdentityAgent
 * SBX_SSH_SOCK, HostKeyAlias = the alias, UserKnownHostsFile
 * SBX_SSH_KNOWN_HOSTS, StrictHostKeyChecking accept-new without pinned
 * keys (trust on first use, for the sandbox's life) or yes with them);
 * known_hosts lists the pinned keys under their alias. Heap strings in
 * *ret_config and *ret_known_hosts. -ENOMEM. */
int sbx_ssh_render(const struct sbx_ssh_dest *dests, size_t n, char **ret_config,
                   char **ret_known_hosts);
