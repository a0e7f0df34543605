# birdctl — a Bluetooth Low Energy central for Bird peripherals, over BlueZ.
#
#   make help          this list
#   make demo          real bluetoothd in a VM with simulated birds: birdctl scan, then watch
#                      (Debian 13; VM_PLATFORM=bookworm: Debian 12)
#   make test          every test (installs what it needs; CI runs this)
#   make build         debug build: .build/debug/birdctl
#   make release       what users install: optimised, static Swift runtime, git revision
#   make build-swift60 the build and the tests' build with Debian 13's own Swift (6.0.3), in a
#                      Debian 13 root built here: the oldest Swift we build with (make test runs it);
#                      make release-swift60 adds the release build with every flag
#   make release-arm64 the release build for arm64 (a Raspberry Pi), cross-built by Debian 13's Swift
#                      against an arm64 sysroot made here: .build/arm64/aarch64-unknown-linux-gnu/release/
#   make install       installs birdctl, its man page, completions and systemd unit
#                      (PREFIX=/usr/local, DESTDIR=); make uninstall removes exactly those
#   make deb           a Debian package in .build/deb/ (runs without Swift)
#   make deb-arm64     the arm64 package of release-arm64, in .build/deb-arm64/
#   make deps          installs the Debian packages the build and tests need (as root)
#   make bench         birdctl beside a C floor, bleak and simplepyble, and its MQTT
#                      gateway beside watch --json | mosquitto_pub (docs/performance.md); then
#                      streaming on real bluetoothd in the VM beside bleak and bluetoothctl;
#                      writes the figures into docs/figures.md
#   make fuzz          the libFuzzer targets, FUZZ_SECONDS each
#   make test-vm-arm64 the arm64 .deb installed in an arm64 VM (Debian 13 under qemu-system-aarch64)
#                      with real bluetoothd: scan, read, link loss, pairing, watch --all through
#                      3 links, the MQTT gateway to a broker on this machine (not in make test)
#   make soak          a Bumble bird out of range and back SOAK_CYCLES (50) times under one
#                      watch in the VM: every cycle recovers, private memory stays flat
#   make soak-service  watch --all --mqtt for SOAK_MINUTES (60) in the VM: 8 Bumble birds,
#                      passers-by, links lost, broker and bluetoothd restarted in turn every
#                      SOAK_EVENT_SECONDS (60); every reading on the broker, memory and fds flat
#
# The other targets (test-unit, test-vm, test-install, test-ha, sanitize, fuzz-regress,
# deps-vm, deps-vm-arm64, deps-bench, deps-install, deps-ha, bench-venv, bench-fake, bench-system, static-link,
# link-order, link-order-check, swift60-root, arm64-sysroot, clean) are parts of these.

SHELL := /bin/bash
SWIFT ?= swift
# How many tests run at once: the test support itself bounds Swift Testing to
# 16 unless SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH is set
# (Sources/CTestSupport/Parallelism.c), so `swift test` alone runs as this does.
# libdbus headers for the CDBus module; a dbus-daemon for private test buses;
# Debian's python3 with dbus-python, GLib and python-dbusmock for the fake BlueZ;
# libmosquitto for the MQTT gateway, and a real broker, its clients and openssl
# (a test CA) to test it against; Prometheus (server and promtool) to scrape --metrics.
DEB_PACKAGES := libdbus-1-dev pkg-config dbus-daemon python3 python3-venv python3-dbus python3-gi python3-dbusmock \
	libmosquitto-dev mosquitto mosquitto-clients openssl gdb prometheus

# The benchmarks: the C floor, a venv for the peers, callgrind for profiling,
# bluez for bluetoothctl (a peer for reads).
BENCH_PACKAGES := gcc binutils python3-venv valgrind bluez

# The real-BlueZ tier: Debian's kernel under qemu, bluetoothd, btvirt; a venv
# for Bumble, the second Bluetooth stack whose birds it also runs.
VM_PACKAGES := qemu-system-x86 linux-image-amd64 bluez bluez-test-tools busybox-static cpio python3-venv debootstrap
BUMBLE_VENV := .build/vm/bumble-venv
# The tier runs on two platforms: Debian 13 from a root built here (pinned by
# fixtures/vm/trixie.recipe; rebuilt when it or a venv's requirements change)
# and Debian 12, this machine's own root. make demo and make soak use
# VM_PLATFORM (make demo VM_PLATFORM=bookworm: the older one).
TRIXIE_ROOT := .build/vm/trixie-root
TRIXIE_INPUTS := fixtures/vm/trixie.recipe fixtures/vm/bumble-requirements.txt fixtures/vm/bleak-requirements.txt \
	fixtures/proxy/requirements.txt
VM_PLATFORMS ?= trixie bookworm
VM_PLATFORM ?= trixie

# The Home Assistant tier: Home Assistant Core in a venv pinned by
# fixtures/ha/requirements.txt (made again when that file changes). Three of the
# ESPHome integration's packages build C extensions at install (netifaces,
# cached_ipaddress, chacha20poly1305-reuseable): gcc and Python's headers.
HA_PACKAGES := python3-venv python3-dev gcc
HA_VENV := .build/ha/venv
# Home Assistant's ESPHome client library (aioesphomeapi, its pin), for the proxy's tests.
PROXY_VENV := .build/proxy-venv

# Installing and packaging: shells whose completions are checked, man, the .deb's tools.
INSTALL_TEST_PACKAGES := bash zsh fish man-db groff-base systemd dpkg-dev lintian bluez

.PHONY: help deps deps-vm deps-vm-arm64 test-vm-arm64 deps-bench deps-install deps-ha test-ha apt-packages build release static-link link-order link-order-check demo \
	build-swift60 release-swift60 swift60-root release-arm64 arm64-sysroot \
	soak soak-service test test-unit test-vm \
	bench-venv bench-fake bench-system \
	test-install install install-files uninstall deb deb-arm64 sanitize fuzz fuzz-build fuzz-regress bench clean

help:
	@sed -n '3,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@$(MAKE) --no-print-directory apt-packages PACKAGES="$(DEB_PACKAGES)"
	@cmp -s fixtures/proxy/requirements.txt $(PROXY_VENV)/requirements.txt || { \
	  rm -rf $(PROXY_VENV) && /usr/bin/python3 -m venv $(PROXY_VENV) && \
	  $(PROXY_VENV)/bin/pip install -q --disable-pip-version-check -r fixtures/proxy/requirements.txt && \
	  cp fixtures/proxy/requirements.txt $(PROXY_VENV)/requirements.txt; }

deps-vm:
	@$(MAKE) --no-print-directory apt-packages PACKAGES="$(DEB_PACKAGES) $(VM_PACKAGES)"
	@# The proxy's ESPHome client (bumble_proxy): on Debian 12, the host's venv through the share.
	@$(MAKE) --no-print-directory deps
	@cmp -s fixtures/vm/bumble-requirements.txt $(BUMBLE_VENV)/requirements.txt || { \
	  rm -rf $(BUMBLE_VENV) && /usr/bin/python3 -m venv $(BUMBLE_VENV) && \
	  $(BUMBLE_VENV)/bin/pip install -q --disable-pip-version-check -r fixtures/vm/bumble-requirements.txt && \
	  cp fixtures/vm/bumble-requirements.txt $(BUMBLE_VENV)/requirements.txt; }
	@cat $(TRIXIE_INPUTS) | cmp -s - $(TRIXIE_ROOT).recipe || \
	  fixtures/vm/build-root.sh $(TRIXIE_ROOT) $(TRIXIE_INPUTS)

deps-bench:
	@$(MAKE) --no-print-directory apt-packages PACKAGES="$(DEB_PACKAGES) $(BENCH_PACKAGES)"

deps-install:
	@$(MAKE) --no-print-directory apt-packages PACKAGES="$(DEB_PACKAGES) $(INSTALL_TEST_PACKAGES)"

deps-ha:
	@$(MAKE) --no-print-directory apt-packages PACKAGES="$(DEB_PACKAGES) $(HA_PACKAGES)"
	@cmp -s fixtures/ha/requirements.txt $(HA_VENV)/requirements.txt || { \
	  rm -rf $(HA_VENV) && /usr/bin/python3 -m venv $(HA_VENV) && \
	  $(HA_VENV)/bin/pip install -q --disable-pip-version-check -r fixtures/ha/requirements.txt && \
	  cp fixtures/ha/requirements.txt $(HA_VENV)/requirements.txt; }

# Installs the Debian packages in PACKAGES that are missing (as root).
apt-packages:
	@missing=""; \
	for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

build: deps
	$(SWIFT) build

# What a user would install: optimised, the Swift runtime linked in (starts
# sooner), and the git revision it was built from for `birdctl --version`.
# What each choice below saves is measured in docs/performance.md, 'Start-up'
# and 'What a read maps'.
REVISION := $(shell r=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD || r=$$r-dirty; echo $$r; })
# --disable-local-rpath: with the Swift runtime inside, birdctl needs no
# RUNPATH of $$ORIGIN, which made the loader look for libdbus and the C++
# runtime in /usr/bin (and its hwcaps and tls subdirectories) first.
# The binary needs only libc and libm: libdbus, the C++ runtime and libgcc come
# from their static archives (STATIC_LINK below), so the loader maps 3 libraries,
# not 13, and resolves none of libstdc++'s symbols. lld packs the relative
# relocations (DT_RELR, glibc 2.36), which the loader would otherwise read and
# apply one by one at every start.
# The code birdctl runs at start, read, scan and watch is placed together
# (dist/link/symbol-order.txt, from `make link-order`): the kernel maps the
# pages around each one touched (64 KB), and spread over the text that mapped
# nearly all of it.
# Generic types such as a Dictionary keyed by ObjectPath get their metadata
# from accessors given the conformances, not from mangled names: a mangled
# name is demangled at run time and each `Hashable` requirement looked up by
# scanning every conformance record of the binary, once per key type.
RELEASE_CODEGEN := -Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors
RELEASE_LINK := -Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld -Xswiftc -Xclang-linker -Xswiftc -static-libgcc \
	-Xlinker -z -Xlinker pack-relative-relocs \
	-Xlinker --symbol-ordering-file=$(CURDIR)/dist/link/symbol-order.txt -Xlinker --no-warn-symbol-ordering
# SCRATCH: where SwiftPM builds (build-swift60 builds in its own).
# SWIFT_TARGET: the triple, SDK and resources when cross-building (release-arm64).
SCRATCH := .build
SWIFT_TARGET :=
# birdctl-proxy: birdctl with the proxy linked (docs/proxy.md), which birdctl
# runs in its place for --proxy; built where the Swift reads Package@swift-6.2.swift.
PROXY_BUILT = $(shell $(SWIFT) --version 2>&1 | grep -Eq 'Swift version (6\.([2-9]|[1-9][0-9])|[7-9])' && echo yes)
RELEASE_PRODUCTS = birdctl $(if $(PROXY_BUILT),birdctl-proxy)
# The revision for --version, in a header rewritten only when it changes.
REVISION_DIR := $(SCRATCH)/revision
release: deps static-link
	@mkdir -p $(REVISION_DIR) && echo '#define BIRDCTL_REVISION "$(REVISION)"' > $(REVISION_DIR)/new.h && \
	  { cmp -s $(REVISION_DIR)/new.h $(REVISION_DIR)/birdctl_revision.h || mv $(REVISION_DIR)/new.h $(REVISION_DIR)/birdctl_revision.h; }
	for product in $(RELEASE_PRODUCTS); do \
	  PKG_CONFIG_PATH=$(CURDIR)/$(STATIC_LINK) $(SWIFT) build -c release --product $$product --scratch-path $(SCRATCH) \
	    --static-swift-stdlib --disable-local-rpath $(SWIFT_TARGET) \
	    $(RELEASE_CODEGEN) $(RELEASE_LINK) -Xcc -I$(abspath $(REVISION_DIR)) || exit 1; \
	done

# Regenerates dist/link/symbol-order.txt: the functions the release build runs
# at start, read, scan and watch (callgrind, against the fake BlueZ; see
# bench/link_order.py), then links again with it. Worth redoing when those
# paths change; a stale list only places less of the code together, and
# link-order-check (part of make test) fails then.
link-order: deps-bench release
	/usr/bin/python3 bench/link_order.py $(RELEASE) dist/link/symbol-order.txt
	rm -f $(RELEASE) && $(MAKE) --no-print-directory release

# Traces the release build as link-order does and fails when
# dist/link/symbol-order.txt names functions the binary no longer has, or lacks
# functions it runs, beyond a tolerance (bench/link_order.py); leaves the
# fresh list in .build/link-order/.
link-order-check: deps-bench release
	/usr/bin/python3 bench/link_order.py --check $(RELEASE) dist/link/symbol-order.txt

# Static archives put ahead of the system's shared libraries for the release
# link: a dbus-1.pc whose -L names this directory comes first on the link line,
# so -ldbus-1 and -lstdc++ find the archives linked here. dist/link/no-systemd.c
# says why libdbus-1.a needs two systemd functions.
STATIC_LINK := .build/static-link
# CLANG_TARGET: clang's target and sysroot when cross-building (release-arm64).
CLANG_TARGET :=
static-link: deps
	@mkdir -p $(STATIC_LINK)
	@dbus=$$(pkg-config --variable=libdir dbus-1)/libdbus-1.a; cxx=$$(clang $(CLANG_TARGET) -print-file-name=libstdc++.a); \
	for a in $$dbus $$cxx; do [[ $$a == /* && -f $$a ]] || { echo "static-link: no $$a" >&2; exit 1; }; done; \
	ln -sf $$dbus $(STATIC_LINK)/libdbus-1.a; ln -sf $$cxx $(STATIC_LINK)/libstdc++.a
	@clang $(CLANG_TARGET) -O2 -Wall -c dist/link/no-systemd.c -o $(STATIC_LINK)/no-systemd.o
	@rm -f $(STATIC_LINK)/libbirdctl-no-systemd.a && ar rcs $(STATIC_LINK)/libbirdctl-no-systemd.a $(STATIC_LINK)/no-systemd.o
	@printf 'Name: dbus-1\nDescription: libdbus, linked from its static archive\nVersion: %s\nCflags: %s\nLibs: -L%s -ldbus-1 -lbirdctl-no-systemd\n' \
	    "$$(pkg-config --modversion dbus-1)" "$$(pkg-config --cflags dbus-1)" "$(CURDIR)/$(STATIC_LINK)" > $(STATIC_LINK)/dbus-1.pc

# Debian 13's own Swift, 6.0.3, the oldest we build with (Package.swift says
# 6.0): in a Debian 13 root built here from the machine's Debian mirror,
# pinned by dist/debian-swift/trixie.recipe (rebuilt when it changes, about a
# minute), on this repository bound into it (dist/debian-swift/in-root.sh),
# in a build folder of its own. The build and the tests' build catch what a
# newer Swift accepts and 6.0 does not (make test runs these). The release
# build (release-swift60), the Makefile's own with every flag, runs in the
# root's make with the root's packages, without the git revision; it adds
# about 3.5 minutes, so make test leaves it out.
SWIFT60_ROOT := .build/swift60-root
SWIFT60_RECIPE := dist/debian-swift/trixie.recipe
SWIFT60_SCRATCH := .build/swift60
swift60-root:
	@$(MAKE) --no-print-directory apt-packages PACKAGES=debootstrap
	@cmp -s $(SWIFT60_RECIPE) $(SWIFT60_ROOT).recipe || fixtures/vm/build-root.sh $(SWIFT60_ROOT) $(SWIFT60_RECIPE)

build-swift60: swift60-root
	dist/debian-swift/in-root.sh $(SWIFT60_ROOT) swift build --scratch-path $(SWIFT60_SCRATCH) --build-tests

release-swift60: build-swift60
	dist/debian-swift/in-root.sh $(SWIFT60_ROOT) env PATH=/usr/libexec/swift/bin:/usr/bin:/bin \
	    make --no-print-directory release SCRATCH=$(SWIFT60_SCRATCH) STATIC_LINK=$(SWIFT60_SCRATCH)/static-link \
	    DEB_PACKAGES="libdbus-1-dev libmosquitto-dev pkg-config" REVISION=

# birdctl for arm64 (aarch64: a Raspberry Pi), cross-built by Debian 13's
# Swift in the root of build-swift60 against an arm64 sysroot of Debian 13's
# packages (dist/debian-swift/arm64.recipe; made again when it changes), with
# the release build's flags; then run under qemu-aarch64-static against the
# fake BlueZ (dist/debian-swift/arm64-check.py: scan, read). Inside the
# root the sysroot is /src/$(ARM64_SYSROOT); SwiftPM gives --sdk to clang
# only, so swiftc gets it too, and pkg-config prefixes the arm64 .pc files'
# paths with it (without, the host's dbus headers come in).
ARM64_SYSROOT := .build/arm64-sysroot
ARM64_SCRATCH := .build/arm64
ARM64_RELEASE := $(ARM64_SCRATCH)/aarch64-unknown-linux-gnu/release/birdctl
ARM64_IN_ROOT := /src/$(ARM64_SYSROOT)
arm64-sysroot: swift60-root
	@cmp -s dist/debian-swift/arm64.recipe $(ARM64_SYSROOT).recipe \
	    || dist/debian-swift/arm64-sysroot.sh $(SWIFT60_ROOT) dist/debian-swift/arm64.recipe $(ARM64_SYSROOT)

release-arm64: deps arm64-sysroot
	@$(MAKE) --no-print-directory apt-packages PACKAGES="qemu-user-static file"
	dist/debian-swift/in-root.sh $(SWIFT60_ROOT) env PATH=/usr/libexec/swift/bin:/usr/bin:/bin \
	    PKG_CONFIG_LIBDIR=$(ARM64_IN_ROOT)/usr/lib/aarch64-linux-gnu/pkgconfig:$(ARM64_IN_ROOT)/usr/share/pkgconfig \
	    PKG_CONFIG_SYSROOT_DIR=$(ARM64_IN_ROOT) \
	    make --no-print-directory release SCRATCH=$(ARM64_SCRATCH) STATIC_LINK=$(ARM64_SCRATCH)/static-link \
	    DEB_PACKAGES="libdbus-1-dev libmosquitto-dev pkg-config" REVISION=$(REVISION) \
	    CLANG_TARGET="--target=aarch64-unknown-linux-gnu --sysroot=$(ARM64_IN_ROOT)" \
	    SWIFT_TARGET="--triple aarch64-unknown-linux-gnu --sdk $(ARM64_IN_ROOT) -Xswiftc -sdk -Xswiftc $(ARM64_IN_ROOT) \
	        -Xswiftc -resource-dir -Xswiftc $(ARM64_IN_ROOT)/usr/libexec/swift/lib/swift_static -Xswiftc -use-ld=lld"
	file $(ARM64_RELEASE)
	@echo "release-arm64: the newest glibc symbol it needs: $$(objdump -T $(ARM64_RELEASE) | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
	qemu-aarch64-static -L $(ARM64_SYSROOT) $(ARM64_RELEASE) --version
	/usr/bin/python3 dist/debian-swift/arm64-check.py $(ARM64_RELEASE) $(ARM64_SYSROOT)

# Everything CI runs: the build with Debian 13's Swift 6.0, the tests, the
# fuzzers' kept inputs, the tests again under AddressSanitizer (and the
# concurrent layers under ThreadSanitizer), installing and packaging, Home
# Assistant, the real-BlueZ scenarios in a VM, and the release link's symbol
# order against what the release build runs. One part after another, each
# saying how long it took; the first that fails ends it.
TEST_PARTS := build-swift60 test-unit fuzz-regress sanitize test-install test-ha test-vm link-order-check
test:
	@for part in $(TEST_PARTS); do \
	  started=$$(date +%s); \
	  $(MAKE) --no-print-directory $$part || { echo "make test: $$part failed after $$(( $$(date +%s) - started )) s" >&2; exit 1; }; \
	  echo "make test: $$part took $$(( $$(date +%s) - started )) s"; \
	done

# The test bundle of build path $(1), run in a session of its own that is
# ended after $(2) seconds as a hang (fixtures/in-own-session.sh says what was
# still running then). The bundle is run directly, not through `swift test`:
# SwiftPM holds back the bundle's output until it ends, so a run that hung
# showed nothing of where (CI's 90 minutes once ran out that way, the output
# cut mid-line).
run_tests = TEST_TIME_LIMIT=$(2) fixtures/in-own-session.sh \
	$(1)/debug/birdctlPackageTests.xctest --testing-library swift-testing

# The crowd of strangers (StrangerFloodTests: 100,000 devices from a fake at
# full speed) runs after the rest, alone: beside the whole suite's start on
# two cores its birdctl was seen silent for over 120 s (twice in three runs).
test-unit: deps
	$(SWIFT) build --build-tests
	$(call run_tests,.build,900) --skip StrangerFloodTests
	$(call run_tests,.build,600) --filter StrangerFloodTests

# swiftc has no UndefinedBehaviorSanitizer for Swift (Swift traps overflow and
# out-of-bounds access itself); ASan covers every test, birdctl included
# (the tests run the instrumented binary). TSan covers the loop, the D-Bus and BlueZ
# layers, where the loop thread meets callers on other threads, and the MQTT
# gateway (the instrumented birdctl: its publisher thread meets the loop).
# Leak checks are off: LeakSanitizer reports what XCTest and birdctl still hold at process
# exit; leaks that matter (growth while running) are the benchmark's
# flat-memory check (1,000,000 notifications).
# TSan's suites touch no proxy, so its build is of Package.swift alone (a
# folder of links to the sources without Package@swift-6.2.swift): the
# proxy's swift-protobuf, swift-crypto and BoringSSL are not built with TSan.
TSAN_PACKAGE := .build/tsan-package
sanitize: deps
	$(SWIFT) build --build-tests --sanitize=address --build-path .build-asan
	ASAN_OPTIONS=detect_leaks=0:suppressions=$(CURDIR)/fixtures/asan.supp $(call run_tests,.build-asan,1200)
	@rm -rf $(TSAN_PACKAGE) && mkdir -p $(TSAN_PACKAGE) && cp Package.swift $(TSAN_PACKAGE)/ \
	    && ln -s $(CURDIR)/Sources $(CURDIR)/Tests $(CURDIR)/fixtures $(TSAN_PACKAGE)/
	cd $(TSAN_PACKAGE) && $(SWIFT) build --build-tests --sanitize=thread --build-path $(CURDIR)/.build-tsan
	TSAN_OPTIONS=suppressions=$(CURDIR)/fixtures/tsan.supp $(call run_tests,.build-tsan,900) \
	    --filter 'ThreadsTests|LoopTests|DBusTests|BlueZTests|MQTTTests|MQTTGatewayTests'

# libFuzzer targets (fuzz/): the Bird decoders, D-Bus messages off the wire,
# serve's stdin lines, peer text escaped for terminals and JSON, BlueZ's
# object tree and signals, and the proxy's frames, Noise handshake and
# sessions. `make fuzz` runs each for FUZZ_SECONDS from the
# seeds and the kept corpus in fixtures/fuzz/; a crash stops it with the input
# in .build-fuzz/crashes/ (fix it, then keep the input in fixtures/fuzz/<target>/).
# `make fuzz-scale` runs each for FUZZ_RUNS inputs in chunks of at most
# FUZZ_CHUNK seconds (FUZZ_WORKERS processes at a time, FUZZ_MAX_LEN the longest
# input) and keeps the minimised corpus in the repository.
FUZZ_TARGETS := FuzzBirdValues FuzzDBusMessages FuzzServeLines FuzzPeerText FuzzBlueZTree \
	FuzzExportedMethods FuzzIntrospection FuzzBlueZErrors FuzzDatagramReader \
	FuzzProxyFrames FuzzNoiseHandshake FuzzProxySession FuzzKernelAdvertisements
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= 10000000
FUZZ_CHUNK ?= 300
FUZZ_BUILD := .build-fuzz
# SwiftPM does not see a source file added to (or removed from) the main
# package, a path dependency here, in an existing build ("cannot find 'X' in
# scope"): when the list of files changed, the build starts afresh (a minute),
# keeping the corpus and crashes.
fuzz-build: deps
	@mkdir -p $(FUZZ_BUILD) && find Sources fuzz/Sources -type f | sort > $(FUZZ_BUILD)/sources.new; \
	if [ -f $(FUZZ_BUILD)/sources.list ] && ! cmp -s $(FUZZ_BUILD)/sources.list $(FUZZ_BUILD)/sources.new; then \
	  echo "fuzz-build: source files added or removed since the last build: building afresh"; \
	  find $(FUZZ_BUILD) -mindepth 1 -maxdepth 1 ! -name corpus ! -name crashes ! -name 'sources.*' ! -name '*.log' -exec rm -rf {} +; \
	fi
	cd fuzz && $(SWIFT) build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library \
	    --build-path ../$(FUZZ_BUILD)
	@mv $(FUZZ_BUILD)/sources.new $(FUZZ_BUILD)/sources.list

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/crashes; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  SWIFT_BACKTRACE=enable=no $(FUZZ_BUILD)/release/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/crashes/$$t- $(FUZZ_BUILD)/corpus/$$t fixtures/fuzz/$$t fixtures/fuzz/$$t/corpus 2>&1 \
	    | grep -E 'stat::number_of_executed_units|Done|ERROR|Fatal|SUMMARY|artifact'; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

fuzz-scale: fuzz-build
	fixtures/fuzz/at-scale.sh $(FUZZ_BUILD) $(FUZZ_RUNS) $(FUZZ_CHUNK) $(FUZZ_TARGETS)

# Every kept input once: the seeds, the crashes fuzzing found (regressions)
# and the corpus fuzz-scale kept.
fuzz-regress: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  inputs=$$(find fixtures/fuzz/$$t -type f); \
	  SWIFT_BACKTRACE=enable=no $(FUZZ_BUILD)/release/$$t $$inputs > $(FUZZ_BUILD)/$$t.log 2>&1 \
	    || { cat $(FUZZ_BUILD)/$$t.log; exit 1; }; \
	  echo "fuzz-regress: $$t: $$(wc -w <<< "$$inputs") kept inputs pass"; \
	done

# birdctl's MQTT gateway and Bluetooth proxy as Home Assistant's users see
# them: the release build against a real mosquitto and Home Assistant Core
# 2024.3.3, through Home Assistant's REST and websocket API
# (fixtures/ha/check_ha.py, fixtures/ha/check_proxy.py; docs/testing.md).
test-ha: deps-ha release
	fixtures/in-own-session.sh $(HA_VENV)/bin/python fixtures/ha/check_ha.py $(RELEASE) .build/ha/run
	fixtures/in-own-session.sh $(HA_VENV)/bin/python fixtures/ha/check_proxy.py $(RELEASE) .build/ha/proxy-run

# Boots a VM with real bluetoothd and emulated controllers and shows birdctl
# scan and watch of a simulated bird (about a minute after the install).
demo: deps-vm release
	BIRDCTL=.build/release/birdctl BIRDCTL_VM_PLATFORM=$(VM_PLATFORM) fixtures/vm/run-vm.sh demo

# The real-BlueZ scenarios in the VM, with the release build (and the .deb's
# birdctl without the Swift toolchain), on each of VM_PLATFORMS at once (one
# VM each: most of a scenario's time is the air's pace, not the emulator's),
# each one's output in .build/vm/test-PLATFORM.log, shown when all ended;
# fails if any failed.
test-vm: deps-vm release deb
	# The simulated controller's own checks (no VM): a cancelled or reset connection attempt ends.
	$(BUMBLE_VENV)/bin/python -m unittest fixtures/vm/bumble_air_check.py
	@for p in $(VM_PLATFORMS); do \
	  { BIRDCTL=.build/release/birdctl BIRDCTL_DEB=$(DEB) BIRDCTL_VM_PLATFORM=$$p BIRDCTL_VM_TIMEOUT=2400 \
	      fixtures/vm/run-vm.sh test \
	      > .build/vm/test-$$p.log 2>&1; echo $$? > .build/vm/test-$$p.status; } & \
	done; wait; \
	failed=""; for p in $(VM_PLATFORMS); do \
	  cat .build/vm/test-$$p.log; [ "$$(cat .build/vm/test-$$p.status)" = 0 ] || failed="$$failed $$p"; \
	done; \
	for p in $(VM_PLATFORMS); do cat .build/vm/results-$$p/summary 2>/dev/null || echo "vm $$p: no summary"; done; \
	for p in $$failed; do grep -a '^\[[a-z]*\] FAIL ' .build/vm/results-$$p/console.log | cut -c1-2000; done; \
	[ -z "$$failed" ] || { echo "test-vm: failed on$$failed" >&2; exit 1; }

# The arm64 tier: Debian 13 for arm64 (a root built here, pinned by
# fixtures/vm/trixie-arm64.recipe, with its own Bumble venv; debootstrap's
# second stage, apt and pip run under qemu-aarch64-static through
# binfmt_misc; its kernel lacks hci_vhci, which fixtures/vm/build-vhci.sh
# builds from Debian's source) booted under qemu-system-aarch64 (virt,
# Cortex-A72, TCG); the
# arm64 .deb installed there with dpkg -i, and these scenarios run with its
# /usr/bin/birdctl: scan with RSSI (Bumble), read, a link dropped and back
# (btvirt), a link lost without a disconnect (Bumble), pairing (Bumble's
# SMP), watch --all of 10 birds through 3 links, and watch --all --mqtt to a
# mosquitto on this machine, over qemu's user-mode network. Not in make test
# (docs/testing.md gives its time).
TRIXIE_ARM64_ROOT := .build/vm/trixie-arm64-root
TRIXIE_ARM64_INPUTS := fixtures/vm/trixie-arm64.recipe fixtures/vm/bumble-requirements.txt
VM_ARM64_PACKAGES := qemu-system-arm qemu-user-static cpio debootstrap mosquitto mosquitto-clients
VM_ARM64_SCENARIOS ?= bumble_rssi read reconnect bumble_link_loss bumble_encrypted bumble_links bumble_mqtt
deps-vm-arm64:
	@$(MAKE) --no-print-directory apt-packages PACKAGES="$(VM_ARM64_PACKAGES)"
	@cat $(TRIXIE_ARM64_INPUTS) | cmp -s - $(TRIXIE_ARM64_ROOT).recipe || \
	  fixtures/vm/build-root.sh $(TRIXIE_ARM64_ROOT) $(TRIXIE_ARM64_INPUTS)
	@fixtures/vm/build-vhci.sh $(TRIXIE_ARM64_ROOT)

test-vm-arm64: deps-vm-arm64 deb-arm64
	BIRDCTL_DEB=$(DEB_ARM64) BIRDCTL_VM_PLATFORM=trixie-arm64 BIRDCTL_VM_SELECT="$(VM_ARM64_SCENARIOS)" \
	    BIRDCTL_VM_TIMEOUT=2400 fixtures/vm/run-vm.sh test

# Link loss again and again (outside make test: about ten minutes).
SOAK_CYCLES ?= 50
soak: deps-vm release
	BIRDCTL=.build/release/birdctl SOAK_CYCLES=$(SOAK_CYCLES) BIRDCTL_VM_PLATFORM=$(VM_PLATFORM) fixtures/vm/run-vm.sh soak

# The service as it runs for months, for an hour (fixtures/vm/service_soak.py; outside make test).
SOAK_MINUTES ?= 60
SOAK_EVENT_SECONDS ?= 60
soak-service: deps-vm release
	BIRDCTL=.build/release/birdctl SOAK_MINUTES=$(SOAK_MINUTES) SOAK_EVENT_SECONDS=$(SOAK_EVENT_SECONDS) \
	  BIRDCTL_VM_PLATFORM=$(VM_PLATFORM) BIRDCTL_VM_TIMEOUT=$$(( $(SOAK_MINUTES) * 60 + 900 )) fixtures/vm/run-vm.sh servicesoak

# make bench: streaming, reads and memory beside the other tools (bench-fake),
# then streaming on the real stack (bench-system); then the page the docs link
# to, docs/figures.md, from both parts' tables (bench/figures.py; not with
# QUICK=1, whose figures are not to quote).
BENCH := .build/bench
bench: bench-fake bench-system
	$(if $(QUICK),,/usr/bin/python3 bench/figures.py $(BENCH) docs/figures.md $(VM_PLATFORMS))

# The peers' venv (bleak, simplepyble), used by both parts.
bench-venv: deps-bench
	mkdir -p $(BENCH)
	test -x $(BENCH)/venv/bin/python || /usr/bin/python3 -m venv $(BENCH)/venv
	$(BENCH)/venv/bin/pip install -q --disable-pip-version-check bleak==3.1.0 simplepyble==1.2.0

# birdctl beside the floor (bench/floor.c), bleak and simplepyble against the
# fake BlueZ; prints the table and writes .build/bench/results.md; then three
# gateways sharing a broker (bench/gateways_bench.py, .build/bench/gateways.md);
# then, where the proxy is built, the proxy with Home Assistant's client
# libraries (bench/proxy_bench.py, .build/bench/proxy.md).
# QUICK=1: fewer runs and smaller bursts, to try the harness.
bench-fake: bench-venv release
	cc -O2 -Wall -o $(BENCH)/floor bench/floor.c $$(pkg-config --cflags --libs dbus-1)
	cc -O2 -Wall -o $(BENCH)/measure bench/measure.c
	/usr/bin/python3 bench/run.py .build/release/birdctl $(BENCH)/floor $(BENCH)/measure $(BENCH)/venv/bin/python \
	    $(BENCH)/results.md $(if $(QUICK),--quick)
	/usr/bin/python3 bench/gateways_bench.py .build/release/birdctl $(BENCH)/gateways.md $(if $(QUICK),--quick)
	rm -f $(BENCH)/proxy.md
	$(if $(PROXY_BUILT),/usr/bin/python3 bench/proxy_bench.py .build/release/birdctl $(PROXY_VENV)/bin/python \
	    $(BENCH)/proxy.md $(if $(QUICK),--quick))

# In the VM: real bluetoothd, a Bumble bird; the CPU of client + dbus-daemon +
# bluetoothd, loss and latency for birdctl (both ways), bleak and bluetoothctl
# (fixtures/vm/system_bench.py; a built root has bleak pinned by
# fixtures/vm/bleak-requirements.txt, the host's is bench-venv's), on each of VM_PLATFORMS; writes
# .build/bench/system-PLATFORM.md.
bench-system: bench-venv deps-vm release
	for p in $(VM_PLATFORMS); do \
	  BIRDCTL=.build/release/birdctl BIRDCTL_VM_PLATFORM=$$p fixtures/vm/run-vm.sh bench && \
	  cp .build/vm/results-$$p/system-bench.md $(BENCH)/system-$$p.md || exit 1; \
	done

# Where `make install` puts things (GNU conventions; DESTDIR stages them).
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(PREFIX)/bin
MANDIR := $(PREFIX)/share/man/man1
BASHDIR := $(PREFIX)/share/bash-completion/completions
ZSHDIR ?= $(PREFIX)/share/zsh/site-functions
FISHDIR := $(PREFIX)/share/fish/vendor_completions.d
UNITDIR := $(PREFIX)/lib/systemd/system
LIBEXECDIR := $(PREFIX)/libexec/birdctl
INSTALLED := $(BINDIR)/birdctl $(MANDIR)/birdctl.1 $(BASHDIR)/birdctl $(ZSHDIR)/_birdctl \
	$(FISHDIR)/birdctl.fish $(UNITDIR)/birdctl.service
RELEASE := .build/release/birdctl
# Beside RELEASE when the Swift built it (see PROXY_BUILT); installed where birdctl looks for it.
RELEASE_PROXY = $(dir $(RELEASE))birdctl-proxy

install: release
	@$(MAKE) --no-print-directory install-files

# The files of install, from the binary RELEASE names, stripped by
# STRIP_PROGRAM; RUN_RELEASE runs it to write the man page and completions
# (deb-arm64: the arm64 binary, under qemu-aarch64-static).
STRIP_PROGRAM := strip
RUN_RELEASE = $(RELEASE)
install-files:
	install -d $(addprefix $(DESTDIR),$(BINDIR) $(MANDIR) $(BASHDIR) $(ZSHDIR) $(FISHDIR) $(UNITDIR))
	install -m 755 -s --strip-program=$(STRIP_PROGRAM) $(RELEASE) $(DESTDIR)$(BINDIR)/birdctl
	$(if $(wildcard $(RELEASE_PROXY)),install -d $(DESTDIR)$(LIBEXECDIR) && \
	  install -m 755 -s --strip-program=$(STRIP_PROGRAM) $(RELEASE_PROXY) $(DESTDIR)$(LIBEXECDIR)/birdctl-proxy)
	$(RUN_RELEASE) --generate-manual > $(DESTDIR)$(MANDIR)/birdctl.1
	$(RUN_RELEASE) --generate-completion-script bash > $(DESTDIR)$(BASHDIR)/birdctl
	$(RUN_RELEASE) --generate-completion-script zsh > $(DESTDIR)$(ZSHDIR)/_birdctl
	$(RUN_RELEASE) --generate-completion-script fish > $(DESTDIR)$(FISHDIR)/birdctl.fish
	sed 's|@BINDIR@|$(BINDIR)|' dist/birdctl.service.in > $(DESTDIR)$(UNITDIR)/birdctl.service
	chmod 644 $(addprefix $(DESTDIR),$(filter-out $(BINDIR)/birdctl,$(INSTALLED)))

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED)) $(DESTDIR)$(LIBEXECDIR)/birdctl-proxy
	rmdir $(DESTDIR)$(LIBEXECDIR) 2>/dev/null || true

# A Debian package of the release build: /usr prefix (zsh completions where
# Debian's zsh looks for packages' own), Depends from the
# binary's libraries (dpkg-shlibdeps) plus bluez, checked by lintian.
VERSION := $(shell sed -n 's/.*static let number = "\(.*\)"/\1/p' Sources/BirdctlCLI/Version.swift)
DEB := .build/deb/birdctl_$(VERSION)_$(shell dpkg --print-architecture).deb
deb: deps-install
	rm -rf .build/deb/root
	$(MAKE) --no-print-directory install PREFIX=/usr ZSHDIR=/usr/share/zsh/vendor-completions \
	    DESTDIR=$(CURDIR)/.build/deb/root
	VERSION=$(VERSION) STATIC_ARCHIVES="$$(readlink -f $(STATIC_LINK)/libdbus-1.a $(STATIC_LINK)/libstdc++.a)" \
	    dist/deb/build.sh .build/deb/root $(DEB)

# The arm64 package of release-arm64: the same files (the man page and
# completions written by the arm64 binary under qemu-aarch64-static); Depends
# from dpkg-shlibdeps in the root, which has arm64's libc registered
# (dist/debian-swift/arm64-depends.sh); Built-Using from the sysroot's
# packages (arm64-sysroot.sh); checked by lintian.
DEB_ARM64 := .build/deb-arm64/birdctl_$(VERSION)_arm64.deb
deb-arm64: release-arm64 deps-install
	@$(MAKE) --no-print-directory apt-packages PACKAGES="binutils-aarch64-linux-gnu"
	rm -rf .build/deb-arm64/root
	$(MAKE) --no-print-directory install-files PREFIX=/usr ZSHDIR=/usr/share/zsh/vendor-completions \
	    DESTDIR=$(CURDIR)/.build/deb-arm64/root RELEASE=$(ARM64_RELEASE) STRIP_PROGRAM=aarch64-linux-gnu-strip \
	    RUN_RELEASE="qemu-aarch64-static -L $(ARM64_SYSROOT) $(ARM64_RELEASE)"
	depends=$$(dist/debian-swift/in-root.sh $(SWIFT60_ROOT) dist/debian-swift/arm64-depends.sh .build/deb-arm64/root/usr/bin/birdctl) && \
	VERSION=$(VERSION) DEB_ARCH=arm64 DEB_DEPENDS="$$depends" DEB_BUILT_USING="$$(cat $(ARM64_SYSROOT).built-using)" \
	    dist/deb/build.sh .build/deb-arm64/root $(DEB_ARM64)

# Installs into a DESTDIR and checks the tree, the completions, the man page
# and the unit; builds the .deb, runs lintian, and installs and runs it in a
# root without the Swift toolchain (an overlay of this one, in a mount namespace).
test-install: deb
	fixtures/install/check.sh $(RELEASE) $(DEB)

clean:
	rm -rf .build .build-asan .build-tsan .build-fuzz
