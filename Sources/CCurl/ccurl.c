#include "ccurl.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_code;

static void global_init(void) { init_code = (int)curl_global_init(CURL_GLOBAL_DEFAULT); }

int ccurl_global_init(void) {
    pthread_once(&once, global_init);
    return init_code;
}

void *ccurl_new(void) { return curl_easy_init(); }

void ccurl_free(void *handle) { curl_easy_cleanup(handle); }

long ccurl_status(void *handle) {
    long status = 0;
    curl_easy_getinfo((CURL *)handle, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

const char *ccurl_strerror(int code) { return curl_easy_strerror((CURLcode)code); }

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
    curl_easy_reset(curl);
    error[0] = 0;
    *status = 0;
    char auth_header[4096];
    struct curl_slist *headers = curl_slist_append(NULL, grpc ? "Content-Type: application/grpc" : "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for large bodies
    if (grpc) headers = curl_slist_append(headers, "TE: trailers");
    if (authorization) {
        snprintf(auth_header, sizeof auth_header, grpc ? "token: %s" : "Authorization: %s", authorization);
        headers = curl_slist_append(headers, auth_header);
    }
    struct progress_context progress_context = {progress, context};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, length);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, context);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
    if (ca_file) curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file);
    if (grpc) {
        grpc->status = -1;
        grpc->message[0] = 0;
        int tls = strncmp(url, "https:", 6) == 0;
        curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, tls ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, grpc);
        // libcurl 7.88 fails the second stream on a reused HTTP/2 connection after
        // curl_easy_reset ("Error in the HTTP2 framing layer"): one connection per call.
        curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
        // With the default 16 KiB buffer, an answer's end that arrives with its last data
        // waits for libcurl's next 200 ms poll; the curl tool's 100 KiB does not.
        curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 102400L);
    }
    if (progress) {
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &progress_context);
    }
    CURLcode code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    // The handle must not keep pointers to this frame or to the header list.
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, NULL);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, NULL);
    curl_slist_free_all(headers);
    return (int)code;
}
