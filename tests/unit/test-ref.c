/* SPDX-License-Identifier: Apache-2.0 */
/* Image references (src/image/ref.c) and the WWW-Authenticate parser
 * (src/image/registry.c): tables of good and bad inputs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "image/pull.h"
#include "image/ref.h"
#include "image/registry.h"

#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct good {
        const char *in;
        const char *full;  /* img_ref_format */
        const char *local; /* img_ref_local_name, NULL = none */
};

static const struct good goods[] = {
        {"ubuntu", "docker.io/library/ubuntu:latest", "ubuntu:latest"},
        {"ubuntu:22.04", "docker.io/library/ubuntu:22.04", "ubuntu:22.04"},
        {"python:3.12-slim", "docker.io/library/python:3.12-slim", "python:3.12-slim"},
        {"node:25-trixie-slim", "docker.io/library/node:25-trixie-slim", "node:25-trixie-slim"},
        {"library/ubuntu", "docker.io/library/ubuntu:latest", "ubuntu:latest"},
        {"docker.io/ubuntu", "docker.io/library/ubuntu:latest", "ubuntu:latest"},
        {"docker.io/library/ubuntu:latest", "docker.io/library/ubuntu:latest", "ubuntu:latest"},
        {"index.docker.io/library/busybox", "docker.io/library/busybox:latest", "busybox:latest"},
        {"user/repo", "docker.io/user/repo:latest", "user/repo:latest"},
        {"user/repo:v1", "docker.io/user/repo:v1", "user/repo:v1"},
        {"user/a/b/c:t", "docker.io/user/a/b/c:t", "user/a/b/c:t"},
        {"registry:5000/repo:tag", "registry:5000/repo:tag", "registry:5000/repo:tag"},
        {"registry.example/api:v1", "registry.example/api:v1", "registry.example/api:v1"},
        {"Registry.Example/api", "Registry.Example/api:latest", "Registry.Example/api:latest"},
        {"localhost/repo", "localhost/repo:latest", "localhost/repo:latest"},
        {"localhost:5000/a/b", "localhost:5000/a/b:latest", "localhost:5000/a/b:latest"},
        {"127.0.0.1:5000/test/multi:v1", "127.0.0.1:5000/test/multi:v1",
         "127.0.0.1:5000/test/multi:v1"},
        {"[::1]:5000/repo", "[::1]:5000/repo:latest", "[::1]:5000/repo:latest"},
        {"library/" H64, "docker.io/library/" H64 ":latest", "library/" H64 ":latest"},
        {"docker.io/cker.io/r", "docker.io/cker.io/r:latest", "docker.io/cker.io/r:latest"},
        {"docker.io/localhost/r", "docker.io/localhost/r:latest", "docker.io/localhost/r:latest"},
        {"repo@sha256:" H64, "docker.io/library/repo@sha256:" H64, NULL},
        {"repo:tag@sha256:" H64, "docker.io/library/repo:tag@sha256:" H64, "repo:tag"},
        {"host:1/r@sha256:" H64, "host:1/r@sha256:" H64, NULL},
        {"a_b__c-d---e.f:T_1.x-y", "docker.io/library/a_b__c-d---e.f:T_1.x-y",
         "a_b__c-d---e.f:T_1.x-y"},
        {"my-reg.local:443/team/app:_x", "my-reg.local:443/team/app:_x",
         "my-reg.local:443/team/app:_x"},
};

static void test_good(void **state) {
        for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
                struct img_ref r;
                struct wr_err e = {0};
                int k = img_ref_parse(goods[i].in, &r, &e);
                if (k < 0)
                        fail_msg("%s: %s", goods[i].in, e.msg);
                char full[600], local[600];
                img_ref_format(&r, full, sizeof(full));
                assert_string_equal(full, goods[i].full);
                k = img_ref_local_name(&r, local, sizeof(local));
                if (goods[i].local) {
                        assert_int_equal(k, 0);
                        assert_string_equal(local, goods[i].local);
                } else {
                        assert_int_equal(k, -ENOENT);
                }
        }
}

struct bad {
        const char *in;
        const char *why; /* substring of the message */
};

static const struct bad bads[] = {
        {"", "empty"},
        {"Ubuntu", "lowercase"},
        {"user/Repo", "lowercase"},
        {"repo:", "empty tag"},
        {"repo:-x", "invalid tag"},
        {"repo:.x", "invalid tag"},
        {"repo:a/b", "malformed registry port"}, /* "repo:a" is a host */
        {"a//b", "empty path component"},
        {"/a", "empty path component"},
        {"a/", "empty path component"},
        {"-a", "start and end"},
        {"a-", "start and end"},
        {"a..b", "invalid character"},
        {"a___b", "invalid character"},
        {"a$b", "invalid character"},
        {"a b", "invalid character"},
        {"a:b:c", "invalid tag"},
        {"repo@sha256:123", "malformed digest"},
        {"repo@sha256:" H64 "0", "malformed digest"},
        {"repo@sha512:" H64, "unsupported digest algorithm"},
        {"repo@" H64, "malformed digest"},
        {"repo@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
         "lower-case"},
        {"@sha256:" H64, "missing repository"},
        {":tag", "missing repository"},
        {"host:99999/r", "port out of range"},
        {"host:/r", "malformed registry port"},
        {"host:12a/r", "malformed registry port"},
        {"-host.x/r", "malformed registry host"},
        {"ho_st.x/r", "malformed registry host"},
        {"[zz]:1/r", "IPv6"},
        {H64, "image ids"},
};

static void test_bad(void **state) {
        for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
                struct img_ref r;
                struct wr_err e = {0};
                int k = img_ref_parse(bads[i].in, &r, &e);
                if (k >= 0) {
                        char full[600];
                        img_ref_format(&r, full, sizeof(full));
                        fail_msg("\"%s\" was accepted as %s", bads[i].in, full);
                }
                assert_int_equal(k, -EINVAL);
                assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
                if (!strstr(e.msg, bads[i].why))
                        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", bads[i].in, e.msg,
                                 bads[i].why);
                assert_non_null(strstr(e.msg, "invalid reference"));
        }
}

static void test_long_names(void **state) {
        char name[400], tag[200];
        struct img_ref r;
        /* 255 characters of name is the limit (domain + path) */
        memset(name, 'a', 255);
        name[255] = '\0';
        assert_int_equal(img_ref_parse(name, &r, NULL), -EINVAL); /* + "docker.io/library/" */
        memcpy(name, "host.x/", 7);
        assert_int_equal(img_ref_parse(name, &r, NULL), 0);
        name[255] = 'a';
        name[256] = '\0';
        assert_int_equal(img_ref_parse(name, &r, NULL), -EINVAL);
        /* tags: 128 ok, 129 not */
        memset(tag, 'x', 128);
        tag[128] = '\0';
        snprintf(name, sizeof(name), "r:%s", tag);
        assert_int_equal(img_ref_parse(name, &r, NULL), 0);
        snprintf(name, sizeof(name), "r:%sx", tag);
        assert_int_equal(img_ref_parse(name, &r, NULL), -EINVAL);
}

static void test_parts(void **state) {
        struct img_ref r;
        assert_int_equal(img_ref_parse("ubuntu", &r, NULL), 0);
        assert_string_equal(r.domain, "docker.io");
        assert_string_equal(r.path, "library/ubuntu");
        assert_string_equal(img_ref_api_host(r.domain), "registry-1.docker.io");
        assert_string_equal(img_ref_manifest_ref(&r), "latest");
        assert_int_equal(img_ref_parse("h:1/a:t@sha256:" H64, &r, NULL), 0);
        assert_string_equal(img_ref_manifest_ref(&r), "sha256:" H64); /* digest wins */
        assert_string_equal(img_ref_api_host(r.domain), "h:1");
        char repo[600];
        img_ref_familiar_repo(&r, repo, sizeof(repo));
        assert_string_equal(repo, "h:1/a");
}

static void test_loopback(void **state) {
        const char *yes[] = {"localhost",    "localhost:5000", "127.0.0.1", "127.0.0.1:5000",
                             "127.1.2.3:80", "[::1]",          "[::1]:5000"};
        const char *no[] = {"docker.io",         "10.0.0.1:5000", "128.0.0.1",  "localhost.example",
                            "127.0.0.1.example", "[::2]:5000",    "127.0.0.256"};
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
                if (!img_ref_domain_is_loopback(yes[i]))
                        fail_msg("%s should be loopback", yes[i]);
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
                if (img_ref_domain_is_loopback(no[i]))
                        fail_msg("%s should not be loopback", no[i]);
}

static void test_local_name(void **state) {
        char out[512];
        struct wr_err e = {0};
        assert_int_equal(img_pull_local_name("docker.io/library/alpine", out, sizeof(out), &e), 0);
        assert_string_equal(out, "alpine:latest");
        assert_int_equal(img_pull_local_name("a@sha256:" H64, out, sizeof(out), &e), -ENOENT);
        assert_int_equal(img_pull_local_name("A", out, sizeof(out), &e), -EINVAL);
}

static void test_challenge(void **state) {
        struct img_reg_challenge c;
        assert_int_equal(img_reg_challenge_parse("Bearer realm=\"https://auth.docker.io/token\","
                                                 "service=\"registry.docker.io\","
                                                 "scope=\"repository:library/ubuntu:pull\"",
                                                 &c),
                         0);
        assert_string_equal(c.scheme, "bearer");
        assert_string_equal(c.realm, "https://auth.docker.io/token");
        assert_string_equal(c.service, "registry.docker.io");
        assert_string_equal(c.scope, "repository:library/ubuntu:pull");
        /* case, spaces, unquoted values, unknown keys, escaped quotes */
        assert_int_equal(img_reg_challenge_parse("  bearer  Realm=http://t/x , error=\"bad\\\"q\","
                                                 " service=svc",
                                                 &c),
                         0);
        assert_string_equal(c.realm, "http://t/x");
        assert_string_equal(c.service, "svc");
        assert_string_equal(c.scope, "");
        assert_int_equal(img_reg_challenge_parse("Basic realm=\"Registry Realm\"", &c), 0);
        assert_string_equal(c.scheme, "basic");
        assert_string_equal(c.realm, "Registry Realm");
        /* refused */
        assert_int_equal(img_reg_challenge_parse("", &c), -EINVAL);
        assert_int_equal(img_reg_challenge_parse("Digest realm=\"x\"", &c), -EINVAL);
        assert_int_equal(img_reg_challenge_parse("Bearer service=\"x\"", &c), -EINVAL);
        assert_int_equal(img_reg_challenge_parse("Bearer realm=\"unterminated", &c), -EINVAL);
        assert_int_equal(img_reg_challenge_parse("Bearer realm", &c), -EINVAL);
        char big[3000];
        snprintf(big, sizeof(big), "Bearer realm=\"%02000d\"", 1);
        assert_int_equal(img_reg_challenge_parse(big, &c), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good),       cmocka_unit_test(test_bad),
                cmocka_unit_test(test_long_names), cmocka_unit_test(test_parts),
                cmocka_unit_test(test_loopback),   cmocka_unit_test(test_local_name),
                cmocka_unit_test(test_challenge),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
