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
# The system instance's units (kvd-system.socket, kvd-system.service): systemd reads
# /usr/local/lib/systemd/system and /usr/lib/systemd/system, so they only take effect as root.
SYSTEMUNITDIR ?= $(PREFIX)/lib/systemd/system
USER_UNITS   := kvd.socket kvd.service kvd-gnome-login.service
SYSTEM_UNITS := kvd-system.socket kvd-system.service
BINDIR     ?= $(PREFIX)/bin
# Installed and benchmarked programs link the Swift runtime statically: kvctl then starts in about
# 2 ms instead of 4 (a shell script calls it once per setting), and kvd starts faster on activation.
RELEASE_FLAGS ?= -c release --static-swift-stdlib
DOCDIR     ?= $(PREFIX)/share/doc/kvd
MANDIR     ?= $(PREFIX)/share/man
# Where each shell looks for completions under PREFIX: bash-completion's completionsdir (it
# searches $XDG_DATA_DIRS, and ~/.local/share for a user), zsh's vendor-completions under /usr
# (Debian's fpath) or site-functions elsewhere, fish's vendor_completions.d.
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/share/zsh/vendor-completions,$(PREFIX)/share/zsh/site-functions)
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d

FUZZ_SECONDS ?= 60
SMOKE_SECONDS ?= 10

.PHONY: sandbox-test dconf-layer-test all build release deps check test demo install uninstall clean help fuzz fuzz-smoke fuzz-build test-sanitize
.PHONY: bench bench-smoke format format-check deb docs

## The toolchain's swift-format with the repository's .swift-format (4 spaces, lines up to 120)
## and every lint rule on but three (CONTRIBUTING.md, "Formatting and lint", says why):
## AllPublicDeclarationsHaveDocumentation (public in the inner targets only means "used by the
## package's other targets"; KVClient's API, the one for users, is checked by scripts/docs.sh),
## BeginDocumentationCommentWithOneLineSummary (it wants a blank `///` line after the first
## sentence of 379 comments whose first sentence is already the summary), NeverForceUnwrap (the
## remaining `!` state invariants: a non-empty buffer's baseAddress, a key just inserted).
## Tests/.swift-format is the same but allows `try!` (a test that throws there fails anyway).
## `make format` fixes what the formatter can; `make test` fails on unformatted code or a lint
## finding.
.DEFAULT_GOAL := all
FORMAT_PATHS := Sources Tests fuzz Package.swift
format:
	$(SWIFT) format --in-place --recursive --parallel $(FORMAT_PATHS)

format-check:
	@$(SWIFT) format lint --strict --recursive --parallel $(FORMAT_PATHS) || { echo "unformatted code: run make format" >&2; exit 1; }

all: build

help:
	@echo "make demo     build and show kvd end to end, the system layer (as root) and a fleet on a 3-member etcd (installs what is missing)"
	@echo "make check    the inner loop: the static checks, the build and the tests but the end-to-end and fleet suites"
	@echo "make test     run every test, the end-to-end suite on the debug and on the release build (installs what is missing)"
	@echo "scripts/release.sh X.Y.Z  check that this commit is release X.Y.Z, run make test, tag it vX.Y.Z (docs/releases.md)"
	@echo "make deb      build dist/kvd_VERSION_amd64.deb (static Swift runtime; lintian-clean)"
	@echo "make install  install kvd, kvctl, habits, the systemd units (user and system), man pages, completions, libkvd and the GSettings backend (PREFIX=$(PREFIX))"
	@echo "make libkvd   the C client library (.build/clib: libkvd.so, kvd.pc); make libkvd-test runs its tests"
	@echo "make giokvd   the GSettings backend (.build/clib/gio: libgiokvd.so, kvd-dconf-import); make giokvd-test, giokvd-glib-suite test it"
	@echo "make fuzz     run each libFuzzer target for FUZZ_SECONDS (default 60)"
	@echo "make test-sanitize  run the tests under AddressSanitizer and ThreadSanitizer"
	@echo "make bench    kvd beside Redis, SQLite, UserDefaults and dconf: bench/results.{json,md,svg}"
	@echo "make format   format the Swift code with swift-format (make test checks it)"

## deps: Debian packages and the Python varlink client used by the tests.
deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build -c $(CONFIG)

release:
	$(MAKE) build CONFIG=release

## make check: the inner loop, a few minutes on two cores: the static checks, the debug build and
## every test target but the two slow ones, the end-to-end suite (real kvds as real users, shells,
## systemd-socket-activate) and the fleet's (real etcd clusters).
## make test runs check, then everything else: what CI runs.
FAST_TESTS_SKIP := --skip EndToEndTests --skip KVFleetTests
check: deps format-check
	$(PYTHON) scripts/check-links.py  # every relative link, cited file and cited section in the documents, man pages and comments
	$(PYTHON) scripts/check-architecture.py  # ARCHITECTURE.md's target table is Package.swift's
	$(PYTHON) scripts/check-owners.py  # the storage and loop types' stored vars are written only in their own files
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) $(PYTHON) scripts/check-imports.py
	$(PYTHON) scripts/check-size.py  # function bodies within 40 lines of code, files within 400
	SWIFT=$(SWIFT) scripts/check-seams.sh  # with scripts/check-nm.sh: no object outside KVSystem calls the C library's system calls
	$(SWIFT) test --skip-build $(FAST_TESTS_SKIP)

test: check
	$(PYTHON) scripts/check-quickstart.py "$$($(SWIFT) build --show-bin-path)"  # README.md's quick-start lines against a real kvd
	SWIFT=$(SWIFT) scripts/docs.sh
	SWIFT=$(SWIFT) scripts/check-man.sh
	$(SWIFT) test --skip-build --filter 'EndToEndTests|KVFleetTests'  # what check skipped
	SWIFT=$(SWIFT) scripts/check-consumer.sh  # an app taking KVClient by .upToNextMinor(from: VERSION), as README.md recommends, builds in debug and release and runs against kvd
	$(PYTHON) Tests/Python/test_varlink.py "$$($(SWIFT) build --show-bin-path)"
	$(MAKE) sandbox-test  # sandboxed apps (Flatpak as bubblewrap lays it out) reach only their own settings
	$(MAKE) libkvd-test  # the C client library against the real kvd and kvctl, natively and under valgrind
	$(MAKE) abi-check  # libkvd.so's ABI against clib/libkvd/abi/libkvd.abi (abidiff)
	$(MAKE) giokvd-test  # the GSettings backend: the gsettings CLI and PyGObject on a real kvd
	$(MAKE) dconf-layer-test  # dconf's keyfiles and locks through the system instance, read by gsettings on kvd and by dconf itself
	$(MAKE) giokvd-glib-suite  # GLib's own gio/tests/gsettings.c on kvd (apt-get source glib2.0, cached in .build)
	$(MAKE) fuzz-smoke
	$(MAKE) bench-smoke
	$(SWIFT) build $(RELEASE_FLAGS)  # what make install, make deb and make bench build: every target, release
	KVD_BIN_DIR="$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)" $(SWIFT) test --skip-build --filter EndToEndTests  # the end-to-end suite again, on the programs the .deb ships (one to two minutes)
	scripts/test-deb.sh "$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)"  # the .deb: lintian, install, use, remove, purge

## make sandbox-test: the real kvd with clients run by bubblewrap in a sandbox laid out as
## Flatpak lays it (/.flatpak-info, kvd's socket bound in): the Python varlink client, the real
## kvctl, and gsettings with the GIO module (Tests/Python/test_sandbox.py; docs/sandboxes.md).
sandbox-test: giokvd
	$(SWIFT) build
	KVD_GIO_MODULE_DIR="$(CURDIR)/.build/clib/gio" $(PYTHON) Tests/Python/test_sandbox.py "$$($(SWIFT) build --show-bin-path)"

## make dconf-layer-test: dconf's admin files (profile, keyfiles, locks) read by the system
## instance, checked with the real gsettings on kvd and against dconf itself (scripts/dconf-layer-test.sh),
## then the attack's scripts (attack/38-*.sh) against the real kvd.
dconf-layer-test: giokvd
	$(SWIFT) build --product kvd
	$(SWIFT) build --product kvctl
	scripts/dconf-layer-test.sh "$(GIOKVD_OUT)" "$$($(SWIFT) build --show-bin-path)"
	for script in attack/38-0[123478]-*.sh attack/38b/0[36]-*.sh; do sh "$$script" "$$($(SWIFT) build --show-bin-path)" || exit 1; done  # the attack's findings stay fixed (attack/38-dconf-layer.md, attack/38b-report.md; 38-05, 38-06 and the 38b floods are slow, their unit tests in KVDaemonTests)

## make docs: KVClient's DocC archive (.build/docs/KVClient.doccarchive) with the toolchain's
## docc; fails on a DocC warning or an undocumented public symbol. `make test` runs it.
docs:
	SWIFT=$(SWIFT) scripts/docs.sh

## make bench: kvd beside Redis, SQLite, Foundation's UserDefaults and dconf (kvd's GSettings
## backend, bench/gsettings.py) in one run (release build; installs redis-server, sqlite3 and
## dconf-service when missing), into bench/results.{json,md,svg}; about 9 min (the scaling and tail rows reach 1,000 clients).
## BENCH_QUICK=1: the smoke mode (tiny durations, installs nothing, into .build/bench-smoke).
BENCH_SCRATCH ?= .build
bench: deps giokvd
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BENCH_SCRATCH)
	$(PYTHON) bench/run.py --bin "$$($(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BENCH_SCRATCH) --show-bin-path)" --gio-modules $(GIOKVD_OUT) $(if $(filter 1,$(BENCH_QUICK)),--quick)

## The smoke mode on the debug build, as `make test` runs it: proves the benchmark still works
## (a few seconds; peers that are not installed are skipped).
bench-smoke: giokvd
	$(SWIFT) build
	$(PYTHON) bench/run.py --quick --no-install --bin "$$($(SWIFT) build --show-bin-path)" --gio-modules $(GIOKVD_OUT)

## make deb: dist/kvd_VERSION_amd64.deb (scripts/build-deb.sh: dpkg-deb from a staged tree).
deb: deps
	$(SWIFT) build $(RELEASE_FLAGS)
	scripts/build-deb.sh "$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)"

## Fuzzing: libFuzzer targets in fuzz/, built with swiftc into .build/fuzz (see fuzz/build.sh).
fuzz-build:
	fuzz/build.sh

fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

fuzz-smoke: fuzz-build
	FUZZ_SECONDS=$(SMOKE_SECONDS) fuzz/run.sh

## The whole suite under AddressSanitizer, then ThreadSanitizer, each in its own build folder.
## The kvd the end-to-end tests start is built with the same sanitizer; every report (from the
## test process or a kvd) is kept in .build/sanitizer-reports and fails the target.
## Leak checking is off: Swift keeps enum tags in pointers' spare bits, which LeakSanitizer
## cannot follow, so it reports live values as leaked. TSan suppressions: Tests/tsan.supp.
## Sanitized code is several times slower, and ASan's quarantine and shadow memory swamp RSS
## figures: fewer kill rounds, a looser latency bound, no RSS bounds.
SANITIZER_REPORTS := $(CURDIR)/.build/sanitizer-reports
SANITIZE_ENV := SWIFT_BACKTRACE=enable=no KVD_KILL_ROUNDS=20 KVD_TEST_LATENCY_BOUND=2 KVD_TEST_NO_RSS_BOUNDS=1
test-sanitize: deps
	rm -rf $(SANITIZER_REPORTS) && mkdir -p $(SANITIZER_REPORTS)
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan
	$(SANITIZE_ENV) ASAN_OPTIONS=detect_leaks=0:log_path=$(SANITIZER_REPORTS)/asan \
	  $(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan || { cat $(SANITIZER_REPORTS)/* 2>/dev/null; exit 1; }
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	$(SANITIZE_ENV) TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/Tests/tsan.supp log_path=$(SANITIZER_REPORTS)/tsan" \
	  $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan || { cat $(SANITIZER_REPORTS)/* 2>/dev/null; exit 1; }
	@if ls $(SANITIZER_REPORTS)/* >/dev/null 2>&1; then cat $(SANITIZER_REPORTS)/*; echo "sanitizer reports above"; exit 1; fi
	@echo "test-sanitize: no AddressSanitizer or ThreadSanitizer reports"

demo: deps
	$(SWIFT) build
	scripts/demo.sh "$$($(SWIFT) build --show-bin-path)"

install: deps
	$(SWIFT) build $(RELEASE_FLAGS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSTEMUNITDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 .build/release/kvd .build/release/kvctl .build/release/kvctl-plist .build/release/habits $(DESTDIR)$(BINDIR)/
	install -d -m 0755 $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR)/docs/reference
	install -m 0644 README.md ARCHITECTURE.md CHANGELOG.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 $(wildcard docs/*.md) $(DESTDIR)$(DOCDIR)/docs/
	install -m 0644 docs/reference/*.md $(DESTDIR)$(DOCDIR)/docs/reference/
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	install -m 0644 man/kvctl.1 man/habits.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 man/kvd.8 $(DESTDIR)$(MANDIR)/man8/
	install -d $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	.build/release/kvctl completion bash > $(DESTDIR)$(BASHCOMPDIR)/kvctl
	.build/release/kvctl completion zsh > $(DESTDIR)$(ZSHCOMPDIR)/_kvctl
	.build/release/kvctl completion fish > $(DESTDIR)$(FISHCOMPDIR)/kvctl.fish
	chmod 0644 $(DESTDIR)$(BASHCOMPDIR)/kvctl $(DESTDIR)$(ZSHCOMPDIR)/_kvctl $(DESTDIR)$(FISHCOMPDIR)/kvctl.fish
	for unit in $(USER_UNITS:%=$(UNITDIR)/%) $(SYSTEM_UNITS:%=$(SYSTEMUNITDIR)/%); do \
	  sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' systemd/$${unit##*/} > $(DESTDIR)$$unit; \
	  chmod 0644 $(DESTDIR)$$unit; \
	done
	$(MAKE) libkvd-install
	$(MAKE) giokvd-install
	@echo "installed; enable with: systemctl --user daemon-reload && systemctl --user enable --now kvd.socket"
	@echo "the system instance (as root): groupadd --system kvd-admin; systemctl daemon-reload && systemctl enable --now kvd-system.socket"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/kvd $(DESTDIR)$(BINDIR)/kvctl $(DESTDIR)$(BINDIR)/kvctl-plist $(DESTDIR)$(BINDIR)/habits
	rm -f $(USER_UNITS:%=$(DESTDIR)$(UNITDIR)/%) $(SYSTEM_UNITS:%=$(DESTDIR)$(SYSTEMUNITDIR)/%)
	rm -rf $(DESTDIR)$(DOCDIR)
	rm -f $(DESTDIR)$(MANDIR)/man1/kvctl.1 $(DESTDIR)$(MANDIR)/man1/habits.1 $(DESTDIR)$(MANDIR)/man8/kvd.8
	rm -f $(DESTDIR)$(BASHCOMPDIR)/kvctl $(DESTDIR)$(ZSHCOMPDIR)/_kvctl $(DESTDIR)$(FISHCOMPDIR)/kvctl.fish
	$(MAKE) libkvd-uninstall
	$(MAKE) giokvd-uninstall

clean:
	rm -rf .build

## clib/ with meson: libkvd (make libkvd, libkvd-test, libkvd-install), the GSettings backend
## (make giokvd, giokvd-test, giokvd-glib-suite, giokvd-install), make abi-check, abi-baseline.
include clib/clib.mk
