# libgiokvd.so, kvd's GSettings backend (a GIO module; clib/gio/): included by the top Makefile.
#   make giokvd          .build/clib/gio/libgiokvd.so (links libkvd statically: one file to install)
#                        and kvd-dconf-import (dconf dump / | kvd-dconf-import)
#   make giokvd-test     clib/gio/tests/run.sh: the gsettings CLI and a PyGObject program on a real kvd
#   make giokvd-install  the module into GIO's module folder (see GIOMODULEDIR), then gio-querymodules
GIOKVD_DIR     := clib/gio
GIOKVD_OUT     := .build/clib/gio
GIOKVD_SO      := $(GIOKVD_OUT)/libgiokvd.so
GIOKVD_SOURCES := $(wildcard $(GIOKVD_DIR)/*.c)
GIO_CFLAGS      = $(shell pkg-config --cflags gio-2.0 gio-unix-2.0)
GIO_LIBS        = $(shell pkg-config --libs gio-2.0 gio-unix-2.0)
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

.PHONY: giokvd giokvd-test giokvd-glib-suite giokvd-install giokvd-uninstall

GIOKVD_IMPORT  := $(GIOKVD_OUT)/kvd-dconf-import

giokvd: $(GIOKVD_SO) $(GIOKVD_IMPORT)

# dconf dump / | kvd-dconf-import: the same mapping and value forms as the module.
$(GIOKVD_IMPORT): $(GIOKVD_DIR)/tools/kvd-dconf-import.c $(GIOKVD_DIR)/mapping.c $(GIOKVD_DIR)/convert.c $(GIOKVD_DIR)/giokvd.h $(LIBKVD_OUT)/libkvd.a $(LIBKVD_STAMP)
	@mkdir -p $(dir $@)
	$(KVD_CC) $(LIBKVD_CFLAGS) $(LIBKVD_LDFLAGS) $(LIBKVD_WARN) -Wno-shadow -D_GNU_SOURCE -DKVD_VERSION='"$(KVD_VERSION)"' -I$(LIBKVD_DIR)/include $(GIO_CFLAGS) \
	  -o $@ $< $(GIOKVD_DIR)/mapping.c $(GIOKVD_DIR)/convert.c $(LIBKVD_OUT)/libkvd.a $(GIO_LIBS) -lpthread -lm

$(GIOKVD_SO): $(GIOKVD_SOURCES) $(GIOKVD_DIR)/giokvd.h $(LIBKVD_OUT)/libkvd.a
	@mkdir -p $(dir $@)
	$(KVD_CC) $(LIBKVD_CFLAGS) $(LIBKVD_LDFLAGS) $(LIBKVD_WARN) -Wno-shadow -D_GNU_SOURCE -fPIC -shared -fvisibility=hidden -I$(LIBKVD_DIR)/include $(GIO_CFLAGS) \
	  -o $@ $(GIOKVD_SOURCES) $(LIBKVD_OUT)/libkvd.a -Wl,--exclude-libs,ALL -Wl,--no-undefined $(GIO_LIBS) -lpthread -lm

$(GIOKVD_OUT)/test_mapping: $(GIOKVD_DIR)/tests/test_mapping.c $(GIOKVD_DIR)/mapping.c $(GIOKVD_DIR)/giokvd.h
	@mkdir -p $(dir $@)
	$(KVD_CC) $(LIBKVD_CFLAGS) $(LIBKVD_WARN) -Wno-shadow -D_GNU_SOURCE -I$(LIBKVD_DIR)/include $(GIO_CFLAGS) -o $@ $< $(GIOKVD_DIR)/mapping.c $(GIO_LIBS)

$(GIOKVD_OUT)/test_values: $(GIOKVD_DIR)/tests/test_values.c $(GIOKVD_DIR)/convert.c $(GIOKVD_DIR)/giokvd.h $(LIBKVD_OUT)/libkvd.a
	@mkdir -p $(dir $@)
	$(KVD_CC) $(LIBKVD_CFLAGS) $(LIBKVD_WARN) -Wno-shadow -D_GNU_SOURCE -I$(LIBKVD_DIR)/include $(GIO_CFLAGS) -o $@ $< $(GIOKVD_DIR)/convert.c $(LIBKVD_OUT)/libkvd.a $(GIO_LIBS) -lpthread -lm

giokvd-test: giokvd $(GIOKVD_OUT)/test_mapping $(GIOKVD_OUT)/test_values
	$(GIOKVD_OUT)/test_mapping
	$(GIOKVD_OUT)/test_values
	if command -v valgrind >/dev/null; then GIOKVD_ROUNDS=2000 valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite $(GIOKVD_OUT)/test_values; fi
	$(SWIFT) build --product kvd
	$(SWIFT) build --product kvctl
	$(GIOKVD_DIR)/tests/run.sh "$(GIOKVD_OUT)" "$$($(SWIFT) build --show-bin-path)"

giokvd-install: giokvd
	install -d $(DESTDIR)$(GIOMODULEDIR)
	install -m 0644 $(GIOKVD_SO) $(DESTDIR)$(GIOMODULEDIR)/
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(GIOKVD_IMPORT) $(DESTDIR)$(BINDIR)/
	install -m 0644 man/kvd-dconf-import.1 $(DESTDIR)$(MANDIR)/man1/
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
	$(GIOKVD_DIR)/tests/glib-suite.sh "$(GIOKVD_OUT)" "$$($(SWIFT) build --show-bin-path)"
