/* SPDX-License-Identifier: Apache-2.0 */
/* YAML (one kubeconfig document) into a jansson tree: yaml.h. */
#include "k8s/kubeyaml.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct frame {
        json_t *node; /* object or array (borrowed: its parent or root owns it) */
        char *key;    /* objects: the key read, waiting for its value; NULL: expecting a key */
};

struct reader {
        struct frame stack[K8S_YAML_DEPTH_MAX];
        size_t depth;
        json_t *root;
        struct wr_err *e;
};

static int fail(struct reader *rd, const yaml_event_t *ev, int code, const char *what) {
        return err_set(rd->e, code, "YAML line %zu: %s", (size_t) ev->start_mark.line + 1, what);
}

static bool plain_is(const char *v, const char *lower, const char *title, const char *upper) {
        return !strcmp(v, lower) || !strcmp(v, title) || !strcmp(v, upper);
}

/* A decimal integer that fits int64, nothing else. */
static bool parse_int(const char *v, json_int_t *ret) {
        const char *p = v;
        if (*p == '-' || *p == '+')
                p++;
        if (!*p || strspn(p, "0123456789") != strlen(p))
                return false;
        errno = 0;
        char *end;
        long long n = strtoll(v, &end, 10);
        if (errno || *end)
                return false;
        *ret = (json_int_t) n;
        return true;
}

static bool tag_ok(const yaml_char_t *tag) {
        if (!tag)
                return true;
        const char *t = (const char *) tag;
        return !strcmp(t, "!") || !strcmp(t, YAML_STR_TAG) || !strcmp(t, YAML_MAP_TAG) ||
               !strcmp(t, YAML_SEQ_TAG);
}

static json_t *scalar(const yaml_event_t *ev) {
        const char *v = (const char *) ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag;
        if (plain) {
                json_int_t i;
                if (plain_is(v, "true", "True", "TRUE"))
                        return json_true();
                if (plain_is(v, "false", "False", "FALSE"))
                        return json_false();
                if (n == 0 || !strcmp(v, "~") || plain_is(v, "null", "Null", "NULL"))
                        return json_null();
                if (parse_int(v, &i))
                        return json_integer(i);
        }
        return json_stringn(v, n);
}

/* Give value (a new reference) to the innermost container, or make it the
 * root. Takes the reference in every case. */
static int place(struct reader *rd, const yaml_event_t *ev, json_t *value) {
        if (!value)
                return fail(rd, ev, -ENOMEM, "out of memory");
        if (rd->depth == 0) {
                if (rd->root) {
                        json_decref(value);
                        return fail(rd, ev, -EINVAL, "more than one root node");
                }
                rd->root = value;
                return 0;
        }
        struct frame *f = &rd->stack[rd->depth - 1];
        if (json_is_array(f->node))
                return json_array_append_new(f->node, value) < 0
                               ? fail(rd, ev, -ENOMEM, "out of memory")
                               : 0;
        /* an object: value is the one for f->key */
        char *key = f->key;
        f->key = NULL;
        if (json_object_get(f->node, key)) {
                json_decref(value);
                int r = fail(rd, ev, -EINVAL, "a key appears twice in one mapping");
                free(key);
                return r;
        }
        int r = json_object_set_new(f->node, key, value) < 0
                        ? fail(rd, ev, -EINVAL, "a mapping key is not valid UTF-8")
                        : 0;
        free(key);
        return r;
}

static int on_event(struct reader *rd, const yaml_event_t *ev, bool *done) {
        struct frame *top = rd->depth ? &rd->stack[rd->depth - 1] : NULL;
        bool want_key = top && json_is_object(top->node) && !top->key;
        switch (ev->type) {
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT:
                return 0;
        case YAML_DOCUMENT_START_EVENT:
                return rd->root ? fail(rd, ev, -EINVAL,
                                       "a second document (a kubeconfig is one document)")
                                : 0;
        case YAML_STREAM_END_EVENT:
                *done = true;
                return 0;
        case YAML_ALIAS_EVENT:
                return fail(rd, ev, -EINVAL, "aliases (*name) are not supported");
        case YAML_SCALAR_EVENT:
                if (ev->data.scalar.anchor)
                        return fail(rd, ev, -EINVAL, "anchors (&name) are not supported");
                if (!tag_ok(ev->data.scalar.tag))
                        return fail(rd, ev, -EINVAL, "a tag other than !!str, !!map, !!seq");
                if (want_key) {
                        if (strlen((const char *) ev->data.scalar.value) != ev->data.scalar.length)
                                return fail(rd, ev, -EINVAL, "a mapping key holds a NUL byte");
                        top->key = strdup((const char *) ev->data.scalar.value);
                        return top->key ? 0 : fail(rd, ev, -ENOMEM, "out of memory");
                }
                return place(rd, ev, scalar(ev));
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
                bool map = ev->type == YAML_MAPPING_START_EVENT;
                const yaml_char_t *anchor =
                        map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
                const yaml_char_t *tag =
                        map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag;
                if (anchor)
                        return fail(rd, ev, -EINVAL, "anchors (&name) are not supported");
                if (!tag_ok(tag))
                        return fail(rd, ev, -EINVAL, "a tag other than !!str, !!map, !!seq");
                if (want_key)
                        return fail(rd, ev, -EINVAL, "a mapping key must be a scalar");
                if (rd->depth == K8S_YAML_DEPTH_MAX)
                        return fail(rd, ev, -EINVAL, "nested too deep");
                json_t *c = map ? json_object() : json_array();
                if (!c)
                        return fail(rd, ev, -ENOMEM, "out of memory");
                json_incref(c); /* one for the tree, one while it is on the stack */
                int r = place(rd, ev, c);
                if (r < 0) {
                        json_decref(c);
                        return r;
                }
                rd->stack[rd->depth++] = (struct frame){.node = c};
                return 0;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
                if (!top)
                        return fail(rd, ev, -EINVAL, "unbalanced end of a collection");
                /* libyaml never ends a mapping between a key and its value */
                free(top->key);
                json_decref(top->node);
                rd->depth--;
                return 0;
        case YAML_NO_EVENT:
        default:
                return fail(rd, ev, -EINVAL, "unexpected YAML event");
        }
}

json_t *k8s_yaml_load(const char *text, size_t len, struct wr_err *e) {
        if (len > K8S_YAML_BYTES_MAX) {
                err_set(e, -EINVAL, "YAML: larger than %u bytes", K8S_YAML_BYTES_MAX);
                return NULL;
        }
        yaml_parser_t parser;
        if (!yaml_parser_initialize(&parser)) {
                err_set(e, -ENOMEM, "YAML: out of memory");
                return NULL;
        }
        yaml_parser_set_input_string(&parser, (const unsigned char *) text, len);
        struct reader rd = {.e = e};
        int r = 0;
        for (bool done = false; !done && r >= 0;) {
                yaml_event_t ev;
                if (!yaml_parser_parse(&parser, &ev)) {
                        r = err_set(e, -EINVAL, "YAML line %zu: %s",
                                    (size_t) parser.problem_mark.line + 1,
                                    parser.problem ? parser.problem : "parse error");
                        break;
                }
                r = on_event(&rd, &ev, &done);
                if (ev.type == YAML_SCALAR_EVENT && ev.data.scalar.value)
                        explicit_bzero(ev.data.scalar.value, ev.data.scalar.length);
                yaml_event_delete(&ev);
        }
        /* the reader's copies of the text (a kubeconfig holds keys and
         * tokens): libyaml frees them without clearing */
        if (parser.raw_buffer.start)
                explicit_bzero(parser.raw_buffer.start,
                               (size_t) (parser.raw_buffer.end - parser.raw_buffer.start));
        if (parser.buffer.start)
                explicit_bzero(parser.buffer.start,
                               (size_t) (parser.buffer.end - parser.buffer.start));
        yaml_parser_delete(&parser);
        while (rd.depth > 0) {
                rd.depth--;
                free(rd.stack[rd.depth].key);
                json_decref(rd.stack[rd.depth].node);
        }
        if (r >= 0 && !rd.root)
                r = err_set(e, -EINVAL, "YAML: empty document");
        if (r < 0) {
                json_decref(rd.root);
                return NULL;
        }
        return rd.root;
}
