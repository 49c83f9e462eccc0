/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Volumes: every method is registered, validates its input and
 * answers UNIMPLEMENTED until the volumes work lands. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "warren/v1/volumes.pb-c.h"

#define WHY "volumes arrive with the volumes issue"

/* A volume name or a path inside a volume must be present. Finishes the
 * call and returns -EINVAL when field is empty. */
static int require(struct rpc_call *call, const char *field, const char *value, const char *what) {
        if (*value)
                return 0;
        char msg[256];
        snprintf(msg, sizeof(msg), "%s: empty; give %s", field, what);
        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, msg);
        return -EINVAL;
}

/* A relative path without ".." components. */
static int check_path(struct rpc_call *call, const char *field, const char *path) {
        if (require(call, field, path, "a path relative to the volume's root") < 0)
                return -EINVAL;
        bool dotdot = false;
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        dotdot = true;
                p += n;
                while (*p == '/')
                        p++;
        }
        if (path[0] == '/' || dotdot) {
                char msg[256];
                snprintf(msg, sizeof(msg),
                         "%s: \"%.80s\" must be relative to the volume's root without \"..\"",
                         field, path);
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, msg);
                return -EINVAL;
        }
        return 0;
}

static void by_name(struct rpc_call *call, const ProtobufCMessage *msg) {
        /* CreateVolume, GetVolume and DeleteVolume requests all carry the
         * name as field 1. */
        const Warren__V1__GetVolumeRequest *req = (const void *) msg;
        if (require(call, "name", req->name, "the volume's name") < 0)
                return;
        api_unimplemented(call, WHY);
}

static void list_volumes(struct rpc_call *call, const ProtobufCMessage *msg) {
        api_unimplemented(call, WHY);
}

static void put_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__PutFileRequest *req = (const void *) msg;
        if (rpc_call_is_done(call))
                return;
        if (req->kind_case != WARREN__V1__PUT_FILE_REQUEST__KIND_META) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "meta: the first PutFile message must carry meta (volume, "
                                "path, mode), then data chunks");
                return;
        }
        if (require(call, "meta.volume", req->meta->volume, "the volume's name") < 0 ||
            check_path(call, "meta.path", req->meta->path) < 0)
                return;
        api_unimplemented(call, WHY);
}

static void get_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__GetFileRequest *req = (const void *) msg;
        if (require(call, "volume", req->volume, "the volume's name") < 0 ||
            check_path(call, "path", req->path) < 0)
                return;
        api_unimplemented(call, WHY);
}

static void list_files(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ListFilesRequest *req = (const void *) msg;
        if (require(call, "volume", req->volume, "the volume's name") < 0)
                return;
        api_unimplemented(call, WHY);
}

static void remove_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__RemoveFileRequest *req = (const void *) msg;
        if (require(call, "volume", req->volume, "the volume's name") < 0 ||
            check_path(call, "path", req->path) < 0)
                return;
        api_unimplemented(call, WHY);
}

#define METHOD(name, k, in, out, fn)                                                               \
        {                                                                                          \
                .path = "/warren.v1.Volumes/" name, .kind = k,                                     \
                .input = &warren__v1__##in##__descriptor,                                          \
                .output = &warren__v1__##out##__descriptor, .on_message = fn,                      \
        }

static const struct rpc_method methods[] = {
        METHOD("CreateVolume", RPC_UNARY, create_volume_request, volume, by_name),
        METHOD("GetVolume", RPC_UNARY, get_volume_request, volume, by_name),
        METHOD("ListVolumes", RPC_UNARY, list_volumes_request, list_volumes_response, list_volumes),
        METHOD("DeleteVolume", RPC_UNARY, delete_volume_request, delete_volume_response, by_name),
        METHOD("PutFile", RPC_CLIENT_STREAM, put_file_request, file_info, put_file),
        METHOD("GetFile", RPC_SERVER_STREAM, get_file_request, file_chunk, get_file),
        METHOD("ListFiles", RPC_UNARY, list_files_request, list_files_response, list_files),
        METHOD("RemoveFile", RPC_UNARY, remove_file_request, remove_file_response, remove_file),
};

int api_volumes_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
}
