# dlk - build, test, install.
#
#   make               build libdlk.a and the dlk binary (build/)
#   make test          run the test suite (installs missing deps as root)
#   make SAN=1 test    the same under AddressSanitizer + UBSan (build-san/)
#   make SAN=thread test   ThreadSanitizer (build-tsan/)
#   make demo          the main job on a small built-in example
#   make fuzz          build the libFuzzer targets (clang)
#   make install PREFIX=/usr/local DESTDIR=
#   make deps          install the Debian packages (root) or print the line
#   V=1                show the commands

VERSION := $(shell sed -n 's/^\#define DLK_VERSION_STRING "\(.*\)"/\1/p' include/dlk.h)

PREFIX  ?= /usr/local
bindir  ?= $(PREFIX)/bin
libdir  ?= $(PREFIX)/lib
incdir  ?= $(PREFIX)/include
mandir  ?= $(PREFIX)/share/man
pcdir   ?= $(libdir)/pkgconfig
DESTDIR ?=

CC      ?= cc
PKG_CONFIG ?= pkg-config
# Libraries found through pkg-config; `make deps` installs their -dev packages.
PKGS    := jansson libxxhash libzstd libcurl expat libturbojpeg libpng \
           libavformat libavcodec libswscale libavutil

ifeq ($(V),1)
Q :=
else
Q := @
endif

ifeq ($(SAN),)
BUILD   ?= build
SANFLAGS :=
else ifeq ($(SAN),thread)
BUILD   ?= build-tsan
SANFLAGS := -fsanitize=thread
else
BUILD   ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif

OPT     ?= -O2 -g
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
             -Wno-missing-field-initializers -fPIC -MMD -MP \
             -Iinclude -Ilib $(PKG_CFLAGS) $(OPT) $(SANFLAGS) $(CFLAGS)
ALL_LDFLAGS = -Wl,--as-needed $(SANFLAGS) $(LDFLAGS)
LIBS    = $(PKG_LIBS) -lpthread -lm

LIB_SRC := $(sort $(wildcard lib/*/*.c))
CMD_SRC := $(sort $(wildcard cmd/*.c))
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CMD_OBJ := $(CMD_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

LIBA    := $(BUILD)/libdlk.a
DLK     := $(BUILD)/dlk

.PHONY: all test demo install install-bin install-lib install-man clean deps \
        check-deps fuzz bench dist

all: $(LIBA) $(DLK)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIBA): $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(DLK): $(CMD_OBJ) $(LIBA)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(CMD_OBJ) $(LIBA) $(LIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/unit/unit.h $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBA) $(LIBS)

unit: $(UNIT_BIN)

# The suite: unit tests and CLI tests; last line "N passed, N failed, N skipped".
test: check-deps all unit
	$(Q)DLK=$(abspath $(DLK)) DLK_BUILD=$(abspath $(BUILD)) SAN=$(SAN) tests/run

demo: check-deps all
	$(Q)DLK=$(abspath $(DLK)) examples/demo.sh

check-deps:
	$(Q)scripts/deps.sh --ensure

deps:
	$(Q)scripts/deps.sh --install

fuzz:
	$(Q)$(MAKE) -f tests/fuzz/Makefile

bench: all
	$(Q)DLK=$(abspath $(DLK)) tests/bench/run-all.sh

dlk.pc: dlk.pc.in include/dlk.h
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(libdir)|' \
	    -e 's|@INCDIR@|$(incdir)|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@REQUIRES@|$(PKGS)|' $< > $@

install: install-bin install-lib install-man

install-bin: $(DLK)
	install -d $(DESTDIR)$(bindir)
	install -m 755 $(DLK) $(DESTDIR)$(bindir)/dlk

install-lib: $(LIBA) dlk.pc
	install -d $(DESTDIR)$(libdir) $(DESTDIR)$(incdir) $(DESTDIR)$(pcdir)
	install -m 644 $(LIBA) $(DESTDIR)$(libdir)/libdlk.a
	install -m 644 include/dlk.h $(DESTDIR)$(incdir)/dlk.h
	install -m 644 dlk.pc $(DESTDIR)$(pcdir)/dlk.pc

install-man:
	install -d $(DESTDIR)$(mandir)/man1
	install -m 644 man/*.1 $(DESTDIR)$(mandir)/man1/

clean:
	rm -rf build build-san build-tsan build-fuzz dlk.pc

-include $(LIB_OBJ:.o=.d) $(CMD_OBJ:.o=.d)
