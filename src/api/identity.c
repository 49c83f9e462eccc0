/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Identity. WhoAmI reports what the transport proved about the
 * caller (unix peer credentials); tokens and workload identity are not
 * built yet. */
#include <stdio.h>

#include "api/api.h"
#include "store/store.h"
#include "warren/v1/identity.pb-c.h"

static void who_am_i(struct rpc_call *call, const ProtobufCMessage *msg) {
        const struct rpc_peer *peer = rpc_call_peer(call);
        if (!peer || peer->uid == (uid_t) -1) {
                api_unimplemented(call, "bearer tokens for TCP callers arrive with the "
                                        "identity issue; WhoAmI works over the unix socket");
                return;
        }
        char subject[32];
        snprintf(subject, sizeof(subject), "uid:%u", (unsigned) peer->uid);
        Warren__V1__WhoAmIResponse r = WARREN__V1__WHO_AM_IRESPONSE__INIT;
        r.subject = subject;
        r.environment = (char *) STORE_ENV_DEFAULT;
        rpc_call_reply(call, &r.base);
}

static void get_token(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__GetWorkloadIdentityTokenRequest *req = (const void *) msg;
        if (!*req->audience) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "audience: empty; give the audience the token is for (e.g. "
                                "\"sts.amazonaws.com\")");
                return;
        }
        api_unimplemented(call, "workload identity tokens arrive with the identity issue");
}

static const struct rpc_method methods[] = {
        {
                .path = "/warren.v1.Identity/WhoAmI",
                .kind = RPC_UNARY,
                .input = &warren__v1__who_am_irequest__descriptor,
                .output = &warren__v1__who_am_iresponse__descriptor,
                .on_message = who_am_i,
        },
        {
                .path = "/warren.v1.Identity/GetWorkloadIdentityToken",
                .kind = RPC_UNARY,
                .input = &warren__v1__get_workload_identity_token_request__descriptor,
                .output = &warren__v1__get_workload_identity_token_response__descriptor,
                .on_message = get_token,
        },
};

int api_identity_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
}
