/* SPDX-License-Identifier: Apache-2.0 */
/* bench/priv-nft WARREN_PRIV [N]: what --privsep adds to the nftables work
 * of a sandbox's life (docs/privsep.md, phase 3). Applies a table of its
 * own (warren_bench_<pid>, 100.127.255.224/28, the egress sets), then
 * moves one address policed -> open4 -> policed N times (default 500)
 * in process (nftab_class_set: one nfnetlink batch) and N times through a
 * warren-priv it starts (NFT_CLASS_SET), alternating in chunks of 50, and
 * prints p50/p99 of each; then the table apply itself both ways (10 each)
 * and a HELLO round trip. Removes its table. Needs root. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "priv/client.h"
#include "priv/nft.h"

static double now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, size_t n) {
        qsort(v, n, sizeof(*v), cmp);
        printf("  %-44s n=%zu p50 %8.1f us  p99 %8.1f us\n", what, n, v[n / 2],
               v[(size_t) ((double) n * 0.99)]);
}

#define BASE 0x647fffe0u /* 100.127.255.224/28 */
#define ADDR (BASE + 2)

int main(int argc, char **argv) {
        if (argc < 2) {
                fprintf(stderr, "usage: priv-nft WARREN_PRIV [N]\n");
                return 2;
        }
        size_t n = argc > 2 ? (size_t) atoi(argv[2]) : 500;
        if (n < 50)
                n = 50;
        char table[48], dir[] = "/tmp/warren-bench-priv.XXXXXX";
        snprintf(table, sizeof(table), "warren_bench_%d", (int) getpid());
        if (!mkdtemp(dir))
                return perror("mkdtemp"), 1;
        struct wr_err e = {0};
        struct priv_client *c = NULL;
        if (priv_client_new(argv[1], dir, &c, &e) < 0)
                return fprintf(stderr, "%s\n", e.msg), 1;
        double *inproc = calloc(n, sizeof(double)), *viapriv = calloc(n, sizeof(double));
        double ap_in[10], ap_priv[10], hello[200];
        int rc = 1;
        if (!inproc || !viapriv)
                goto out;
        for (int i = 0; i < 10; i++) {
                double t0 = now_us();
                if (nftab_table_apply(table, BASE, 28, 40001, 40002, &e) < 0)
                        goto fail;
                double t1 = now_us();
                if (priv_nft_table_apply(c, table, BASE, 28, 40001, 40002, &e) < 0)
                        goto fail;
                double t2 = now_us();
                ap_in[i] = t1 - t0;
                ap_priv[i] = t2 - t1;
        }
        for (size_t done = 0; done < n; done += 50) {
                for (size_t i = done; i < done + 50 && i < n; i++) {
                        double t0 = now_us();
                        if (nftab_class_set(table, ADDR, NFTAB_POLICED, NFTAB_OPEN, &e) < 0 ||
                            nftab_class_set(table, ADDR, NFTAB_OPEN, NFTAB_POLICED, &e) < 0)
                                goto fail;
                        inproc[i] = (now_us() - t0) / 2;
                }
                for (size_t i = done; i < done + 50 && i < n; i++) {
                        double t0 = now_us();
                        if (priv_nft_class_set(c, table, ADDR, NFTAB_POLICED, NFTAB_OPEN, &e) < 0 ||
                            priv_nft_class_set(c, table, ADDR, NFTAB_OPEN, NFTAB_POLICED, &e) < 0)
                                goto fail;
                        viapriv[i] = (now_us() - t0) / 2;
                }
        }
        for (size_t i = 0; i < 200; i++) {
                struct priv_hello_reply h;
                double t0 = now_us();
                if (priv_hello(c, &h, &e) < 0)
                        goto fail;
                hello[i] = now_us() - t0;
        }
        printf("bench/priv-nft: table inet %s, %zu class changes each way\n", table, n);
        report("NFT_CLASS_SET, in process", inproc, n);
        report("NFT_CLASS_SET, through warren-priv", viapriv, n);
        report("NFT_TABLE_APPLY, in process", ap_in, 10);
        report("NFT_TABLE_APPLY, through warren-priv", ap_priv, 10);
        report("HELLO round trip", hello, 200);
        rc = 0;
        goto out;
fail:
        fprintf(stderr, "bench/priv-nft: %s\n", e.msg);
out:
        if (nftab_table_remove(table, &e) < 0)
                fprintf(stderr, "bench/priv-nft: %s\n", e.msg);
        priv_client_free(c);
        free(inproc);
        free(viapriv);
        (void) rmdir(dir);
        return rc;
}
