# birdctl — build, test and (later) demo. We run as root on Debian; `deps`
# installs what is missing and nothing else.

SWIFT ?= swift
# libdbus headers for the CDBus module; a dbus-daemon for private test buses;
# Debian's python3 with dbus-python, GLib and python-dbusmock for the fake BlueZ.
DEB_PACKAGES := libdbus-1-dev pkg-config dbus-daemon python3 python3-dbus python3-gi python3-dbusmock

# The benchmarks: the C floor, a venv for the peers, callgrind for profiling.
BENCH_PACKAGES := gcc python3-venv valgrind

# The real-BlueZ tier: Debian's kernel under qemu, bluetoothd, btvirt.
VM_PACKAGES := qemu-system-x86 linux-image-amd64 bluez bluez-test-tools busybox-static cpio

.PHONY: deps deps-vm deps-bench build demo test test-vm bench clean

deps:
	@$(MAKE) --no-print-directory install PACKAGES="$(DEB_PACKAGES)"

deps-vm:
	@$(MAKE) --no-print-directory install PACKAGES="$(DEB_PACKAGES) $(VM_PACKAGES)"

deps-bench:
	@$(MAKE) --no-print-directory install PACKAGES="$(DEB_PACKAGES) $(BENCH_PACKAGES)"

install:
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

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# Boots a VM with real bluetoothd and emulated controllers and shows birdctl
# scan and watch of a simulated bird (about a minute after the install).
demo: deps-vm build
	fixtures/vm/run-vm.sh demo

# The real-BlueZ scenarios in the VM (see README: one does not pass yet).
test-vm: deps-vm build
	fixtures/vm/run-vm.sh test

# birdctl beside the floor (bench/floor.c), bleak and simplepyble against the
# fake BlueZ; prints the table and writes .build/bench/results.md.
# QUICK=1: fewer runs and smaller bursts, to try the harness.
BENCH := .build/bench
bench: deps-bench
	$(SWIFT) build -c release --static-swift-stdlib
	mkdir -p $(BENCH)
	cc -O2 -Wall -o $(BENCH)/floor bench/floor.c $$(pkg-config --cflags --libs dbus-1)
	cc -O2 -Wall -o $(BENCH)/measure bench/measure.c
	test -x $(BENCH)/venv/bin/python || /usr/bin/python3 -m venv $(BENCH)/venv
	$(BENCH)/venv/bin/pip install -q --disable-pip-version-check bleak==3.1.0 simplepyble==1.2.0
	/usr/bin/python3 bench/run.py .build/release/birdctl $(BENCH)/floor $(BENCH)/measure $(BENCH)/venv/bin/python \
	    $(BENCH)/results.md $(if $(QUICK),--quick)

clean:
	rm -rf .build
