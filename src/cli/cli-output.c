/* SPDX-License-Identifier: Apache-2.0 */
/* Output helpers: protobuf-c messages as JSON (generic, descriptor
 * driven), aligned tables, times and sizes. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static json_t *json_base64(const ProtobufCBinaryData *b) {
        static const char tab[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t out_len = 4 * ((b->len + 2) / 3);
        char *out = malloc(out_len + 1);
        if (!out)
                abort();
        size_t o = 0;
        for (size_t i = 0; i < b->len; i += 3) {
                uint32_t v = (uint32_t) b->data[i] << 16;
                if (i + 1 < b->len)
                        v |= (uint32_t) b->data[i + 1] << 8;
                if (i + 2 < b->len)
                        v |= b->data[i + 2];
                out[o++] = tab[(v >> 18) & 63];
                out[o++] = tab[(v >> 12) & 63];
                out[o++] = i + 1 < b->len ? tab[(v >> 6) & 63] : '=';
                out[o++] = i + 2 < b->len ? tab[v & 63] : '=';
        }
        out[o] = '\0';
        json_t *j = json_string(out);
        free(out);
        return j;
}

/* One value of field f stored at p. */
static json_t *json_value(const ProtobufCFieldDescriptor *f, const void *p) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
                return json_integer(*(const int32_t *) p);
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
                return json_integer(*(const uint32_t *) p);
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
                return json_integer(*(const int64_t *) p);
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                return json_integer((json_int_t) * (const uint64_t *) p);
        case PROTOBUF_C_TYPE_FLOAT:
                return json_real(*(const float *) p);
        case PROTOBUF_C_TYPE_DOUBLE:
                return json_real(*(const double *) p);
        case PROTOBUF_C_TYPE_BOOL:
                return json_boolean(*(const protobuf_c_boolean *) p);
        case PROTOBUF_C_TYPE_ENUM: {
                int v = *(const int *) p;
                const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
                        (const ProtobufCEnumDescriptor *) f->descriptor, v);
                return ev ? json_string(ev->name) : json_integer(v);
        }
        case PROTOBUF_C_TYPE_STRING: {
                const char *s = *(char *const *) p;
                return json_string(s ? s : "");
        }
        case PROTOBUF_C_TYPE_BYTES:
                return json_base64((const ProtobufCBinaryData *) p);
        case PROTOBUF_C_TYPE_MESSAGE: {
                const ProtobufCMessage *m = *(ProtobufCMessage *const *) p;
                return m ? cli_json_from_message(m) : json_null();
        }
        }
        return json_null();
}

static size_t value_size(const ProtobufCFieldDescriptor *f) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                return 8;
        case PROTOBUF_C_TYPE_DOUBLE:
                return sizeof(double);
        case PROTOBUF_C_TYPE_BOOL:
                return sizeof(protobuf_c_boolean);
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_MESSAGE:
                return sizeof(void *);
        case PROTOBUF_C_TYPE_BYTES:
                return sizeof(ProtobufCBinaryData);
        default:
                return 4;
        }
}

/* A map entry message: generated as "...Entry" with fields key=1, value=2. */
static bool is_map_entry(const ProtobufCMessageDescriptor *d) {
        size_t n = strlen(d->name);
        return n > 5 && strcmp(d->name + n - 5, "Entry") == 0 && d->n_fields == 2 &&
               strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0;
}

json_t *cli_json_from_message(const ProtobufCMessage *m) {
        json_t *o = json_object();
        const ProtobufCMessageDescriptor *d = m->descriptor;
        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];
                const char *base = (const char *) m;
                const void *p = base + f->offset;
                if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t n = *(const size_t *) (base + f->quantifier_offset);
                        const char *arr = *(char *const *) p;
                        bool map = f->type == PROTOBUF_C_TYPE_MESSAGE &&
                                   is_map_entry((const ProtobufCMessageDescriptor *) f->descriptor);
                        json_t *out = map ? json_object() : json_array();
                        for (size_t k = 0; k < n; k++) {
                                const void *item = arr + k * value_size(f);
                                if (map) {
                                        const ProtobufCMessage *e =
                                                *(ProtobufCMessage *const *) item;
                                        const ProtobufCMessageDescriptor *ed = e->descriptor;
                                        json_t *key =
                                                json_value(&ed->fields[0],
                                                           (const char *) e + ed->fields[0].offset);
                                        json_t *val =
                                                json_value(&ed->fields[1],
                                                           (const char *) e + ed->fields[1].offset);
                                        if (json_is_string(key))
                                                json_object_set_new(out, json_string_value(key),
                                                                    val);
                                        else
                                                json_decref(val);
                                        json_decref(key);
                                } else {
                                        json_array_append_new(out, json_value(f, item));
                                }
                        }
                        json_object_set_new(o, f->name, out);
                        continue;
                }
                if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                        uint32_t which = *(const uint32_t *) (base + f->quantifier_offset);
                        if (which != f->id)
                                continue;
                } else if (f->type == PROTOBUF_C_TYPE_MESSAGE && !*(ProtobufCMessage *const *) p) {
                        continue;
                }
                json_object_set_new(o, f->name, json_value(f, p));
        }
        return o;
}

void cli_json_print(json_t *j) {
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
        if (s) {
                fputs(s, stdout);
                fputc('\n', stdout);
                free(s);
        }
        json_decref(j);
}

void cli_json_print_list(ProtobufCMessage *const *items, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, cli_json_from_message(items[i]));
        cli_json_print(a);
}

/* --- tables --- */

struct cli_table {
        size_t ncols, nrows;
        char **cells; /* nrows * ncols, row 0 = headers */
};

struct cli_table *cli_table_new(size_t ncols, const char *const *headers) {
        struct cli_table *t = cli_alloc(sizeof(*t));
        t->ncols = ncols;
        cli_table_add(t, headers);
        return t;
}

void cli_table_add(struct cli_table *t, const char *const *cells) {
        char **c = cli_alloc((t->nrows + 1) * t->ncols * sizeof(char *));
        if (t->nrows)
                memcpy(c, t->cells, t->nrows * t->ncols * sizeof(char *));
        for (size_t i = 0; i < t->ncols; i++)
                c[t->nrows * t->ncols + i] = cli_strdup(cells[i] && cells[i][0] ? cells[i] : "-");
        t->cells = c;
        t->nrows++;
}

void cli_table_print(struct cli_table *t) {
        size_t w[16] = {0};
        size_t nc = MIN(t->ncols, ELEMENTSOF(w));
        for (size_t r = 0; r < t->nrows; r++)
                for (size_t i = 0; i < nc; i++)
                        w[i] = MAX(w[i], strlen(t->cells[r * t->ncols + i]));
        for (size_t r = 0; r < t->nrows; r++) {
                for (size_t i = 0; i < nc; i++) {
                        const char *s = t->cells[r * t->ncols + i];
                        if (i + 1 == nc)
                                printf("%s\n", s);
                        else
                                printf("%-*s  ", (int) w[i], s);
                }
        }
}

void cli_table_free(struct cli_table *t) {
        /* Arena-owned; nothing to do until exit. */
}

const char *cli_format_time(int64_t unix_nanos, char buf[static 32]) {
        if (unix_nanos <= 0)
                return "-";
        time_t t = (time_t) (unix_nanos / 1000000000);
        struct tm tm;
        if (!localtime_r(&t, &tm) || strftime(buf, 32, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                return "-";
        return buf;
}

const char *cli_format_size(uint64_t bytes, char buf[static 32]) {
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = (double) bytes;
        size_t u = 0;
        while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
                v /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, 32, "%" PRIu64 " B", bytes);
        else
                snprintf(buf, 32, "%.1f %s", v, units[u]);
        return buf;
}

const char *cli_enum_name(const ProtobufCEnumDescriptor *d, int value, const char *prefix) {
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, value);
        if (!ev)
                return "?";
        size_t n = strlen(prefix);
        return strncmp(ev->name, prefix, n) == 0 ? ev->name + n : ev->name;
}
