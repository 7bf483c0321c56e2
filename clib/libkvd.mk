# libkvd, the C client library: included by the top Makefile (`include clib/libkvd.mk`).
#   make libkvd          .build/clib/libkvd.so.VERSION (+ links), libkvd.a, kvd.pc
#   make libkvd-test     its end-to-end test against a real kvd and kvctl (debug build), once
#                        natively and once under valgrind when valgrind is installed
#   make libkvd-install  the .so, kvd.h and kvd.pc under PREFIX (make install runs it)
# Only libc and pthreads: no Swift runtime, no GLib (see clib/include/kvd.h on the JSON code).
LIBKVD_DIR     := clib
LIBKVD_OUT     := .build/clib
LIBKVD_SOURCES := $(wildcard $(LIBKVD_DIR)/src/*.c)
LIBKVD_HEADERS := $(LIBKVD_DIR)/include/kvd.h $(wildcard $(LIBKVD_DIR)/src/*.h)
# kvd's version (scripts/version.sh reads Sources/KVProtocol/Version.swift): kvd.pc's Version and
# the library's file name. The soname's number is libkvd's ABI: it rises only when the ABI breaks
# (docs/releases.md), so a program linked with libkvd.so.0 runs with every 0.x release.
KVD_VERSION    ?= $(shell $(LIBKVD_DIR)/../scripts/version.sh)
LIBKVD_SONAME  := libkvd.so.0
LIBKVD_FILE    := libkvd.so.$(KVD_VERSION)
LIBKVD_SO      := $(LIBKVD_OUT)/$(LIBKVD_FILE)
LIBKVD_VERSION := $(KVD_VERSION)
LIBDIR         ?= $(PREFIX)/lib
INCLUDEDIR     ?= $(PREFIX)/include
PKGCONFIGDIR   ?= $(LIBDIR)/pkgconfig
KVD_CC         ?= cc
LIBKVD_CFLAGS  ?= -O2 -g
# Extra flags for the links (scripts/build-deb.sh: dpkg-buildflags' hardening, -z relro -z now).
LIBKVD_LDFLAGS ?=
LIBKVD_WARN    := -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wstrict-prototypes -Wvla
LIBKVD_DEFS    := -D_GNU_SOURCE -DKVD_DAEMON_PATH='"$(BINDIR)/kvd"' -I$(LIBKVD_DIR)/include -I$(LIBKVD_DIR)/src
# Its JSON code's libFuzzer target, libkvd-json, is built by fuzz/build.sh (make fuzz-build) with
# the Swift toolchain's clang, which has libFuzzer, and run by fuzz/run.sh with the others.

.PHONY: libkvd libkvd-test libkvd-install libkvd-uninstall libkvd-force

# The install paths built into the library (KVD_DAEMON_PATH) and kvd.pc, and the version: rewritten
# when they change, so that `make install PREFIX=...` never installs what was built for another PREFIX.
LIBKVD_STAMP := $(LIBKVD_OUT)/paths.stamp
$(LIBKVD_STAMP): libkvd-force
	@mkdir -p $(dir $@)
	@echo '$(BINDIR) $(PREFIX) $(LIBDIR) $(INCLUDEDIR) $(KVD_VERSION)' > $@.new
	@if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi

libkvd: $(LIBKVD_SO) $(LIBKVD_OUT)/libkvd.a $(LIBKVD_OUT)/kvd.pc

$(LIBKVD_OUT)/obj/%.o: $(LIBKVD_DIR)/src/%.c $(LIBKVD_HEADERS) $(LIBKVD_STAMP)
	@mkdir -p $(dir $@)
	$(KVD_CC) $(LIBKVD_CFLAGS) $(LIBKVD_WARN) $(LIBKVD_DEFS) -fPIC -fvisibility=hidden -c $< -o $@

LIBKVD_OBJECTS := $(LIBKVD_SOURCES:$(LIBKVD_DIR)/src/%.c=$(LIBKVD_OUT)/obj/%.o)

$(LIBKVD_SO): $(LIBKVD_OBJECTS)
	$(KVD_CC) $(LIBKVD_LDFLAGS) -shared -Wl,-soname,$(LIBKVD_SONAME) -Wl,--no-undefined -Wl,-z,defs -o $@ $^ -lpthread
	ln -sf $(LIBKVD_FILE) $(LIBKVD_OUT)/$(LIBKVD_SONAME)
	ln -sf $(LIBKVD_SONAME) $(LIBKVD_OUT)/libkvd.so

$(LIBKVD_OUT)/libkvd.a: $(LIBKVD_OBJECTS)
	rm -f $@ && ar rcs $@ $^

$(LIBKVD_OUT)/kvd.pc: $(LIBKVD_DIR)/kvd.pc.in $(LIBKVD_STAMP)
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(LIBKVD_VERSION)|g' $< > $@

$(LIBKVD_OUT)/test_libkvd: $(LIBKVD_DIR)/tests/test_libkvd.c $(LIBKVD_SO) $(LIBKVD_DIR)/include/kvd.h
	$(KVD_CC) $(LIBKVD_CFLAGS) $(LIBKVD_WARN) -Wno-format-truncation -D_GNU_SOURCE -I$(LIBKVD_DIR)/include -o $@ $< -L$(LIBKVD_OUT) -Wl,-rpath,'$$ORIGIN' -lkvd

## The test program against the real kvd and kvctl of `swift build`.
libkvd-test: libkvd $(LIBKVD_OUT)/test_libkvd
	$(SWIFT) build --product kvd
	$(SWIFT) build --product kvctl
	$(LIBKVD_DIR)/tests/run.sh "$(LIBKVD_OUT)/test_libkvd" "$$($(SWIFT) build --show-bin-path)"

libkvd-install: libkvd
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0644 $(LIBKVD_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(LIBKVD_FILE) $(DESTDIR)$(LIBDIR)/$(LIBKVD_SONAME)
	ln -sf $(LIBKVD_SONAME) $(DESTDIR)$(LIBDIR)/libkvd.so
	install -m 0644 $(LIBKVD_DIR)/include/kvd.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 0644 $(LIBKVD_OUT)/kvd.pc $(DESTDIR)$(PKGCONFIGDIR)/
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

libkvd-uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(LIBKVD_FILE) $(DESTDIR)$(LIBDIR)/$(LIBKVD_SONAME) $(DESTDIR)$(LIBDIR)/libkvd.so
	rm -f $(DESTDIR)$(INCLUDEDIR)/kvd.h $(DESTDIR)$(PKGCONFIGDIR)/kvd.pc
