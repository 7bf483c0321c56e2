# clib/ — libkvd, the GSettings backend and kvd-dconf-import — built with meson + ninja
# (clib/meson.build and one meson.build per part). Included by the top Makefile.
#   make libkvd          .build/clib: libkvd.so.VERSION (+ libkvd.so.0, libkvd.so), libkvd.a, kvd.pc
#   make libkvd-test     its end-to-end test against a real kvd and kvctl (debug build), natively
#                        and under valgrind, then the contract cases on the C side (contract-c)
#   make libkvd-install  the .so, kvd.h and kvd.pc under PREFIX (make install runs it)
#   make giokvd          .build/clib/gio: libgiokvd.so (libkvd linked in statically), kvd-dconf-import
#   make giokvd-test     the unit tests, then clib/gio/tests/run.sh on a real kvd
#   make giokvd-install  the module into GIO's module folder (see GIOMODULEDIR), then gio-querymodules
#   make abi-check       abidiff of libkvd.so against clib/libkvd/abi/libkvd.abi (make test runs it)
#   make abi-baseline    that baseline written again from the built library (CONTRIBUTING.md)
# meson configures once per output folder (LIBKVD_OUT/meson), again only when the install paths,
# the version or the flags change; the files other scripts use are copied from it to LIBKVD_OUT
# and GIOKVD_OUT (scripts/build-deb.sh builds into its own with PREFIX=/usr and dpkg's flags).
LIBKVD_OUT     ?= .build/clib
GIOKVD_OUT     ?= $(LIBKVD_OUT)/gio
CLIB_BUILD     := $(LIBKVD_OUT)/meson
MESON          ?= meson
# kvd's version (scripts/version.sh reads Sources/KVProtocol/Version.swift): kvd.pc's Version and
# the library's file name. The soname's number is libkvd's ABI (libkvd.so.0: docs/releases.md).
KVD_VERSION    ?= $(shell scripts/version.sh)
LIBKVD_SONAME  := libkvd.so.0
LIBKVD_FILE    := libkvd.so.$(KVD_VERSION)
LIBDIR         ?= $(PREFIX)/lib
INCLUDEDIR     ?= $(PREFIX)/include
LIBKVD_CFLAGS  ?= -O2 -g
# Extra flags for the links (scripts/build-deb.sh: dpkg-buildflags' hardening, -z relro -z now).
LIBKVD_LDFLAGS ?=
# GIO's module folder. GLib loads modules only from its own folder (pkg-config's giomoduledir,
# /usr/lib/x86_64-linux-gnu/gio/modules on Debian) and from $GIO_EXTRA_MODULES: as root, make
# install puts the module in GLib's folder whatever PREFIX is (DESTDIR still applies), so that
# every app finds it, as the .deb does; as a user, in PREFIX/lib/gio/modules, which
# GIO_EXTRA_MODULES must then name (make install says so; docs/gsettings.md).
ifeq ($(shell id -u),0)
GIOMODULEDIR   ?= $(shell pkg-config --variable=giomoduledir gio-2.0)
else
GIOMODULEDIR   ?= $(PREFIX)/lib/gio/modules
endif
# Debian keeps gio-querymodules in libexec (/usr/lib/<arch>/glib-2.0/); GLib's gio-2.0.pc names it.
GIO_QUERYMODULES ?= $(or $(shell pkg-config --variable=gio_querymodules gio-2.0 2>/dev/null),gio-querymodules)
LIBKVD_ABI     := clib/libkvd/abi/libkvd.abi
LIBKVD_ABI_SUPPRESSIONS := clib/libkvd/abi/suppressions.ini

CLIB_OPTIONS := -Dprefix=$(PREFIX) -Dbindir=$(BINDIR) -Dlibdir=$(LIBDIR) -Dincludedir=$(INCLUDEDIR) \
  -Dmandir=$(MANDIR) -Dgiomoduledir=$(GIOMODULEDIR) -Dkvd_version=$(KVD_VERSION) -Ddaemon_path=$(BINDIR)/kvd \
  -Dc_args="$(LIBKVD_CFLAGS)" -Dc_link_args="$(LIBKVD_LDFLAGS)"
CLIB_STAMP := $(CLIB_BUILD)/options.stamp
MESON_INSTALL = $(MESON) install -C $(CLIB_BUILD) --no-rebuild --quiet $(if $(DESTDIR),--destdir $(abspath $(DESTDIR)))

.PHONY: libkvd libkvd-test libkvd-install libkvd-uninstall giokvd giokvd-test giokvd-glib-suite
.PHONY: giokvd-install giokvd-uninstall clib-configure abi-check abi-baseline contract-c

# Configured once; reconfigured when a meson.build changes (meson compile checks its targets'
# names before ninja would regenerate) or an option changes (so that `make install PREFIX=...` never
# installs what was built for another PREFIX: the daemon path and kvd.pc are built in).
clib-configure:
	@mkdir -p $(CLIB_BUILD)
	@echo '$(CLIB_OPTIONS)' > $(CLIB_STAMP).new
	@if [ ! -f $(CLIB_BUILD)/build.ninja ]; then \
	  $(MESON) setup $(CLIB_BUILD) clib $(CLIB_OPTIONS) >$(CLIB_BUILD)/setup.log 2>&1 || { cat $(CLIB_BUILD)/setup.log; exit 1; }; \
	elif ! cmp -s $(CLIB_STAMP).new $(CLIB_STAMP); then \
	  $(MESON) configure $(CLIB_BUILD) $(CLIB_OPTIONS) >$(CLIB_BUILD)/setup.log 2>&1 || { cat $(CLIB_BUILD)/setup.log; exit 1; }; \
	elif [ -n "$$(find clib -name meson.build -newer $(CLIB_BUILD)/build.ninja -o -name meson_options.txt -newer $(CLIB_BUILD)/build.ninja)" ]; then \
	  $(MESON) setup --reconfigure $(CLIB_BUILD) clib >$(CLIB_BUILD)/setup.log 2>&1 || { cat $(CLIB_BUILD)/setup.log; exit 1; }; fi
	@mv $(CLIB_STAMP).new $(CLIB_STAMP)

libkvd: clib-configure
	$(MESON) compile -C $(CLIB_BUILD) libkvd/kvd:shared_library libkvd/kvd:static_library libkvd/tests/test_libkvd \
	  libkvd/tests/contract_cases libkvd/tests/test_changes
	cp -P $(CLIB_BUILD)/libkvd/$(LIBKVD_FILE) $(CLIB_BUILD)/libkvd/$(LIBKVD_SONAME) $(CLIB_BUILD)/libkvd/libkvd.so \
	  $(CLIB_BUILD)/libkvd/kvd.pc $(CLIB_BUILD)/libkvd/tests/test_libkvd $(LIBKVD_OUT)/
	@# meson's libkvd.a in its folder is a thin archive (names its objects): a real one here
	rm -f $(LIBKVD_OUT)/libkvd.a && ar rcs $(LIBKVD_OUT)/libkvd.a $$(ar t $(CLIB_BUILD)/libkvd/libkvd.a)

giokvd: libkvd
	$(MESON) compile -C $(CLIB_BUILD) gio/giokvd tools/kvd-dconf-import gio/tests/test_mapping gio/tests/test_values \
	  gio/tests/test_start
	@mkdir -p $(GIOKVD_OUT)
	cp $(CLIB_BUILD)/gio/libgiokvd.so $(CLIB_BUILD)/tools/kvd-dconf-import $(CLIB_BUILD)/gio/tests/test_mapping \
	  $(CLIB_BUILD)/gio/tests/test_values $(CLIB_BUILD)/gio/tests/test_start $(GIOKVD_OUT)/

## kvd_changes_from_json's two paths against each other, the test program against the real kvd
## and kvctl of `swift build`, then the contract cases.
libkvd-test: libkvd
	$(CLIB_BUILD)/libkvd/tests/test_changes
	$(SWIFT) build --product kvd
	$(SWIFT) build --product kvctl
	clib/libkvd/tests/run.sh "$(LIBKVD_OUT)/test_libkvd" "$$($(SWIFT) build --show-bin-path)"
	$(MAKE) contract-c

## The contract cases of Tests/Contract/ on libkvd's rules (the Swift side: ContractCaseTests).
contract-c: libkvd
	$(CLIB_BUILD)/libkvd/tests/contract_cases Tests/Contract

# The installs: meson install by tag (libkvd: the library, its links, kvd.pc; devel: kvd.h).
libkvd-install: libkvd
	$(MESON_INSTALL) --tags libkvd,devel
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

libkvd-uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(LIBKVD_FILE) $(DESTDIR)$(LIBDIR)/$(LIBKVD_SONAME) $(DESTDIR)$(LIBDIR)/libkvd.so
	rm -f $(DESTDIR)$(INCLUDEDIR)/kvd.h $(DESTDIR)$(LIBDIR)/pkgconfig/kvd.pc

giokvd-test: giokvd
	$(GIOKVD_OUT)/test_mapping
	$(GIOKVD_OUT)/test_values
	$(GIOKVD_OUT)/test_start
	if command -v valgrind >/dev/null; then GIOKVD_ROUNDS=2000 valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite $(GIOKVD_OUT)/test_values; fi
	$(SWIFT) build --product kvd
	$(SWIFT) build --product kvctl
	clib/gio/tests/run.sh "$(GIOKVD_OUT)" "$$($(SWIFT) build --show-bin-path)"
	clib/gio/tests/switch.sh "$(GIOKVD_OUT)" "$$($(SWIFT) build --show-bin-path)"  # kvctl --system gnome and the move at login (root: a private /etc)
	clib/gio/tests/switch-regressions.sh  # the attack on them (attack/38/), the defects fixed

# giokvd: the module (GIOMODULEDIR), kvd-dconf-import (BINDIR) and its man page (man).
giokvd-install: giokvd
	$(MESON_INSTALL) --tags giokvd,man
	if [ -z "$(DESTDIR)" ] && command -v $(GIO_QUERYMODULES) >/dev/null; then $(GIO_QUERYMODULES) $(GIOMODULEDIR); fi
	@if [ "$(GIOMODULEDIR)" != "$$(pkg-config --variable=giomoduledir gio-2.0)" ]; then \
	  echo "the GSettings backend is in $(GIOMODULEDIR), where GLib does not look: export GIO_EXTRA_MODULES=$(GIOMODULEDIR) (then GSETTINGS_BACKEND=kvd)"; fi

giokvd-uninstall:
	rm -f $(DESTDIR)$(GIOMODULEDIR)/libgiokvd.so $(DESTDIR)$(BINDIR)/kvd-dconf-import $(DESTDIR)$(MANDIR)/man1/kvd-dconf-import.1
	if [ -z "$(DESTDIR)" ] && command -v $(GIO_QUERYMODULES) >/dev/null && [ -d $(GIOMODULEDIR) ]; then $(GIO_QUERYMODULES) $(GIOMODULEDIR); fi

## GLib's own gio/tests/gsettings.c (fetched with apt-get source into .build/glib-source, once per
## GLib version) on kvd and on the memory backend, test by test (clib/gio/tests/glib-suite.sh).
giokvd-glib-suite: giokvd
	$(SWIFT) build --product kvd
	$(SWIFT) build --product kvctl
	clib/gio/tests/glib-suite.sh "$(GIOKVD_OUT)" "$$($(SWIFT) build --show-bin-path)"

## libkvd's ABI against the stored baseline (abidw's XML): abidiff's exit code is a bit field
## (1 error, 2 usage, 4 a change, 8 an incompatible change); any change the suppressions file does
## not list fails. After a deliberate, compatible addition: make abi-baseline, and commit the file.
abi-check: libkvd
	@status=0; abidiff --no-added-syms $(if $(wildcard $(LIBKVD_ABI_SUPPRESSIONS)),--suppressions $(LIBKVD_ABI_SUPPRESSIONS)) \
	  --headers-dir2 clib/libkvd/include $(LIBKVD_ABI) $(LIBKVD_OUT)/$(LIBKVD_FILE) || status=$$?; \
	if [ $$status -ne 0 ]; then \
	  echo "abi-check: libkvd's ABI differs from $(LIBKVD_ABI) (abidiff exit $$status:$$( [ $$((status & 8)) -ne 0 ] && echo ' incompatible')$$( [ $$((status & 4)) -ne 0 ] && echo ' changed')$$( [ $$((status & 3)) -ne 0 ] && echo ' abidiff failed'))" >&2; \
	  echo "abi-check: a break needs a new soname (docs/releases.md); a compatible addition: make abi-baseline" >&2; exit 1; fi
	@echo "abi-check: libkvd.so matches $(LIBKVD_ABI)"

abi-baseline: libkvd
	@mkdir -p $(dir $(LIBKVD_ABI))
	abidw --headers-dir clib/libkvd/include --no-corpus-path --out-file $(LIBKVD_ABI) $(LIBKVD_OUT)/$(LIBKVD_FILE)
	@# the checkout's folder is no part of the ABI: the same file from any clone
	sed -i "s| comp-dir-path='[^']*'||" $(LIBKVD_ABI)
