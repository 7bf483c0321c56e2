// A typed face of the few libcurl calls KVFleet's etcd gateway client makes: Swift cannot call
// curl_easy_setopt (variadic) directly. libcurl (Debian's libcurl4-openssl-dev to build) speaks
// HTTP/1.1 and HTTPS; FoundationNetworking's URLSession, built on it, stops the process on an
// HTTP trailer, which every error answer of etcd 3.4's gateway carries.
#ifndef CCURL_H
#define CCURL_H

#include <stddef.h>

/// Receives body bytes; returns `size * count` to go on, anything else to abort the transfer.
typedef size_t (*ccurl_write_callback)(char *bytes, size_t size, size_t count, void *context);
/// Called about once a second and whenever data moves; returns non-zero to abort the transfer.
typedef int (*ccurl_progress_callback)(void *context);

/// Loads libcurl (libcurl.so.4, with dlopen) and calls curl_global_init, once; returns its
/// CURLcode (0: fine), or -1 if libcurl could not be loaded (``ccurl_load_error`` says why).
int ccurl_global_init(void);

/// Why libcurl could not be loaded, or NULL if it was (loads it first if need be).
const char *ccurl_load_error(void);

/// A new easy handle (curl_easy_init), or NULL (also when libcurl could not be loaded).
void *ccurl_new(void);
/// curl_easy_cleanup.
void ccurl_free(void *handle);

/// The gRPC status of a gRPC exchange: `status` -1 when the answer carried none (the server
/// does not speak gRPC there); `message` its grpc-message, percent-decoded by the caller.
struct ccurl_grpc_result {
    int status;
    char message[512];
};

/// POSTs `body` (`length` bytes, application/json) to `url` on `handle` (reset first; its
/// connection cache is kept), with `authorization` as the Authorization header when not NULL.
/// `ca_file`: the PEM file of the certificate authorities an https server must be signed by
/// (NULL: the system's trusted ones). With `grpc` not NULL the exchange is a gRPC call instead:
/// HTTP/2 (prior knowledge over http, ALPN over https), `application/grpc`, `authorization`
/// sent as etcd's `token` metadata, and the status read from the trailers into `*grpc`.
/// `timeout_ms`: the whole exchange (0: none); `connect_timeout_ms`: the connection. Body bytes
/// go to `write`, `progress` may abort; both get `context`. Blocks until done. Returns the
/// CURLcode; sets `*status` to the HTTP status (0 without an answer) and writes libcurl's
/// message into `error` (at least 256 bytes).
int ccurl_post(void *handle, const char *url, const char *body, long length, const char *authorization,
               const char *ca_file, long timeout_ms, long connect_timeout_ms, ccurl_write_callback write,
               ccurl_progress_callback progress, void *context, long *status, char *error,
               struct ccurl_grpc_result *grpc);

/// The HTTP status of the answer `handle` is receiving (0 before its header); callable from the
/// write callback.
long ccurl_status(void *handle);

/// curl_easy_strerror; for -1, why libcurl could not be loaded.
const char *ccurl_strerror(int code);

#endif
