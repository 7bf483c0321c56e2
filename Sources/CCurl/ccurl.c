#include "ccurl.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// libcurl is loaded when first needed (dlopen), not linked: a kvd without a fleet never maps it
// and the forty libraries it pulls in (about 5 MiB of resident memory, and a slower start).
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *curl);
    void (*easy_reset)(CURL *curl);
    CURLcode (*easy_setopt)(CURL *curl, CURLoption option, ...);
    CURLcode (*easy_perform)(CURL *curl);
    CURLcode (*easy_getinfo)(CURL *curl, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *string);
    void (*slist_free_all)(struct curl_slist *list);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_code;
static char load_error[512];

#define CCURL_LIBRARY "libcurl.so.4"

// Looks up `name` in `library` into `*slot`; returns 0, or -1 with load_error set.
static int load(void *library, const char *name, void **slot) {
    *slot = dlsym(library, name);
    if (*slot) return 0;
    snprintf(load_error, sizeof load_error, "%s has no %s (too old a libcurl: kvd needs 7.85 or newer)",
             CCURL_LIBRARY, name);
    return -1;
}

static void global_init(void) {
    void *library = dlopen(CCURL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *reason = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load %s, which the fleet needs (install libcurl4): %s",
                 CCURL_LIBRARY, reason ? reason : "unknown error");
        init_code = -1;
        return;
    }
    if (load(library, "curl_global_init", (void **)&api.global_init) ||
        load(library, "curl_easy_init", (void **)&api.easy_init) ||
        load(library, "curl_easy_cleanup", (void **)&api.easy_cleanup) ||
        load(library, "curl_easy_reset", (void **)&api.easy_reset) ||
        load(library, "curl_easy_setopt", (void **)&api.easy_setopt) ||
        load(library, "curl_easy_perform", (void **)&api.easy_perform) ||
        load(library, "curl_easy_getinfo", (void **)&api.easy_getinfo) ||
        load(library, "curl_easy_strerror", (void **)&api.easy_strerror) ||
        load(library, "curl_slist_append", (void **)&api.slist_append) ||
        load(library, "curl_slist_free_all", (void **)&api.slist_free_all)) {
        init_code = -1;
        return;
    }
    init_code = (int)api.global_init(CURL_GLOBAL_DEFAULT);
}

int ccurl_global_init(void) {
    pthread_once(&once, global_init);
    return init_code;
}

const char *ccurl_load_error(void) {
    ccurl_global_init();
    return init_code == -1 ? load_error : NULL;
}

void *ccurl_new(void) { return ccurl_global_init() == 0 ? api.easy_init() : NULL; }

void ccurl_free(void *handle) { api.easy_cleanup(handle); }

long ccurl_status(void *handle) {
    long status = 0;
    api.easy_getinfo((CURL *)handle, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

const char *ccurl_strerror(int code) {
    if (code == -1) return load_error;
    return api.easy_strerror ? api.easy_strerror((CURLcode)code) : "libcurl is not loaded";
}

struct progress_context {
    ccurl_progress_callback callback;
    void *context;
};

static int on_progress(void *raw, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct progress_context *progress = raw;
    return progress->callback(progress->context);
}

// Reads grpc-status and grpc-message from the headers and trailers of a gRPC answer.
static size_t on_header(char *line, size_t size, size_t count, void *raw) {
    struct ccurl_grpc_result *grpc = raw;
    size_t length = size * count;
    if (length > 12 && strncasecmp(line, "grpc-status:", 12) == 0) {
        grpc->status = atoi(line + 12);
    } else if (length > 13 && strncasecmp(line, "grpc-message:", 13) == 0) {
        size_t start = 13;
        while (start < length && line[start] == ' ') start++;
        size_t end = length;
        while (end > start && (line[end - 1] == '\r' || line[end - 1] == '\n')) end--;
        size_t n = end - start < sizeof grpc->message - 1 ? end - start : sizeof grpc->message - 1;
        memcpy(grpc->message, line + start, n);
        grpc->message[n] = 0;
    }
    return length;
}

int ccurl_post(void *handle, const char *url, const char *body, long length, const char *authorization,
               const char *ca_file, long timeout_ms, long connect_timeout_ms, ccurl_write_callback write,
               ccurl_progress_callback progress, void *context, long *status, char *error,
               struct ccurl_grpc_result *grpc) {
    CURL *curl = handle;
    api.easy_reset(curl);
    error[0] = 0;
    *status = 0;
    char auth_header[4096];
    struct curl_slist *headers = api.slist_append(NULL, grpc ? "Content-Type: application/grpc" : "Content-Type: application/json");
    headers = api.slist_append(headers, "Expect:");  // no 100-continue round trip for large bodies
    if (grpc) headers = api.slist_append(headers, "TE: trailers");
    if (authorization) {
        snprintf(auth_header, sizeof auth_header, grpc ? "token: %s" : "Authorization: %s", authorization);
        headers = api.slist_append(headers, auth_header);
    }
    struct progress_context progress_context = {progress, context};
    api.easy_setopt(curl, CURLOPT_URL, url);
    api.easy_setopt(curl, CURLOPT_POST, 1L);
    api.easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    api.easy_setopt(curl, CURLOPT_POSTFIELDSIZE, length);
    api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
    api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, write);
    api.easy_setopt(curl, CURLOPT_WRITEDATA, context);
    api.easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    api.easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
    if (ca_file) api.easy_setopt(curl, CURLOPT_CAINFO, ca_file);
    if (grpc) {
        grpc->status = -1;
        grpc->message[0] = 0;
        int tls = strncmp(url, "https:", 6) == 0;
        api.easy_setopt(curl, CURLOPT_HTTP_VERSION, tls ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        api.easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        api.easy_setopt(curl, CURLOPT_HEADERDATA, grpc);
        // libcurl 7.88 fails the second stream on a reused HTTP/2 connection after
        // api.easy_reset ("Error in the HTTP2 framing layer"): one connection per call.
        api.easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
        // With the default 16 KiB buffer, an answer's end that arrives with its last data
        // waits for libcurl's next 200 ms poll; the curl tool's 100 KiB does not.
        api.easy_setopt(curl, CURLOPT_BUFFERSIZE, 102400L);
    }
    if (progress) {
        api.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        api.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        api.easy_setopt(curl, CURLOPT_XFERINFODATA, &progress_context);
    }
    CURLcode code = api.easy_perform(curl);
    api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    // The handle must not keep pointers to this frame or to the header list.
    api.easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    api.easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    api.easy_setopt(curl, CURLOPT_XFERINFODATA, NULL);
    api.easy_setopt(curl, CURLOPT_HEADERDATA, NULL);
    api.slist_free_all(headers);
    return (int)code;
}
