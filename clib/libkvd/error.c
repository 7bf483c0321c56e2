/* error.c — kvd_error: statuses, kvd's error replies, one-line messages (the words of
 * Sources/KVConnection/ClientError.swift). */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

KVD_EXPORT void kvd_error_clear(kvd_error *error) {
    if (!error) return;
    free(error->message);
    free(error->name);
    *error = (kvd_error)KVD_ERROR_INIT;
}

KVD_EXPORT const char *kvd_status_name(kvd_status status) {
    switch (status) {
    case KVD_OK: return "ok";
    case KVD_ERROR_NOT_FOUND: return "not found";
    case KVD_ERROR_INVALID_NAME: return "invalid name";
    case KVD_ERROR_INVALID_VALUE: return "invalid value";
    case KVD_ERROR_REVISION_MISMATCH: return "revision mismatch";
    case KVD_ERROR_STORAGE_FAILURE: return "storage failure";
    case KVD_ERROR_TOO_LARGE: return "too large";
    case KVD_ERROR_UNREADABLE_VALUE: return "unreadable value";
    case KVD_ERROR_KEY_LOCKED: return "key locked";
    case KVD_ERROR_PERMISSION_DENIED: return "permission denied";
    case KVD_ERROR_REMOTE: return "error reply";
    case KVD_ERROR_CANNOT_CONNECT: return "cannot connect";
    case KVD_ERROR_CANNOT_START: return "cannot start kvd";
    case KVD_ERROR_UNSAFE_SOCKET_FOLDER: return "unsafe socket folder";
    case KVD_ERROR_CONNECTION: return "connection failed";
    case KVD_ERROR_TIMEOUT: return "timeout";
    case KVD_ERROR_PROTOCOL: return "protocol error";
    case KVD_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case KVD_ERROR_NO_MEMORY: return "out of memory";
    }
    return "unknown";
}

static kvd_status fill(kvd_error *error, kvd_status status, char *message, const char *name, int64_t detail) {
    if (!error) {
        free(message);
        return status;
    }
    kvd_error_clear(error);
    error->status = status;
    error->message = message ? message : strdup(kvd_status_name(status));
    error->name = name ? strdup(name) : NULL;
    error->detail = detail;
    return status;
}

kvd_status kvdi_set_error(kvd_error *error, kvd_status status, const char *format, ...) {
    if (!error) return status;
    char *message = NULL;
    va_list arguments;
    va_start(arguments, format);
    if (vasprintf(&message, format, arguments) < 0) message = NULL;
    va_end(arguments);
    return fill(error, status, message, NULL, -1);
}

static const char *text(const json_node *parameters, const char *member) {
    const json_node *n = kvdi_json_get(parameters, member);
    return n && n->type == JSON_STRING ? n->u.string.bytes : "?";
}

static int64_t number(const json_node *parameters, const char *member) {
    const json_node *n = kvdi_json_get(parameters, member);
    return n && n->type == JSON_INT ? n->u.integer : -1;
}

static char *format(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *format, ...) {
    char *message = NULL;
    va_list arguments;
    va_start(arguments, format);
    if (vasprintf(&message, format, arguments) < 0) message = NULL;
    va_end(arguments);
    return message;
}

kvd_status kvdi_set_reply_error(kvd_error *error, const char *name, const json_node *p) {
    static const char defaults[] = "io.kvd.Defaults.", service[] = "org.varlink.service.";
    const char *short_name = strncmp(name, defaults, sizeof defaults - 1) == 0 ? name + sizeof defaults - 1 : NULL;
    const char *service_name = strncmp(name, service, sizeof service - 1) == 0 ? name + sizeof service - 1 : NULL;
    kvd_status status = KVD_ERROR_REMOTE;
    char *m = NULL;
    int64_t detail = -1;
    if (short_name && !strcmp(short_name, "NotFound")) {
        status = KVD_ERROR_NOT_FOUND;
        m = kvdi_json_get(p, "key") ? format("no key \"%s\" in domain \"%s\"", text(p, "key"), text(p, "domain"))
                               : format("no domain \"%s\"", text(p, "domain"));
    } else if (short_name && !strcmp(short_name, "InvalidName")) {
        status = KVD_ERROR_INVALID_NAME;
        m = format("invalid name \"%s\": %s", text(p, "name"), text(p, "reason"));
    } else if (short_name && !strcmp(short_name, "InvalidValue")) {
        status = KVD_ERROR_INVALID_VALUE;
        m = format("invalid value: %s", text(p, "reason"));
    } else if (short_name && !strcmp(short_name, "RevisionMismatch")) {
        status = KVD_ERROR_REVISION_MISMATCH;
        detail = number(p, "revision");
        m = detail >= 0 ? format("the value changed meanwhile (now at revision %lld); read it again and retry", (long long)detail)
                        : format("the value changed meanwhile; read it again and retry");
    } else if (short_name && !strcmp(short_name, "StorageFailure")) {
        status = KVD_ERROR_STORAGE_FAILURE;
        m = format("kvd could not store the change, so nothing changed: %s", text(p, "reason"));
    } else if (short_name && !strcmp(short_name, "TooLarge")) {
        status = KVD_ERROR_TOO_LARGE;
        detail = number(p, "limit");
        m = format("the request, or the domain after it, is larger than kvd's limit of %lld bytes (one message); store less under one "
                   "key, or in one domain",
                   (long long)(detail >= 0 ? detail : KVD_MESSAGE_LIMIT));
    } else if (short_name && !strcmp(short_name, "UnreadableValue")) {
        status = KVD_ERROR_UNREADABLE_VALUE;
        m = format("the stored value of \"%s\" in %s cannot be read (%s); kvd keeps it as it is. Replace it or remove it with kvctl",
                   text(p, "key"), text(p, "domain"), text(p, "reason"));
    } else if (short_name && !strcmp(short_name, "KeyLocked")) {
        status = KVD_ERROR_KEY_LOCKED;
        m = format("%s %s is locked by the system administrator; root or a member of group kvd-admin can lift it with: kvctl --system "
                   "unlock %s %s",
                   text(p, "domain"), text(p, "key"), text(p, "domain"), text(p, "key"));
    } else if (service_name && !strcmp(service_name, "PermissionDenied")) {
        status = KVD_ERROR_PERMISSION_DENIED;
        m = format("permission denied: only root and members of group kvd-admin may change the system instance");
    } else if (service_name && (!strcmp(service_name, "MethodNotFound") || !strcmp(service_name, "MethodNotImplemented"))) {
        m = format("kvd does not implement %s (is kvd older than this client?)", text(p, "method"));
    } else if (service_name && !strcmp(service_name, "InvalidParameter")) {
        m = format("kvd refused the parameter \"%s\" (is kvd a different version than this client?)", text(p, "parameter"));
    } else {
        json_buffer b = {0};
        if (p) kvdi_buffer_append_json(&b, p);
        kvdi_buffer_append_byte(&b, '\0');
        m = format("kvd replied with the error %s%s%s", name, b.failed || !p ? "" : " ", b.failed || !p ? "" : b.data);
        free(b.data);
    }
    return fill(error, status, m, name, detail);
}
