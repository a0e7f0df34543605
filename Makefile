# birdctl — build, test and (later) demo. We run as root on Debian; `deps`
# installs what is missing and nothing else.

SWIFT ?= swift
# libdbus headers for the CDBus module; a dbus-daemon for private test buses;
# Debian's python3 with dbus-python, GLib and python-dbusmock for the fake BlueZ.
DEB_PACKAGES := libdbus-1-dev pkg-config dbus-daemon python3 python3-dbus python3-gi python3-dbusmock

.PHONY: deps build test clean

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
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

clean:
	rm -rf .build
