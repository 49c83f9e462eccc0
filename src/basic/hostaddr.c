/* SPDX-License-Identifier: Apache-2.0 */
/* The host's own addresses (hostaddr.h). */
#include "basic/hostaddr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <string.h>
#include <sys/socket.h>

size_t host_addrs_list(char addrs[][INET6_ADDRSTRLEN], size_t max, const char *skip_prefix) {
        struct ifaddrs *ifa = NULL;
        size_t n = 0, pl = strlen(skip_prefix);
        if (getifaddrs(&ifa) < 0)
                return 0;
        for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
                if (!i->ifa_addr || strncmp(i->ifa_name, skip_prefix, pl) == 0)
                        continue;
                int fam = i->ifa_addr->sa_family;
                const void *a =
                        fam == AF_INET
                                ? (const void *) &((struct sockaddr_in *) i->ifa_addr)->sin_addr
                        : fam == AF_INET6
                                ? (const void *) &((struct sockaddr_in6 *) i->ifa_addr)->sin6_addr
                                : NULL;
                if (a && inet_ntop(fam, a, addrs[n], INET6_ADDRSTRLEN))
                        n++;
        }
        freeifaddrs(ifa);
        return n;
}
