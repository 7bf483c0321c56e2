/* encoding.h — RFC 3339 dates and base64 for typed values (internal). */
#ifndef KVD_ENCODING_H
#define KVD_ENCODING_H

#include "json.h"

/* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z in seconds since 1970 (kvd: RFC3339.range,
 * whose end is 23:59:59.999). */
#define DATE_MIN_SECONDS (-62135596800LL)
#define DATE_MAX_SECONDS 253402300799LL
#define DATE_TEXT_SIZE 40

/* Whether the instant lies in kvd's range of dates. */
bool kvdi_date_in_range(int64_t seconds, int32_t nanoseconds);
/* Parses YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM) as kvd does (a leap second reads as
 * :59; digits beyond nanoseconds are dropped); false if malformed or out of range. */
bool kvdi_date_parse(const char *text, size_t len, int64_t *seconds, int32_t *nanoseconds);
/* The UTC text, with three to nine fraction digits (trailing zeros dropped); returns its length. */
size_t kvdi_date_format(char out[DATE_TEXT_SIZE], int64_t seconds, int32_t nanoseconds);

/* Standard base64 with padding. */
void kvdi_base64_append(json_buffer *buffer, const unsigned char *bytes, size_t len);
/* Decodes `len` characters of padded standard base64 into `out` (at least len / 4 * 3 bytes);
 * returns the bytes written, or -1 if the text is not valid base64. */
long kvdi_base64_decode(const char *text, size_t len, unsigned char *out);

#endif
