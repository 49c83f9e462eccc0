/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Per-host request rules and credential placeholders (SECURITY.md egress
 * decisions 6-9; the seed's NetworkPolicy.Rule, Match, Matcher,
 * Transformer and add_credentials). Pure code: no I/O, no logging.
 *
 * warrend builds a struct net_rules from a policy's host_rules and the
 * sandbox's credentials (every entry checked, errors naming it), resolves
 * each placeholder's secret to its value, and sends the whole to
 * warren-egress (net_rules_serialize / net_rules_parse). For an
 * intercepted HTTP/1.1 request to host H the proxy then:
 *   1. takes the first rule of H whose match holds for the ORIGINAL
 *      request (net_rule_match: path, method, query and headers, every
 *      dimension set must match; a request that repeats a query or header
 *      key a rule matches on is refused);
 *   2. writes the head it sends upstream (net_request_rewrite): the
 *      rule's literal headers set (replacing any of the same name), then
 *      every placeholder of the rule's transforms - and of the credentials
 *      whose hosts match H - replaced in ordinary header values, including
 *      headers the workload sent: case-sensitive, at each position the
 *      leftmost occurrence and there the longest token, non-recursive (a
 *      value put in is not scanned again), an empty secret removes the
 *      token. Never in the request line, Host, Content-Length,
 *      Transfer-Encoding, Connection, the hop-by-hop headers (Keep-Alive,
 *      Proxy-Authenticate, Proxy-Authorization, TE, Trailer, Upgrade,
 *      Proxy-Connection) and the headers Connection names;
 *   3. with forward_url, sends it to that origin instead (dialed address,
 *      SNI and Host are the forward host's; the original path and query
 *      are appended to the forward URL's path).
 * A request matching no rule goes upstream unchanged except for the
 * credentials' placeholders (the host is allowed).
 *
 * Secret values live in this struct only as long as the policy does:
 * net_rules_free wipes them. They never contain CR, LF or NUL (refused
 * when built: they would split a header). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "net/host.h"
#include "net/http.h"
#include "net/policy.h"

#define NET_RULES_HOSTS_MAX 64       /* hosts with rules */
#define NET_RULES_PER_HOST_MAX 64    /* rules of one host */
#define NET_RULE_KV_MAX 32           /* query/header matchers of one rule */
#define NET_RULE_TRANSFORMS_MAX 16   /* transforms of one rule */
#define NET_RULE_SET_MAX 32          /* literal headers of one transform */
#define NET_PLACEHOLDERS_MAX 64      /* placeholders of one transform / credential */
#define NET_CREDENTIALS_MAX 64       /* add_credentials entries */
#define NET_PLACEHOLDER_MAX 256      /* length of a token */
#define NET_SECRET_VALUE_MAX 16384   /* length of a substituted value */
#define NET_MATCHER_MAX 4096         /* length of a matcher's string or regex */
#define NET_REGEX_MATCH_LIMIT 100000 /* PCRE2 match limit (backtracking steps) */
#define NET_FORWARD_PATH_MAX 2048

enum net_matcher_kind {
        NET_MATCH_ANY = 0,    /* not set: matches everything */
        NET_MATCH_EXACT = 1,  /* the whole value */
        NET_MATCH_PREFIX = 2, /* starts_with */
        NET_MATCH_REGEX = 3,  /* PCRE2, anchored at both ends */
};

struct net_matcher {
        enum net_matcher_kind kind;
        char *s; /* EXACT, PREFIX: the string; REGEX: the pattern */
        size_t len;
        void *re; /* REGEX: the compiled pcre2_code */
};

struct net_kv_matcher {
        char *name; /* query: exact key; header: compared case-insensitively */
        struct net_matcher m;
};

struct net_header_set {
        char *name;
        char *value;
};

struct net_placeholder {
        char *token; /* non-empty */
        size_t token_len;
        uint8_t *value; /* the secret's value (wiped), may be empty */
        size_t len;
};

struct net_transform {
        struct net_header_set *set;
        size_t n_set;
        struct net_placeholder *ph;
        size_t n_ph;
};

struct net_forward {
        bool tls;                            /* https */
        struct net_host host;                /* canonical */
        uint16_t port;                       /* explicit or the scheme's */
        char path[NET_FORWARD_PATH_MAX + 1]; /* without a trailing '/'; "" for none */
};

struct net_rule {
        struct net_matcher path;
        char *method; /* NULL: any */
        struct net_kv_matcher *query;
        size_t n_query;
        struct net_kv_matcher *headers;
        size_t n_headers;
        struct net_transform *tf;
        size_t n_tf;
        bool has_forward;
        struct net_forward fwd;
};

struct net_host_rules {
        struct net_host_pattern host; /* exact or *.suffix (not "*") */
        struct net_rule *rules;
        size_t n_rules;
};

/* add_credentials: placeholders substituted in every intercepted request
 * to hosts matching one of the patterns. */
struct net_credential {
        struct net_host_pattern *hosts;
        size_t n_hosts;
        struct net_placeholder ph; /* token -> value */
};

/* Resource detectors (the seed's ResourceDetector): what the proxy
 * records from intercepted traffic. GITHUB_PULLS: NET_GITHUB_API_HOST is
 * intercepted; each POST /repos/{owner}/{repo}/pulls answered 201 yields
 * the response's top-level html_url. */
#define NET_DETECT_GITHUB_PULLS (1u << 0)
#define NET_DETECT_ALL NET_DETECT_GITHUB_PULLS
#define NET_GITHUB_API_HOST "api.github.com"

/* A managed SSH destination of a sandbox with a policy (SECURITY.md
 * decision 10, the seed's rule): its name resolves for the sandbox even
 * when allowed_hosts does not list it, and raw TCP to one of its resolved
 * addresses on its port is allowed even inside denied_routes. Nothing
 * else is opened by it. */
#define NET_SSH_DESTS_MAX 16
struct net_ssh_dest {
        struct net_host host; /* canonical: a name or an address */
        uint16_t port;
};

struct net_rules {
        struct net_host_rules *hosts;
        size_t n_hosts;
        struct net_credential *creds;
        size_t n_creds;
        uint32_t detectors; /* NET_DETECT_* */
        struct net_ssh_dest ssh[NET_SSH_DESTS_MAX];
        size_t n_ssh;
};

/* ---- building (warrend; errors INVALID_ARGUMENT naming field) ---- */

/* Set m from a matcher of kind with the string s (len bytes). REGEX is
 * compiled here (PCRE2, UTF off, anchored at both ends, match limit
 * NET_REGEX_MATCH_LIMIT); a pattern that does not compile is refused
 * with PCRE2's message. */
int net_matcher_set(struct net_matcher *m, enum net_matcher_kind kind, const char *s, size_t len,
                    const char *field, struct wr_err *e);

/* A header name (an HTTP token) a rule may set; names the proxy owns or
 * that frame the message (Host, Content-Length, Transfer-Encoding,
 * Connection, hop-by-hop headers) are refused. A value: visible ASCII,
 * SP, HTAB and obs-text, no CR/LF/NUL. */
int net_header_set_check(const char *name, const char *value, const char *field, struct wr_err *e);

/* A placeholder token: 1..NET_PLACEHOLDER_MAX visible ASCII characters (no
 * space, no ',', ';' or quote: it must sit inside one header value). A
 * secret value: no CR, LF or NUL, at most NET_SECRET_VALUE_MAX bytes. */
int net_placeholder_check(const char *token, const uint8_t *value, size_t len, const char *field,
                          struct wr_err *e);

/* Parse forward_url ("https://host[:port][/path]" or "http://..."; no
 * userinfo, query or fragment) into *ret. */
int net_forward_parse(const char *url, struct net_forward *ret, const char *field,
                      struct wr_err *e);

/* Free everything r holds (secret values wiped) and zero it. */
void net_rule_clear(struct net_rule *r);
void net_rules_clear(struct net_rules *rs);

/* ---- deciding (the proxy) ---- */

/* The rules of the host named by canonical name (the first entry whose
 * pattern matches: exact before *.suffix, longer suffix first), or NULL. */
const struct net_host_rules *net_rules_for_host(const struct net_rules *rs, const char *name);

/* True when name (canonical) is a managed SSH destination's name. */
bool net_rules_ssh_name(const struct net_rules *rs, const char *name);

/* The detectors (NET_DETECT_*) that apply to the host name. */
uint32_t net_rules_detects(const struct net_rules *rs, const char *name);

/* True when the host has rules, credentials or a detector: its TLS is
 * intercepted. */
bool net_rules_intercept(const struct net_rules *rs, const char *name);

/* Does rule r match the request h (parsed from buf)? 1 yes, 0 no,
 * -EBADMSG (refuse the request: it repeats a query or header key the rule
 * matches on; message in e). */
int net_rule_match(const struct net_rule *r, const struct net_http_head *h, struct wr_err *e);

/* Replace placeholders in in[0..n): the leftmost occurrence of any token,
 * there the longest, then go on after it (non-recursive). Writes to out
 * (cap bytes) and sets *out_len. -E2BIG when out is too small. ph[i] may
 * be NULL-token-free lists of n_ph entries from several sources (a rule's
 * transforms and the host's credentials): phs is an array of n_lists
 * lists. */
struct net_ph_list {
        const struct net_placeholder *ph;
        size_t n;
};
int net_placeholders_replace(const char *in, size_t n, const struct net_ph_list *lists,
                             size_t n_lists, char *out, size_t cap, size_t *out_len);

/* True when placeholders must never be replaced in a header of this name
 * (framing, routing and hop-by-hop; see above). Connection-nominated
 * names are checked by net_request_rewrite. */
bool net_header_protected(const char *name, size_t len);

/* Write the head sent upstream for request h (parsed from its head bytes)
 * to host_name (canonical; the rule's forward host when it has one) into
 * out (cap bytes, *out_len): the request line with an origin-form target
 * (forward path + original target) and the request's HTTP version, "Host: host_name[:port]" first,
 * the workload's headers minus Host and minus names the rule's transforms set, placeholders of rule
 * (may be NULL) and of the credentials matching cred_host replaced in ordinary values, then the
 * rule's literal headers (placeholders replaced there too), then the final CRLF. port: the upstream
 * port (omitted from Host when it is the scheme's default, tls says which). -E2BIG when out is too
 * small; -EBADMSG when a replaced value would hold CR/LF (cannot happen with checked secrets). */
int net_request_rewrite(const struct net_rules *rs, const struct net_rule *rule,
                        const struct net_http_head *h, const char *cred_host, const char *host_name,
                        uint16_t port, bool tls, char *out, size_t cap, size_t *out_len);

/* ---- the wire form (warrend -> warren-egress, in POLICY_SET) ---- */

/* Serialize rs into a heap buffer (*ret, *ret_len; secret values inside:
 * the caller wipes it after sending). -ENOMEM. */
int net_rules_serialize(const struct net_rules *rs, uint8_t **ret, size_t *ret_len);

/* Parse the wire form into *rs (every check of the building calls is made
 * again: the bytes are not trusted). -EBADMSG with a message in e. */
int net_rules_parse(const uint8_t *buf, size_t len, struct net_rules *rs, struct wr_err *e);
