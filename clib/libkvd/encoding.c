/* encoding.c — RFC 3339 dates and base64, as kvd reads and writes them
 * (Sources/KVValues/RFC3339.swift, Foundation's base64). */
#include "encoding.h"

#include <stdio.h>
#include <string.h>

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t year, int64_t month, int64_t day) {
    int64_t y = month <= 2 ? year - 1 : year;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t days, int64_t *year, int64_t *month, int64_t *day) {
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *day = doy - (153 * mp + 2) / 5 + 1;
    *month = mp < 10 ? mp + 3 : mp - 9;
    *year = yoe + era * 400 + (*month <= 2 ? 1 : 0);
}

static int days_in_month(int64_t month, int64_t year) {
    if (month == 2) return ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0) ? 29 : 28;
    return (month == 4 || month == 6 || month == 9 || month == 11) ? 30 : 31;
}

bool kvdi_date_in_range(int64_t seconds, int32_t nanoseconds) {
    if (nanoseconds < 0 || nanoseconds > 999999999) return false;
    if (seconds < DATE_MIN_SECONDS || seconds > DATE_MAX_SECONDS) return false;
    return seconds < DATE_MAX_SECONDS || nanoseconds <= 999000000;
}

static bool digits(const char *text, size_t len, size_t *i, int width, int64_t *out) {
    if (len - *i < (size_t)width) return false;
    int64_t v = 0;
    for (int k = 0; k < width; k++) {
        char c = text[*i + k];
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    *i += width;
    *out = v;
    return true;
}

static bool one_of(const char *text, size_t len, size_t *i, const char *set) {
    if (*i >= len || !text[*i] || !strchr(set, text[*i])) return false;
    (*i)++;
    return true;
}

bool kvdi_date_parse(const char *text, size_t len, int64_t *seconds, int32_t *nanoseconds) {
    size_t i = 0;
    int64_t year, month, day, hour, minute, second;
    if (!digits(text, len, &i, 4, &year) || !one_of(text, len, &i, "-") || !digits(text, len, &i, 2, &month) ||
        !one_of(text, len, &i, "-") || !digits(text, len, &i, 2, &day) || !one_of(text, len, &i, "Tt ") ||
        !digits(text, len, &i, 2, &hour) || !one_of(text, len, &i, ":") || !digits(text, len, &i, 2, &minute) ||
        !one_of(text, len, &i, ":") || !digits(text, len, &i, 2, &second))
        return false;
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(month, year) || hour > 23 || minute > 59 || second > 60 ||
        year < 1)
        return false;
    int64_t nanos = 0;
    if (i < len && text[i] == '.') {
        size_t start = ++i;
        while (i < len && text[i] >= '0' && text[i] <= '9') {
            if (i - start < 9) nanos = nanos * 10 + (text[i] - '0');
            i++;
        }
        if (i == start) return false;
        for (size_t k = i - start; k < 9; k++) nanos *= 10;
    }
    int64_t offset = 0;
    if (one_of(text, len, &i, "Zz")) {
        offset = 0;
    } else if (i < len && (text[i] == '+' || text[i] == '-')) {
        int64_t sign = text[i] == '-' ? -1 : 1, oh, om;
        i++;
        if (!digits(text, len, &i, 2, &oh) || !one_of(text, len, &i, ":") || !digits(text, len, &i, 2, &om) || oh > 23 ||
            om > 59)
            return false;
        offset = sign * (oh * 3600 + om * 60);
    } else {
        return false;
    }
    if (i != len) return false;
    int64_t s = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + (second > 59 ? 59 : second) - offset;
    if (!kvdi_date_in_range(s, (int32_t)nanos)) return false;
    *seconds = s;
    *nanoseconds = (int32_t)nanos;
    return true;
}

size_t kvdi_date_format(char out[DATE_TEXT_SIZE], int64_t seconds, int32_t nanoseconds) {
    int64_t days = seconds / 86400, of_day = seconds % 86400;
    if (of_day < 0) of_day += 86400, days -= 1;
    int64_t year, month, day;
    civil_from_days(days, &year, &month, &day);
    char fraction[10];
    snprintf(fraction, sizeof fraction, "%09d", (int)nanoseconds);
    size_t keep = 9;
    while (keep > 3 && fraction[keep - 1] == '0') keep--;
    fraction[keep] = '\0';
    int n = snprintf(out, DATE_TEXT_SIZE, "%04d-%02d-%02dT%02d:%02d:%02d.%sZ", (int)year, (int)month, (int)day, (int)(of_day / 3600),
                     (int)(of_day / 60 % 60), (int)(of_day % 60), fraction);
    return (size_t)n;
}

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void kvdi_base64_append(json_buffer *b, const unsigned char *bytes, size_t len) {
    char quad[4];
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)bytes[i] << 16 | (uint32_t)bytes[i + 1] << 8 | bytes[i + 2];
        quad[0] = alphabet[v >> 18], quad[1] = alphabet[(v >> 12) & 63], quad[2] = alphabet[(v >> 6) & 63], quad[3] = alphabet[v & 63];
        kvdi_buffer_append(b, quad, 4);
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)bytes[i] << 16;
        quad[0] = alphabet[v >> 18], quad[1] = alphabet[(v >> 12) & 63], quad[2] = '=', quad[3] = '=';
        kvdi_buffer_append(b, quad, 4);
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)bytes[i] << 16 | (uint32_t)bytes[i + 1] << 8;
        quad[0] = alphabet[v >> 18], quad[1] = alphabet[(v >> 12) & 63], quad[2] = alphabet[(v >> 6) & 63], quad[3] = '=';
        kvdi_buffer_append(b, quad, 4);
    }
}

static int sextet(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

long kvdi_base64_decode(const char *text, size_t len, unsigned char *out) {
    if (len % 4) return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        const unsigned char *q = (const unsigned char *)text + i;
        bool last = i + 4 == len;
        int pad = (q[3] == '=') + (q[2] == '=' && q[3] == '=');
        if (pad && !last) return -1;
        int a = sextet(q[0]), b = sextet(q[1]), c = pad >= 2 ? 0 : sextet(q[2]), d = pad >= 1 ? 0 : sextet(q[3]);
        if (a < 0 || b < 0 || c < 0 || d < 0) return -1;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        out[n++] = (unsigned char)(v >> 16);
        if (pad < 2) out[n++] = (unsigned char)(v >> 8);
        if (pad < 1) out[n++] = (unsigned char)v;
    }
    return (long)n;
}
