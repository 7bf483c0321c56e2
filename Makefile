# kvd — build, test, demo, install.  `make test` and `make demo` install what is missing.
SWIFT      ?= swift
PYTHON     ?= python3
CONFIG     ?= debug
BUILD_DIR  := .build/$(CONFIG)
ifeq ($(shell id -u),0)
PREFIX     ?= /usr/local
UNITDIR    ?= $(PREFIX)/lib/systemd/user
else
PREFIX     ?= $(HOME)/.local
UNITDIR    ?= $(HOME)/.local/share/systemd/user
endif
BINDIR     ?= $(PREFIX)/bin
DOCDIR     ?= $(PREFIX)/share/doc/kvd

.PHONY: all build release deps test unit-tests python-tests demo install uninstall clean help

all: build

help:
	@echo "make demo     build and show kvd end to end (installs what is missing)"
	@echo "make test     run every test (installs what is missing)"
	@echo "make install  install kvd, kvctl and the systemd user units (PREFIX=$(PREFIX))"

## deps: Debian packages and the Python varlink client used by the tests.
deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build -c $(CONFIG)

release:
	$(MAKE) build CONFIG=release

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	$(PYTHON) tests/python/test_varlink.py "$$($(SWIFT) build --show-bin-path)"

demo: deps
	$(SWIFT) build
	scripts/demo.sh "$$($(SWIFT) build --show-bin-path)"

install: deps
	$(SWIFT) build -c release
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 .build/release/kvd .build/release/kvctl $(DESTDIR)$(BINDIR)/
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/
	for unit in kvd.socket kvd.service; do \
	  sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' systemd/$$unit > $(DESTDIR)$(UNITDIR)/$$unit; \
	  chmod 0644 $(DESTDIR)$(UNITDIR)/$$unit; \
	done
	@echo "installed; enable with: systemctl --user daemon-reload && systemctl --user enable --now kvd.socket"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/kvd $(DESTDIR)$(BINDIR)/kvctl $(DESTDIR)$(UNITDIR)/kvd.socket $(DESTDIR)$(UNITDIR)/kvd.service
	rm -rf $(DESTDIR)$(DOCDIR)

clean:
	rm -rf .build
