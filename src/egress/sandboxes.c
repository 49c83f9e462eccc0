/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox table: which sandbox (and policy) a source address belongs
 * to. Read by every proxy worker and the resolver, written by the control
 * socket's handler; a rwlock around an array of refcounted, immutable
 * entries. */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"

#define SB_MAX 4096

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct egress_sb *table[SB_MAX];
static unsigned n_table;

void egress_sb_unref(struct egress_sb *sb) {
        if (!sb)
                return;
        if (atomic_fetch_sub(&sb->ref, 1) == 1) {
                net_policy_free(sb->policy);
                if (sb->rules) {
                        net_rules_clear(sb->rules); /* wipes the secret values */
                        free(sb->rules);
                }
                free(sb);
        }
}

static struct net_addr norm(const struct net_addr *a) {
        struct net_addr n;
        if (a->family == AF_INET6 && a->bytes[10] == 0xff && a->bytes[11] == 0xff) {
                static const uint8_t z[10] = {0};
                if (memcmp(a->bytes, z, 10) == 0) {
                        net_addr_from_ipv4(&n, a->bytes + 12);
                        return n;
                }
        }
        return *a;
}

int egress_sb_set(struct egress_policy_msg *m, struct wr_err *e) {
        struct egress_sb *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return -ENOMEM;
        atomic_init(&sb->ref, 1);
        memcpy(sb->id, m->sandbox, sizeof(sb->id));
        sb->mode = m->mode;
        sb->n_addrs = m->n_addrs;
        for (size_t i = 0; i < m->n_addrs; i++)
                sb->addrs[i] = norm(&m->addrs[i]);
        sb->policy = m->policy;
        m->policy = NULL;
        sb->rules = m->rules;
        m->rules = NULL;

        pthread_rwlock_wrlock(&lock);
        unsigned slot = n_table;
        for (unsigned i = 0; i < n_table; i++) {
                if (strcmp(table[i]->id, sb->id) == 0) {
                        slot = i;
                        continue;
                }
                for (size_t a = 0; a < table[i]->n_addrs; a++)
                        for (size_t b = 0; b < sb->n_addrs; b++)
                                if (net_addr_equal(&table[i]->addrs[a], &sb->addrs[b])) {
                                        char t[NET_ADDR_STR_MAX];
                                        pthread_rwlock_unlock(&lock);
                                        err_set(e, -EEXIST, "address %s belongs to sandbox %s",
                                                net_addr_format(&sb->addrs[b], t), table[i]->id);
                                        egress_sb_unref(sb);
                                        return -EEXIST;
                                }
        }
        if (slot == SB_MAX) {
                pthread_rwlock_unlock(&lock);
                egress_sb_unref(sb);
                return err_set(e, -ENOSPC, "more than %d sandboxes", SB_MAX);
        }
        struct egress_sb *old = slot < n_table ? table[slot] : NULL;
        table[slot] = sb;
        if (slot == n_table)
                n_table++;
        pthread_rwlock_unlock(&lock);
        egress_sb_unref(old);
        return 0;
}

int egress_sb_del(const char *id) {
        struct egress_sb *old = NULL;
        pthread_rwlock_wrlock(&lock);
        for (unsigned i = 0; i < n_table; i++)
                if (strcmp(table[i]->id, id) == 0) {
                        old = table[i];
                        table[i] = table[--n_table];
                        table[n_table] = NULL;
                        break;
                }
        pthread_rwlock_unlock(&lock);
        if (!old)
                return -ENOENT;
        egress_sb_unref(old);
        return 0;
}

struct egress_sb *egress_sb_lookup(const struct net_addr *src) {
        struct net_addr a = norm(src);
        struct egress_sb *found = NULL;
        pthread_rwlock_rdlock(&lock);
        for (unsigned i = 0; i < n_table && !found; i++)
                for (size_t k = 0; k < table[i]->n_addrs; k++)
                        if (net_addr_equal(&table[i]->addrs[k], &a)) {
                                found = table[i];
                                atomic_fetch_add(&found->ref, 1);
                                break;
                        }
        pthread_rwlock_unlock(&lock);
        return found;
}

unsigned egress_sb_count(void) {
        pthread_rwlock_rdlock(&lock);
        unsigned n = n_table;
        pthread_rwlock_unlock(&lock);
        return n;
}
