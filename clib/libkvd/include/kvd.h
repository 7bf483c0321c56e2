/* kvd.h — libkvd, the C client library of kvd (a UserDefaults-style settings daemon).
 *
 * libkvd talks to kvd over its Unix socket with the varlink interface io.kvd.Defaults: the same
 * socket rules and autostart as kvctl, the same typed values. The protocol, every method, reply
 * and error: docs/reference/protocol.md in kvd's sources (installed with the package as
 * /usr/share/doc/kvd/docs/reference/protocol.md); values: docs/reference/typed-json.md.
 * It needs only libc and pthreads: no Swift runtime, no GLib.
 *
 *     kvd_client *client;
 *     kvd_error error = KVD_ERROR_INIT;
 *     if (kvd_connect(NULL, &client, &error) != KVD_OK) {
 *         fprintf(stderr, "%s\n", error.message);
 *         kvd_error_clear(&error);
 *         return 1;
 *     }
 *     kvd_value *value = kvd_value_new_string("dark");
 *     kvd_set(client, "com.example.app", "Theme", value, KVD_ANY_REVISION, NULL, &error);
 *     kvd_value_free(value);
 *     kvd_client_free(client);
 *
 * Link with `pkg-config --cflags --libs kvd`.
 *
 * Why its own JSON code: libkvd reads and writes JSON with a small reader and writer of its own
 * (clib/libkvd/json.c, with the typed layer in value.c and encoding.c; fuzzed with libFuzzer, target
 * libkvd-json), not json-glib, so that a plain C program does not take GLib in with it. The
 * GSettings module, which has GLib anyway, is to use libkvd too: one varlink client in C, not two.
 *
 * Conventions of every call:
 * - Strings are NUL-terminated UTF-8. Domain and key names are checked by kvd: a bad name gets
 *   KVD_ERROR_INVALID_NAME with kvd's reason (a name that is not UTF-8 is refused by libkvd itself
 *   with the same status, since it cannot be sent).
 * - A call returns KVD_OK (0) or the kvd_status of the failure; then, if `error` is not NULL,
 *   `*error` holds that status and a one-line message (see kvd_error), and the out parameters are
 *   left untouched. Out parameters may be NULL when the caller does not want them.
 * - NULL: every function checks its pointer arguments, as GLib's g_return_val_if_fail does but
 *   without a message or an abort: a NULL client, watch, name or value where one is needed fails
 *   with KVD_ERROR_INVALID_ARGUMENT (or the failure value a function names: NULL, -1, false)
 *   before anything is sent. Each function says which of its arguments may be NULL.
 * - Memory: what a call returns through an out parameter belongs to the caller (kvd_value_free,
 *   kvd_strv_free, kvd_error_clear, ...). Arguments are only read; nothing is kept after the call
 *   returns, except where a call says otherwise (kvd_value_array_append, kvd_value_dict_set take
 *   the value they are given).
 * - Blocking: the calls of a kvd_client block until kvd replies, at most the connection's timeout
 *   (kvd_connect_options.timeout_ms, default KVD_DEFAULT_TIMEOUT_MS) for each call; a reply to
 *   kvd_set, kvd_apply and kvd_delete means the change is durable on disk. A kvd_watch's
 *   descriptor is non-blocking, and kvd_watch_dispatch never blocks.
 * - Thread-safety: a kvd_client may be shared between threads; its calls are serialized by a lock
 *   inside it (one call at a time on its connection). A kvd_watch is used by one thread at a time.
 *   A kvd_value is not synchronized: threads may read one value at once, but not change it while
 *   another reads it. Different objects are independent. libkvd keeps no global state (but one C
 *   locale object, made once), installs no signal handler (it sends with MSG_NOSIGNAL, so a closed socket is no SIGPIPE) and never writes
 *   to stdout or stderr. Numbers are read and written in the C locale, whatever setlocale says.
 * - Lost connections: when kvd stops, restarts or exits on idle, the next call of a kvd_client
 *   connects again (with the same socket rules and autostart). A call that failed with
 *   KVD_ERROR_CONNECTION or KVD_ERROR_TIMEOUT after it was sent may or may not have been committed.
 *   A kvd_watch does not reconnect: make a new one (its first event gives the current values).
 * - fork(): a kvd_client made before a fork works in both processes: the child's next call sees
 *   that the connection is its parent's (a pid check at each call), closes its own copy of the
 *   descriptor (the parent's connection is not shut down) and connects anew. A kvd_watch is its
 *   process's: in the child, kvd_watch_dispatch and kvd_watch_wait fail with KVD_ERROR_CONNECTION
 *   without reading the parent's stream (free it and make a new one). As with any lock, fork only
 *   while no other thread is in a call of the client.
 */
#ifndef KVD_H
#define KVD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVD_VERSION_MAJOR 0
#define KVD_VERSION_MINOR 1

/** The largest varlink message either side accepts, in bytes (16 MiB, without its NUL): a call
 * whose message would be longer fails with KVD_ERROR_TOO_LARGE without being sent. */
#define KVD_MESSAGE_LIMIT (16 * 1024 * 1024)
/** The deepest nesting of a value's typed JSON (docs/reference/typed-json.md: 512 levels; a
 * dictionary whose keys start with '$' counts two). Deeper values are refused with
 * KVD_ERROR_INVALID_VALUE. The library's functions on values recurse: do not build values much
 * deeper than this. */
#define KVD_VALUE_MAX_DEPTH 512
/** For `if_revision`: commit whatever the current revision. */
#define KVD_ANY_REVISION (-1)
/** The default timeout of one call, in milliseconds (25 s, as D-Bus's). */
#define KVD_DEFAULT_TIMEOUT_MS 25000

/* ---------------------------------------------------------------------------------------- */
/* Errors                                                                                   */

/** Why a call failed. kvd's error replies (io.kvd.Defaults.*, org.varlink.service.*) each have
 * a status; the rest are the client's own failures. */
typedef enum kvd_status {
    KVD_OK = 0,
    KVD_ERROR_NOT_FOUND,         /**< io.kvd.Defaults.NotFound: no such domain, or no such key in it */
    KVD_ERROR_INVALID_NAME,      /**< io.kvd.Defaults.InvalidName: a domain or key breaks the naming rule */
    KVD_ERROR_INVALID_VALUE,     /**< io.kvd.Defaults.InvalidValue, or a value libkvd cannot send (too deep) */
    KVD_ERROR_REVISION_MISMATCH, /**< io.kvd.Defaults.RevisionMismatch: kvd_error.revision is the current one */
    KVD_ERROR_STORAGE_FAILURE,   /**< io.kvd.Defaults.StorageFailure: kvd could not make it durable; nothing changed */
    KVD_ERROR_TOO_LARGE,         /**< io.kvd.Defaults.TooLarge, or a call over KVD_MESSAGE_LIMIT (not sent) */
    KVD_ERROR_UNREADABLE_VALUE,  /**< io.kvd.Defaults.UnreadableValue: the stored value cannot be read */
    KVD_ERROR_KEY_LOCKED,        /**< io.kvd.Defaults.KeyLocked: the system administrator locked the key */
    KVD_ERROR_PERMISSION_DENIED, /**< org.varlink.service.PermissionDenied (the system instance) */
    KVD_ERROR_REMOTE,            /**< any other error reply; kvd_error.name says which */
    KVD_ERROR_CANNOT_CONNECT,    /**< nothing accepts connections on the socket (and no autostart) */
    KVD_ERROR_CANNOT_START,      /**< autostart: kvd could not be started, or did not answer within 5 s */
    KVD_ERROR_UNSAFE_SOCKET_FOLDER, /**< /tmp/kvd-<uid> is not a folder of this user with mode 0700 */
    KVD_ERROR_CONNECTION,        /**< the connection failed or closed before the reply */
    KVD_ERROR_TIMEOUT,           /**< no reply within the connection's timeout (the connection is closed) */
    KVD_ERROR_PROTOCOL,          /**< kvd's reply broke the protocol (the connection is closed) */
    KVD_ERROR_INVALID_ARGUMENT,  /**< a NULL where a value is needed, or a bad JSON text (kvd_value_from_json) */
    KVD_ERROR_NO_MEMORY          /**< malloc failed */
} kvd_status;

/** A failure: its status, a one-line message that says what happened and what to do, and for
 * kvd's error replies the error's name. Initialize with KVD_ERROR_INIT; a call that fails fills it
 * (clearing what it held); release with kvd_error_clear. */
typedef struct kvd_error {
    kvd_status status;
    /** One line, owned by the error; NULL while status is KVD_OK. */
    char *message;
    /** The varlink error name ("io.kvd.Defaults.NotFound"), owned; NULL for the client's own failures. */
    char *name;
    /** KVD_ERROR_REVISION_MISMATCH: the current revision (-1 if kvd did not say);
     * KVD_ERROR_TOO_LARGE: the limit in bytes (KVD_MESSAGE_LIMIT for a call refused before it was
     * sent; kvd's for its TooLarge, -1 if kvd did not say). Otherwise -1. */
    int64_t detail;
} kvd_error;

#define KVD_ERROR_INIT {KVD_OK, NULL, NULL, -1}

/**
 * kvd_error_clear:
 * @error: (nullable): an error a call filled, or one still KVD_ERROR_INIT
 *
 * Frees the message and name @error holds and resets it to KVD_ERROR_INIT, so that it can be
 * passed to another call. NULL does nothing.
 */
void kvd_error_clear(kvd_error *error);
/**
 * kvd_status_name:
 * @status: any value, also one outside kvd_status
 *
 * Returns: a constant English name of @status ("not found", "ok"); never NULL ("unknown" for a
 * value that is no kvd_status).
 */
const char *kvd_status_name(kvd_status status);

/* ---------------------------------------------------------------------------------------- */
/* Values: the contract's typed JSON                                                        */

/** The type of a value. There is no null: JSON null is not a value (a key is removed instead). */
typedef enum kvd_type {
    KVD_TYPE_STRING,
    KVD_TYPE_BOOL,
    KVD_TYPE_INT,    /**< signed 64-bit */
    KVD_TYPE_DOUBLE, /**< IEEE double, finite; kvd calls it "real" */
    KVD_TYPE_DATE,   /**< an instant in the years 0001 to 9999, in seconds and nanoseconds since 1970 */
    KVD_TYPE_DATA,   /**< bytes */
    KVD_TYPE_ARRAY,
    KVD_TYPE_DICT    /**< string keys, in insertion order (kvd does not keep an order) */
} kvd_type;

/** A value. Made by the constructors below or returned by a call; freed with kvd_value_free. */
typedef struct kvd_value kvd_value;

/* Constructors. Each returns a new value owned by the caller (kvd_value_free), or NULL when out
 * of memory or when the argument is outside the contract. */

/**
 * kvd_value_new_string:
 * @text: (nullable): a NUL-terminated string, valid UTF-8
 *
 * Returns: (transfer full): a string value, or NULL when @text is NULL, is not valid UTF-8, or
 * memory runs out.
 */
kvd_value *kvd_value_new_string(const char *text);
/**
 * kvd_value_new_string_len:
 * @text: (nullable): @length bytes of valid UTF-8, which may hold NUL bytes
 * @length: the number of bytes
 *
 * Returns: (transfer full): a string value of @length bytes, or NULL when @text is not valid
 * UTF-8, is NULL with @length not 0 (NULL with 0 is the empty string), or memory runs out.
 */
kvd_value *kvd_value_new_string_len(const char *text, size_t length);
/**
 * kvd_value_new_bool:
 * @flag: the boolean
 *
 * Returns: (transfer full): a bool value, or NULL when out of memory.
 */
kvd_value *kvd_value_new_bool(bool flag);
/**
 * kvd_value_new_int:
 * @number: a signed 64-bit integer
 *
 * Returns: (transfer full): an integer value, or NULL when out of memory.
 */
kvd_value *kvd_value_new_int(int64_t number);
/**
 * kvd_value_new_double:
 * @number: a finite double
 *
 * Returns: (transfer full): a real value, or NULL when @number is NaN or infinite, or out of
 * memory.
 */
kvd_value *kvd_value_new_double(double number);
/**
 * kvd_value_new_date:
 * @unix_seconds: seconds since 1970-01-01T00:00:00Z (floor)
 * @nanoseconds: 0 to 999999999, added to @unix_seconds
 *
 * Returns: (transfer full): a date value, or NULL when the instant is outside the years 0001 to
 * 9999, @nanoseconds is outside 0..999999999, or memory runs out.
 */
kvd_value *kvd_value_new_date(int64_t unix_seconds, int32_t nanoseconds);
/**
 * kvd_value_new_data:
 * @bytes: (nullable): @length bytes, copied; NULL is fine when @length is 0
 * @length: the number of bytes
 *
 * Returns: (transfer full): a data value, or NULL when @bytes is NULL with @length not 0, or out
 * of memory.
 */
kvd_value *kvd_value_new_data(const void *bytes, size_t length);
/**
 * kvd_value_new_array:
 *
 * Returns: (transfer full): an empty array (fill it with kvd_value_array_append), or NULL when
 * out of memory.
 */
kvd_value *kvd_value_new_array(void);
/**
 * kvd_value_new_dict:
 *
 * Returns: (transfer full): an empty dictionary (fill it with kvd_value_dict_set), or NULL when
 * out of memory.
 */
kvd_value *kvd_value_new_dict(void);

/**
 * kvd_value_free:
 * @value: (nullable) (transfer full): a value the caller owns
 *
 * Frees @value and everything in it. NULL does nothing. Do not free a value a container or an
 * event owns (kvd_value_array_get, kvd_value_dict_get, kvd_change.value).
 */
void kvd_value_free(kvd_value *value);
/**
 * kvd_value_copy:
 * @value: (nullable): any value
 *
 * Returns: (transfer full): a deep copy of @value, or NULL when @value is NULL or memory runs out.
 */
kvd_value *kvd_value_copy(const kvd_value *value);
/**
 * kvd_value_equal:
 * @a: (nullable): a value
 * @b: (nullable): a value
 *
 * Whether @a and @b are the same value: same type and contents (dictionaries in any order;
 * doubles by bits, so 0.0 is not -0.0; dates by instant).
 *
 * Returns: true when they are equal; two NULLs are equal, NULL and a value are not.
 */
bool kvd_value_equal(const kvd_value *a, const kvd_value *b);

/**
 * kvd_value_type:
 * @value: (nullable): a value
 *
 * Returns: the type of @value; for NULL, (kvd_type)-1, which is no kvd_type (kvd_type_name gives
 * "unknown").
 */
kvd_type kvd_value_type(const kvd_value *value);
/**
 * kvd_type_name:
 * @type: a kvd_type
 *
 * Returns: a constant name of @type as `kvctl read-type` prints it ("string", "integer",
 * "real", ...); "unknown" for a value that is no kvd_type; never NULL.
 */
const char *kvd_type_name(kvd_type type);

/* Accessors. Each returns the contents if the value has that type, else the zero or NULL given;
 * a NULL value counts as a value of no type. */

/**
 * kvd_value_get_bool:
 * @value: (nullable): a value
 *
 * Returns: the boolean if @value is a bool, else false (also for NULL).
 */
bool kvd_value_get_bool(const kvd_value *value);
/**
 * kvd_value_get_int:
 * @value: (nullable): a value
 *
 * Returns: the integer if @value is an integer, else 0 (also for NULL).
 */
int64_t kvd_value_get_int(const kvd_value *value);
/**
 * kvd_value_get_double:
 * @value: (nullable): a value
 *
 * Returns: the real if @value is a real, else 0.0 (also for NULL). An integer is not converted.
 */
double kvd_value_get_double(const kvd_value *value);
/**
 * kvd_value_get_string:
 * @value: (nullable): a value
 * @length: (out) (optional): the string's length in bytes, which counts NUL bytes inside it
 *
 * Returns: (transfer none): the string, NUL-terminated and owned by @value, if @value is a
 * string; else NULL (also for NULL), and @length is left untouched.
 */
const char *kvd_value_get_string(const kvd_value *value, size_t *length);
/**
 * kvd_value_get_data:
 * @value: (nullable): a value
 * @length: (out) (optional): the number of bytes (0 when @value is not data)
 *
 * Returns: (transfer none): the bytes, owned by @value (NULL for no bytes), if @value is data;
 * else NULL (also for NULL).
 */
const void *kvd_value_get_data(const kvd_value *value, size_t *length);
/**
 * kvd_value_get_date:
 * @value: (nullable): a value
 * @unix_seconds: (out) (optional): seconds since 1970 (floor)
 * @nanoseconds: (out) (optional): 0 to 999999999
 *
 * The instant of a date. A date read from kvd with more than nine fraction digits is sent back
 * with all of them.
 *
 * Returns: true if @value is a date (then the out parameters are set); false otherwise (also for
 * NULL), and they are left untouched.
 */
bool kvd_value_get_date(const kvd_value *value, int64_t *unix_seconds, int32_t *nanoseconds);

/**
 * kvd_value_array_length:
 * @array: (nullable): a value
 *
 * Returns: the number of elements if @array is an array, else 0 (also for NULL).
 */
size_t kvd_value_array_length(const kvd_value *array);
/**
 * kvd_value_array_get:
 * @array: (nullable): a value
 * @index: from 0
 *
 * Returns: (transfer none): the element at @index, owned by the array; NULL when @index is out
 * of range or @array is not an array (or NULL).
 */
const kvd_value *kvd_value_array_get(const kvd_value *array, size_t index);
/**
 * kvd_value_array_append:
 * @array: (nullable): an array
 * @element: (nullable) (transfer full): the value to append; the array takes it, also on failure
 *   (then it is freed)
 *
 * Returns: true when appended; false (and @element freed) when @array is not an array or is NULL,
 * @element is NULL, or memory runs out.
 */
bool kvd_value_array_append(kvd_value *array, kvd_value *element);

/* Dictionaries. Lookups are linear: for many keys, build your own index. */

/**
 * kvd_value_dict_length:
 * @dict: (nullable): a value
 *
 * Returns: the number of keys if @dict is a dictionary, else 0 (also for NULL).
 */
size_t kvd_value_dict_length(const kvd_value *dict);
/**
 * kvd_value_dict_key_at:
 * @dict: (nullable): a value
 * @index: from 0, in insertion order
 * @length: (out) (optional): the key's length in bytes, which counts NUL bytes inside it
 *
 * Returns: (transfer none): the key at @index, NUL-terminated and owned by the dictionary; NULL
 * when @index is out of range or @dict is not a dictionary (or NULL).
 */
const char *kvd_value_dict_key_at(const kvd_value *dict, size_t index, size_t *length);
/**
 * kvd_value_dict_value_at:
 * @dict: (nullable): a value
 * @index: from 0, in insertion order
 *
 * Returns: (transfer none): the value of the key at @index, owned by the dictionary; NULL when
 * @index is out of range or @dict is not a dictionary (or NULL).
 */
const kvd_value *kvd_value_dict_value_at(const kvd_value *dict, size_t index);
/**
 * kvd_value_dict_get:
 * @dict: (nullable): a value
 * @key: (nullable): a NUL-terminated key
 *
 * Returns: (transfer none): the value under @key, owned by the dictionary; NULL when there is
 * none, or @dict is not a dictionary, or either argument is NULL.
 */
const kvd_value *kvd_value_dict_get(const kvd_value *dict, const char *key);
/**
 * kvd_value_dict_set:
 * @dict: (nullable): a dictionary
 * @key: (nullable): a NUL-terminated key, valid UTF-8; copied
 * @element: (nullable) (transfer full): its value; the dictionary takes it, also on failure (then
 *   it is freed)
 *
 * Sets @key to @element, replacing (and freeing) a value the key had.
 *
 * Returns: true when set; false (and @element freed) when @dict is not a dictionary or is NULL,
 * @key is NULL or not UTF-8, @element is NULL, or memory runs out.
 */
bool kvd_value_dict_set(kvd_value *dict, const char *key, kvd_value *element);

/**
 * kvd_value_to_json:
 * @value: (nullable): a value
 * @length: (out) (optional): the text's length in bytes
 *
 * The value's typed JSON (docs/reference/typed-json.md), compact. Reals always have a '.' or an
 * exponent and read back to the same bits; dates are written in UTC; dictionaries with a '$' key
 * are wrapped in "$dict".
 *
 * Returns: (transfer full): the NUL-terminated text, owned by the caller (free()); NULL when
 * @value is NULL, is deeper than KVD_VALUE_MAX_DEPTH, or memory runs out.
 */
char *kvd_value_to_json(const kvd_value *value, size_t *length);
/**
 * kvd_value_from_json:
 * @text: (nullable): @length bytes of JSON text; need not be NUL-terminated; NULL only with
 *   @length 0 (then it is an empty text, and refused as such)
 * @length: the number of bytes
 * @value: (out) (optional) (transfer full): the value read, the caller's
 * @error: (nullable): filled on failure
 *
 * Reads typed JSON by the rules kvd reads it with: strict JSON, valid UTF-8, no duplicate
 * members, integers within 64 bits, finite reals, no null, only the $date, $data and $dict
 * objects, at most KVD_VALUE_MAX_DEPTH levels.
 *
 * Returns: KVD_OK; KVD_ERROR_INVALID_ARGUMENT (a message that says where the text breaks a rule,
 * or "text is NULL" for NULL with @length not 0); KVD_ERROR_NO_MEMORY.
 */
kvd_status kvd_value_from_json(const char *text, size_t length, kvd_value **value, kvd_error *error);

/* ---------------------------------------------------------------------------------------- */
/* Connecting                                                                               */

/** Where to connect and how. Zero it (or use KVD_CONNECT_OPTIONS_INIT) and set what you need. */
typedef struct kvd_connect_options {
    /** The socket; NULL or "": $KVD_SOCKET, else $XDG_RUNTIME_DIR/kvd.sock, else
     * /tmp/kvd-<uid>/kvd.sock (that folder is made with mode 0700, and refused unless it is a
     * folder of this user with mode 0700: KVD_ERROR_UNSAFE_SOCKET_FOLDER). Empty variables count
     * as unset. The path is resolved once, by kvd_connect. */
    const char *socket_path;
    /** The kvd to autostart; NULL: the kvd installed with libkvd (KVD_DAEMON_PATH, set at build
     * time: $(BINDIR)/kvd). */
    const char *daemon_path;
    /** Nonzero: never start kvd. $KVD_NO_AUTOSTART=1 does the same. */
    int no_autostart;
    /** The most one call waits, in milliseconds: 0 for KVD_DEFAULT_TIMEOUT_MS, negative for no
     * limit (a call then waits as long as kvd takes). */
    int timeout_ms;
} kvd_connect_options;

#define KVD_CONNECT_OPTIONS_INIT {NULL, NULL, 0, 0}

/** A connection to kvd. */
typedef struct kvd_client kvd_client;

/**
 * kvd_connect:
 * @options: (nullable): where to connect and how; NULL: all defaults
 * @client: (out) (transfer full): the new client (free with kvd_client_free); NULL:
 *   KVD_ERROR_INVALID_ARGUMENT
 * @error: (nullable): filled on failure
 *
 * Connects to kvd by @options. Checks the socket folder first (nothing is sent and nothing started
 * when it may be another user's). When nothing listens on the socket (no file, or connection
 * refused) and autostart is on, starts the daemon as `kvd --socket PATH` in a new session, with
 * stdio on /dev/null and this process's environment less the service manager's variables
 * (NOTIFY_SOCKET, LISTEN_*, WATCHDOG_*, JOURNAL_STREAM, STATE_DIRECTORY), detached so that it is
 * never this process's child; then waits up to 5 s for it to accept. When a service manager owns
 * the socket (kvd.socket), connecting succeeds at once and nothing is started.
 * Blocks for at most about 5 s (autostart) plus the timeout.
 *
 * Returns: KVD_OK; KVD_ERROR_CANNOT_CONNECT (the message names the socket and the system's
 * reason; a file at the socket path that is no socket is said to be one, and nothing is started), KVD_ERROR_CANNOT_START, KVD_ERROR_UNSAFE_SOCKET_FOLDER, KVD_ERROR_TIMEOUT,
 * KVD_ERROR_NO_MEMORY; KVD_ERROR_INVALID_ARGUMENT when @client is NULL.
 */
kvd_status kvd_connect(const kvd_connect_options *options, kvd_client **client, kvd_error *error);

/**
 * kvd_client_free:
 * @client: (nullable) (transfer full): a client from kvd_connect
 *
 * Closes the connection and frees the client. NULL does nothing. No call may be running on it.
 */
void kvd_client_free(kvd_client *client);

/**
 * kvd_client_socket_path:
 * @client: (nullable): a client
 *
 * Returns: (transfer none) (nullable): the socket path the client connects to, as kvd_connect
 * resolved it, owned by the client; NULL when @client is NULL.
 */
const char *kvd_client_socket_path(const kvd_client *client);

/* ---------------------------------------------------------------------------------------- */
/* io.kvd.Defaults                                                                          */

/** Where a value comes from (kvd's system layer): the user's own value, the machine's default
 * (`kvd --system`), or a value the administrator locked (then writes get KVD_ERROR_KEY_LOCKED). */
typedef enum kvd_source { KVD_SOURCE_USER, KVD_SOURCE_SYSTEM, KVD_SOURCE_LOCKED } kvd_source;

/** One key's new value; `value` NULL means the key is removed. `source` is set in watch events
 * and ignored by kvd_apply. In watch events, `value` NULL with KVD_SOURCE_LOCKED means the key
 * is locked by the system layer without a value (it reads as KVD_ERROR_NOT_FOUND and writes get
 * KVD_ERROR_KEY_LOCKED: not writable); such a key comes so in the initial event and whenever its
 * lock comes or goes (then `value` NULL with KVD_SOURCE_USER: unlocked, still without a value).
 * A kvd older than 0.2.0 does not send those keys. */
typedef struct kvd_change {
    const char *key;
    const kvd_value *value;
    kvd_source source;
} kvd_change;

/* The calls of io.kvd.Defaults.
 * Every call below takes a @client and an @error that may be NULL; a NULL @client, a NULL
 * @domain (or a NULL @key where a key is needed) fails with KVD_ERROR_INVALID_ARGUMENT before
 * anything is sent; a name that is not UTF-8 with
 * KVD_ERROR_INVALID_NAME; other bad names are kvd's to refuse (KVD_ERROR_INVALID_NAME with kvd's
 * reason). "The connection's" errors: KVD_ERROR_CANNOT_CONNECT, KVD_ERROR_CANNOT_START,
 * KVD_ERROR_UNSAFE_SOCKET_FOLDER (reconnecting), KVD_ERROR_CONNECTION, KVD_ERROR_TIMEOUT,
 * KVD_ERROR_PROTOCOL, KVD_ERROR_PERMISSION_DENIED, KVD_ERROR_REMOTE, KVD_ERROR_NO_MEMORY. */

/**
 * kvd_get:
 * @client: a connected client
 * @domain: the domain
 * @key: the key
 * @value: (out) (optional) (transfer full): its value as the layers combine, the caller's
 * @revision: (out) (optional): the revision at which the user's own value last changed (0 when
 *   the user has none)
 * @source: (out) (optional): where the value comes from
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.Get.
 *
 * Returns: KVD_OK; KVD_ERROR_NOT_FOUND (no such key or domain), KVD_ERROR_INVALID_NAME,
 * KVD_ERROR_UNREADABLE_VALUE, KVD_ERROR_INVALID_ARGUMENT, and the connection's.
 */
kvd_status kvd_get(kvd_client *client, const char *domain, const char *key, kvd_value **value, int64_t *revision,
                   kvd_source *source, kvd_error *error);

/**
 * kvd_set:
 * @client: a connected client
 * @domain: the domain
 * @key: the key
 * @value: the value to store; only read (NULL: KVD_ERROR_INVALID_ARGUMENT, nothing sent; to
 *   remove a key use kvd_delete)
 * @if_revision: >= 0: only if the key last changed at that revision (0: only if it is absent),
 *   else KVD_ERROR_REVISION_MISMATCH and nothing changes; KVD_ANY_REVISION: unconditionally
 * @revision: (out) (optional): the commit's revision
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.Set: stores @value under @key; the change is durable when this returns.
 *
 * Returns: KVD_OK; KVD_ERROR_INVALID_NAME, KVD_ERROR_INVALID_VALUE (also a value deeper than
 * KVD_VALUE_MAX_DEPTH, not sent), KVD_ERROR_REVISION_MISMATCH, KVD_ERROR_KEY_LOCKED,
 * KVD_ERROR_TOO_LARGE (the call over KVD_MESSAGE_LIMIT, not sent; or the domain after it too
 * large: nothing changed), KVD_ERROR_STORAGE_FAILURE, KVD_ERROR_INVALID_ARGUMENT, and the
 * connection's.
 */
kvd_status kvd_set(kvd_client *client, const char *domain, const char *key, const kvd_value *value, int64_t if_revision,
                   int64_t *revision, kvd_error *error);

/**
 * kvd_apply:
 * @client: a connected client
 * @domain: the domain
 * @changes: (array length=count) (nullable): the changes; a change whose value is NULL removes its
 *   key (its `source` is ignored); NULL only with @count 0 (else KVD_ERROR_INVALID_ARGUMENT); a
 *   change whose key is NULL: KVD_ERROR_INVALID_ARGUMENT, nothing sent
 * @count: the number of changes
 * @if_revision: >= 0: only if the domain last changed at that revision; KVD_ANY_REVISION:
 *   unconditionally
 * @revision: (out) (optional): the commit's revision
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.Apply: commits all @count changes to @domain atomically (all or none), durable
 * when this returns.
 *
 * Returns: as kvd_set.
 */
kvd_status kvd_apply(kvd_client *client, const char *domain, const kvd_change *changes, size_t count, int64_t if_revision,
                     int64_t *revision, kvd_error *error);

/**
 * kvd_delete:
 * @client: a connected client
 * @domain: the domain
 * @key: (nullable): the key to remove; NULL removes the whole domain
 * @revision: (out) (optional): the commit's revision
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.Delete, durable when this returns.
 *
 * Returns: KVD_OK; KVD_ERROR_NOT_FOUND, KVD_ERROR_INVALID_NAME, KVD_ERROR_KEY_LOCKED,
 * KVD_ERROR_STORAGE_FAILURE, KVD_ERROR_INVALID_ARGUMENT, and the connection's.
 */
kvd_status kvd_delete(kvd_client *client, const char *domain, const char *key, int64_t *revision, kvd_error *error);

/**
 * kvd_list:
 * @client: a connected client
 * @domain: the domain
 * @values: (out) (optional) (transfer full): every value of @domain as the layers combine, as one
 *   dictionary (empty for a domain with no keys)
 * @revision: (out) (optional): the revision at which the domain last changed
 * @sources: (out) (optional) (transfer full): a dictionary of the keys whose value is not the
 *   user's own, each with the string "system" or "locked", and of the keys locked without a value
 *   (not in @values), with "locked"
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.List.
 *
 * Returns: KVD_OK; KVD_ERROR_INVALID_NAME, KVD_ERROR_UNREADABLE_VALUE, KVD_ERROR_INVALID_ARGUMENT,
 * and the connection's.
 */
kvd_status kvd_list(kvd_client *client, const char *domain, kvd_value **values, int64_t *revision, kvd_value **sources,
                    kvd_error *error);

/**
 * kvd_domains:
 * @client: a connected client
 * @domains: (out) (optional) (transfer full): the names of all domains, a NULL-terminated array
 *   (free with kvd_strv_free)
 * @count: (out) (optional): their number
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.Domains.
 *
 * Returns: KVD_OK; KVD_ERROR_INVALID_ARGUMENT (@client is NULL), and the connection's.
 */
kvd_status kvd_domains(kvd_client *client, char ***domains, size_t *count, kvd_error *error);
/**
 * kvd_strv_free:
 * @strings: (nullable) (transfer full): an array from kvd_domains
 *
 * Frees the array and its strings. NULL does nothing.
 */
void kvd_strv_free(char **strings);

/**
 * kvd_blame:
 * @client: a connected client
 * @domain: the domain
 * @key: (nullable): one key, or NULL for every key @domain holds now
 * @entries: (out) (optional) (transfer full): a dictionary from each key @domain holds now (only
 *   @key, if given) to a dictionary saying who set its value: "key" (string), "revision"
 *   (integer), and when history holds that change, "time" (an RFC 3339 string) and "writer", a
 *   dictionary of what kvd knows of the process that made it: "uid", "pid" (integers),
 *   "program" (its executable's path, else its command name), "app" (its app id) (strings of at
 *   most 255 bytes). No "writer": unknown (history off or not kept for the key, a value older
 *   than history or than writer records, or forgotten). Free with kvd_value_free.
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.Blame: who set each current value, from kvd's history. On the system
 * instance, for root and the admin group only (KVD_ERROR_PERMISSION_DENIED otherwise).
 *
 * Returns: KVD_OK; KVD_ERROR_NOT_FOUND when @domain (or @key) holds no value,
 * KVD_ERROR_INVALID_NAME, KVD_ERROR_TOO_LARGE (ask for one key), KVD_ERROR_INVALID_ARGUMENT, and
 * the connection's. Since 0.3.
 */
kvd_status kvd_blame(kvd_client *client, const char *domain, const char *key, kvd_value **entries, kvd_error *error);

/* ---------------------------------------------------------------------------------------- */
/* Watch                                                                                    */

/** One event of a watch: the current values (initial: true, the first event), or the changes of
 * one commit (or of the system layer; then revision is unchanged). Valid only during the callback:
 * copy what you keep (kvd_value_copy). */
typedef struct kvd_watch_event {
    int64_t revision;
    bool initial;
    size_t count;
    const kvd_change *changes;
} kvd_watch_event;

/** Called once per event, on the thread that calls kvd_watch_new or kvd_watch_dispatch. It may
 * use kvd_client calls (on another connection) but must not free the watch. */
typedef void (*kvd_watch_callback)(const kvd_watch_event *event, void *user_data);

/** A watch: its own connection to kvd, streaming the changes of a domain or key. */
typedef struct kvd_watch kvd_watch;

/**
 * kvd_watch_new:
 * @client: a client whose socket, autostart and timeout the watch's own connection takes (@client
 *   is not used after this returns)
 * @domain: the domain
 * @key: (nullable): the key; NULL: all keys of @domain
 * @callback: called once per event, here with the first (initial: true, the current values)
 * @user_data: (closure): passed to @callback
 * @watch: (out) (transfer full): the watch (free with kvd_watch_free)
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.Watch on a new connection. Blocks until kvd's first reply, and calls @callback
 * with it before returning. A domain too large for one message comes in pieces of about 1 MiB
 * (all but the last `partial`): they are all read first (each within the timeout), and the one
 * initial event holds the values of all of them. Later events arrive on kvd_watch_fd: when poll says it is readable,
 * call kvd_watch_dispatch. A watch keeps kvd from exiting on idle.
 *
 * Returns: KVD_OK; KVD_ERROR_INVALID_NAME; KVD_ERROR_INVALID_ARGUMENT when @domain, @client,
 * @callback or @watch is NULL; and the connection's.
 */
kvd_status kvd_watch_new(kvd_client *client, const char *domain, const char *key, kvd_watch_callback callback,
                         void *user_data, kvd_watch **watch, kvd_error *error);

/** One event of a WatchAll (kvd_watch_all_new) or of kvd_read_domain: as kvd_watch_event, with the
 * domain it changes and the system instance's revision. A WatchAll's first event (initial: true)
 * has no domain and no changes: the revisions its stream starts after. Valid only during the
 * callback. Events come in increasing order of (revision, system_revision). Since 0.3. */
typedef struct kvd_watch_all_event {
    int64_t revision;        /**< the store's revision (the commit's, or unchanged for a change of the system layer) */
    int64_t system_revision; /**< the system instance's revision it reflects; -1 when kvd follows none */
    const char *domain;      /**< the domain; NULL only in a WatchAll's first event */
    bool initial;            /**< the first event (a WatchAll's), or the domain's current values (kvd_read_domain) */
    size_t count;
    const kvd_change *changes;
} kvd_watch_all_event;

/** Called once per event of a WatchAll, or once by kvd_read_domain. Since 0.3. */
typedef void (*kvd_watch_all_callback)(const kvd_watch_all_event *event, void *user_data);

/**
 * kvd_watch_all_new:
 * @client: a client whose socket, autostart and timeout the watch's own connection takes
 * @prefix: (nullable): only the domains whose name starts with it (a valid domain name, e.g.
 *   "org.gnome."); NULL: every domain
 * @callback: called once per event, here with the first (initial: true, no domain)
 * @user_data: (closure): passed to @callback
 * @watch: (out) (transfer full): the watch (kvd_watch_fd, kvd_watch_dispatch, kvd_watch_wait,
 *   kvd_watch_free as for kvd_watch_new's)
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.WatchAll on a new connection: one descriptor for the changes of every domain
 * under @prefix, each event naming its domain, with the sources and locks of a Watch. It sends
 * no current values: read a domain with kvd_read_domain and skip the events at or before its
 * (revision, system_revision). A watcher that falls too far behind is disconnected, as a Watch.
 * Since 0.3.
 *
 * Returns: KVD_OK; KVD_ERROR_INVALID_NAME (@prefix); KVD_ERROR_INVALID_ARGUMENT; the connection's.
 */
kvd_status kvd_watch_all_new(kvd_client *client, const char *prefix, kvd_watch_all_callback callback, void *user_data,
                             kvd_watch **watch, kvd_error *error);

/** One domain of the current state a WatchAll starts with (kvd_watch_all_current_new): its
 * values, or its name alone when kvd withheld them. Valid only during the callback. Since 0.3. */
typedef struct kvd_current_domain {
    int64_t revision;        /**< the store revision the whole current state is at */
    int64_t system_revision; /**< the system instance's revision it reflects; -1 when kvd follows none */
    const char *domain;      /**< the domain */
    bool withheld;           /**< kvd left its values out (too large): read it apart (kvd_read_domain) */
    size_t count;            /**< its keys (none when withheld), in key order */
    const kvd_change *changes; /**< its current values, with their sources and valueless locks, as a Watch's first event */
} kvd_current_domain;

/** Called once per domain of the current state, before kvd_watch_all_current_new returns. Since 0.3. */
typedef void (*kvd_current_callback)(const kvd_current_domain *domain, void *user_data);

/**
 * kvd_watch_all_current_new:
 * @client: a client whose socket, autostart and timeout the watch's own connection takes
 * @prefix: (nullable): only the domains whose name starts with it (a valid domain name); NULL:
 *   every domain
 * @current: called, before this returns, once per domain that has something to read (a value, or
 *   a lock), with its current values, and once per domain kvd withheld (withheld: true, no values)
 * @callback: called once per event of the stream after the current state, here with the first
 *   (initial: true, no domain), as kvd_watch_all_new's
 * @user_data: (closure): passed to @current and @callback
 * @complete: (out): true when kvd sent the current state; false for a kvd older than it (then
 *   @current was not called: read each domain with kvd_read_domain, as after kvd_watch_all_new)
 * @watch: (out) (transfer full): the watch (kvd_watch_fd, kvd_watch_dispatch, kvd_watch_wait,
 *   kvd_watch_free as for kvd_watch_new's)
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.WatchAll with current: true, on a new connection: kvd_watch_all_new's stream,
 * starting with the current values of every domain under @prefix, all at the (revision,
 * system_revision) of the first event, so that no domain needs a read of its own and nothing needs
 * reconciling: the events that follow are the changes after it. A domain @current was not called
 * with is empty. kvd bounds what it sends (a domain over 256 KiB, or past 4 MiB in all, is only
 * named: withheld); each piece is read within the client's timeout. Since 0.3.
 *
 * Returns: KVD_OK; KVD_ERROR_INVALID_NAME (@prefix); KVD_ERROR_INVALID_ARGUMENT (@client, @current,
 * @callback, @complete or @watch NULL); the connection's. On failure no watch is made (@current may
 * have been called for some domains).
 */
kvd_status kvd_watch_all_current_new(kvd_client *client, const char *prefix, kvd_current_callback current,
                                     kvd_watch_all_callback callback, void *user_data, bool *complete, kvd_watch **watch,
                                     kvd_error *error);

/** One domain of the current state as kvd_watch_all_current_raw_new gives it: its changes as the
 * JSON kvd sent, not decoded. Valid only during the callback. Since 0.3. */
typedef struct kvd_current_raw {
    int64_t revision;          /**< the store revision the whole current state is at */
    int64_t system_revision;   /**< the system instance's revision it reflects; -1 when kvd follows none */
    const char *domain;        /**< the domain */
    bool withheld;             /**< kvd left its values out (too large): read it apart (kvd_read_domain) */
    const char *changes_json;  /**< its changes, one JSON array (NUL-terminated), unchecked until kvd_changes_from_json; NULL when withheld */
    size_t changes_json_len;   /**< its length in bytes */
} kvd_current_raw;

/** Called once per domain of the current state, before kvd_watch_all_current_raw_new returns. Since 0.3. */
typedef void (*kvd_current_raw_callback)(const kvd_current_raw *domain, void *user_data);

/**
 * kvd_watch_all_current_raw_new:
 * @client, @prefix, @callback, @user_data, @complete, @watch, @error: as kvd_watch_all_current_new's
 * @current: called, before this returns, once per domain with something to read, with its changes
 *   as JSON, and once per domain kvd withheld
 *
 * kvd_watch_all_current_new, each domain's values left as the JSON array kvd sent (the pieces of
 * one domain joined into one array): no value is decoded, and where kvd writes the values last
 * (as it does) they are not even scanned, so a process that starts with every domain's values
 * pays for decoding only the ones it uses (kvd_changes_from_json, which checks them as
 * kvd_watch_all_current_new does: it is this function with each domain decoded). The rest of
 * each reply is checked here. Since 0.3.
 *
 * Returns: as kvd_watch_all_current_new.
 */
kvd_status kvd_watch_all_current_raw_new(kvd_client *client, const char *prefix, kvd_current_raw_callback current,
                                         kvd_watch_all_callback callback, void *user_data, bool *complete, kvd_watch **watch,
                                         kvd_error *error);

/**
 * kvd_changes_from_json:
 * @json: a domain's changes from kvd_current_raw (`len` bytes)
 * @len: their length
 * @changes: (out) (transfer full): the changes, keys and values owned (free with kvd_changes_free)
 * @count: (out): their number
 * @error: (nullable): filled on failure
 *
 * Checks and decodes the changes as a Watch's first event gives them (keys, sources, values;
 * a value NULL for a key locked without one). Since 0.3.
 *
 * Returns: KVD_OK; KVD_ERROR_PROTOCOL (not JSON, not an array of changes) or
 * KVD_ERROR_INVALID_VALUE (a value against the contract), nothing filled; KVD_ERROR_INVALID_ARGUMENT.
 */
kvd_status kvd_changes_from_json(const char *json, size_t len, kvd_change **changes, size_t *count, kvd_error *error);

/**
 * kvd_changes_free:
 * @changes: (nullable) (transfer full): from kvd_changes_from_json
 * @count: their number
 *
 * Frees the changes, their keys and values. NULL does nothing. Since 0.3.
 */
void kvd_changes_free(kvd_change *changes, size_t count);

/**
 * kvd_read_domain:
 * @client: a client whose socket, autostart and timeout the read's own connection takes
 * @domain: the domain
 * @callback: called once, before this returns, with the domain's current values (initial: true,
 *   the sources and valueless locks as a Watch's first event) and the revisions they are at
 * @user_data: (closure): passed to @callback
 * @error: (nullable): filled on failure
 *
 * io.kvd.Defaults.Snapshot on @client's connection (one round trip); for a domain too large for
 * one reply (or a kvd older than Snapshot), a Watch's first replies, all their pieces, on a
 * connection of its own, closed before this returns. Since 0.3.
 *
 * Returns: KVD_OK; KVD_ERROR_INVALID_NAME; KVD_ERROR_INVALID_ARGUMENT; the connection's.
 */
kvd_status kvd_read_domain(kvd_client *client, const char *domain, kvd_watch_all_callback callback, void *user_data,
                           kvd_error *error);

/**
 * kvd_watch_fd:
 * @watch: (nullable): a watch
 *
 * Returns: the watch's descriptor, non-blocking, owned by the watch: poll it for POLLIN (or add it
 * to a main loop, e.g. g_unix_fd_add); -1 when @watch is NULL.
 */
int kvd_watch_fd(const kvd_watch *watch);

/**
 * kvd_watch_dispatch:
 * @watch: a watch (NULL: KVD_ERROR_INVALID_ARGUMENT)
 * @error: (nullable): filled on failure
 *
 * Reads what has arrived, without blocking, and calls the callback once per complete event, in
 * order.
 *
 * Returns: KVD_OK (also when nothing had arrived); KVD_ERROR_INVALID_ARGUMENT (@watch is NULL);
 * KVD_ERROR_CONNECTION when kvd closed the
 * connection or ended the watch, KVD_ERROR_PROTOCOL, or an error kvd replied with: then the watch
 * is over (free it and make a new one); events before the failure were delivered.
 */
kvd_status kvd_watch_dispatch(kvd_watch *watch, kvd_error *error);

/**
 * kvd_watch_wait:
 * @watch: a watch (NULL: KVD_ERROR_INVALID_ARGUMENT)
 * @timeout_ms: the longest wait in milliseconds; negative: without limit
 * @error: (nullable): filled on failure
 *
 * Waits for the descriptor to be readable, then dispatches what arrived; for programs without a
 * main loop.
 *
 * Returns: as kvd_watch_dispatch; a wait that ends with nothing is KVD_OK.
 */
kvd_status kvd_watch_wait(kvd_watch *watch, int timeout_ms, kvd_error *error);

/**
 * kvd_watch_free:
 * @watch: (nullable) (transfer full): a watch
 *
 * Closes the watch's connection and frees it. NULL does nothing. Not from inside its callback.
 */
void kvd_watch_free(kvd_watch *watch);

#ifdef __cplusplus
}
#endif

#endif /* KVD_H */
