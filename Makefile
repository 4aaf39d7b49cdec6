# dlk - build, test, install.
#
#   make               build libdlk.a, libdlk.so and the dlk binary (build/)
#   make test          run the test suite (installs missing deps as root)
#   make check         what CI runs: make test, then make SAN=1 test
#   make SAN=1 test    the same under AddressSanitizer + UBSan (build-san/)
#   make SAN=thread test   ThreadSanitizer (build-tsan/)
#   make demo          the main job on a small built-in example
#   make wheel         a binary wheel for pip (build-wheel/wheelhouse/)
#   make fuzz          build the libFuzzer targets (clang)
#   make shared        build/libdlk.so only (the Python package links it)
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
# libarchive reads the headers of tar shards a source holds (ingest).
PKGS    := jansson libxxhash libzstd libcurl expat libcrypto libarchive
# Media decoders (ingest of images and video); MEDIA=0 leaves them out for
# a streaming-only build (GPU nodes need none of these libraries).
# VIDEO=0 keeps the image decoders but leaves out video.  With VIDEO=1
# (the default, and what the wheel and `make dist` build) FFmpeg's
# headers are used but its libraries are not linked: the first video
# decode opens them by the sonames of the headers' major versions
# (lib/media/av_load.c: the system's, or those the wheel and the dist
# tree carry, found first by their rpath), so that no other command
# loads their hundred-odd shared objects and a machine without FFmpeg
# runs every command but a video ingest, which names the package to
# install.
MEDIA   ?= 1
VIDEO   ?= 1
IMAGE_PKGS := libturbojpeg libpng
VIDEO_PKGS := libavformat libavcodec libswscale libavutil
VIDEO_SRC := lib/media/decode_video.c lib/media/av_load.c
HDR_PKGS :=
DL_LIBS :=
# The codecs are lib/media/ (their stubs, no*.c, stand in where left out).
MEDIA_SRC := $(filter-out lib/media/no%.c,$(wildcard lib/media/*.c))
ifeq ($(MEDIA),1)
ifeq ($(VIDEO),1)
PKGS    += $(IMAGE_PKGS)
HDR_PKGS := $(VIDEO_PKGS)
DL_LIBS := -ldl
MEDIA_CFLAGS :=
else
PKGS    += $(IMAGE_PKGS)
MEDIA_CFLAGS := -DDLK_NO_VIDEO
endif
else
MEDIA_CFLAGS := -DDLK_NO_MEDIA
endif

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
# Internal invariants (DLK_ASSERT) are checked in sanitizer builds, and in
# any build with CHECKS=1; release builds leave them out.
CHECKS  ?= $(if $(SAN),1,0)
CHECK_CFLAGS := $(if $(filter 1,$(CHECKS)),-DDLK_CHECKS)
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) $(HDR_PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
             -Wno-missing-field-initializers -fPIC -fvisibility=hidden -MMD -MP \
             -Iinclude -Ilib $(PKG_CFLAGS) $(CUDA_CFLAGS) $(MEDIA_CFLAGS) $(CHECK_CFLAGS) $(OPT) $(SANFLAGS) $(CFLAGS)
ALL_LDFLAGS = -Wl,--as-needed $(SANFLAGS) $(LDFLAGS)
LIBS    = $(PKG_LIBS) $(CUDA_LIBS) $(DL_LIBS) -lpthread -lm

# CUDA: built when nvcc is found (CUDA=0 to leave it out); the runtime is
# linked statically, so the binary needs only the driver on a GPU machine.
NVCC    ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA    ?= $(if $(NVCC),1,0)
ifeq ($(SAN),thread)
CUDA    := 0
endif
ifeq ($(CUDA),1)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_CFLAGS := -DDLK_HAVE_CUDA -I$(CUDA_HOME)/include
# the C++ runtime that cudart_static needs (`make wheel` links it in)
CXXRT   ?= -lstdc++
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static $(CXXRT) -ldl -lrt
NVFLAGS ?= -O2 -gencode arch=compute_80,code=sm_80 \
           -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
CU_SRC  := $(sort $(wildcard lib/*/*.cu))
endif

LIB_SRC := $(sort $(wildcard lib/*/*.c))
ifneq ($(MEDIA),1)
LIB_SRC := $(filter-out $(MEDIA_SRC),$(LIB_SRC))
else ifneq ($(VIDEO),1)
LIB_SRC := $(filter-out $(VIDEO_SRC),$(LIB_SRC))
endif
# env/: the store settings from the environment, which the dlk command and
# the Python package share (the library reads none of them)
CMD_SRC := $(sort $(wildcard cmd/*.c)) env/store_env.c
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
CMD_OBJ := $(CMD_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

LIBA    := $(BUILD)/libdlk.a
DLK     := $(BUILD)/dlk
# The shared library: soname libdlk.so.MAJOR; only the functions that
# the installed headers declare DLK_API are exported (a version script
# made from them, and every other symbol compiled hidden).  dlk.h is the
# stable API, dlk_bench.h the measuring and tracing hooks.
PUBLIC_H := include/dlk.h include/dlk_bench.h
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libdlk.so.$(SOMAJOR)
LIBSO   := $(BUILD)/libdlk.so.$(VERSION)

.PHONY: check all shared test demo install install-bin install-lib install-man clean \
        deps check-deps demo-deps wheel-deps fuzz fault bench dist wheel ffmpeg-min

all: $(LIBA) $(LIBSO) $(DLK)

# the shared library alone (what `pip install ./python` builds)
shared: $(LIBSO)

# Objects follow the flags they were compiled with: a build folder made
# with other options (VIDEO=0, CUDA=0, MEDIA=0) is compiled again, not
# linked from objects of the other build.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW = $(CC) $(ALL_CFLAGS) $(NVCC) $(NVFLAGS)
ifneq ($(file <$(FLAGS_STAMP)),$(FLAGS_NOW))
ifeq ($(findstring q,$(firstword -$(MAKEFLAGS))),)
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_STAMP),$(FLAGS_NOW))
else
# `make -q` (is the build current?) with other flags: the answer is no,
# and the question must not rewrite the stamp (that would make the build
# out of date for the flags it was made with)
$(FLAGS_STAMP): FORCE ; @:
endif
endif
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) $(NVFLAGS) -Xcompiler -fPIC -c $< -o $@

$(LIBA): $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# Two version nodes: DLK_0, the stable API (dlk.h), and
# DLK_PRIVATE_BENCH, the hooks of dlk_bench.h, which may change in any
# release (docs/abi.md); everything else is local.
DLK_API_SYMS = sed -n 's/^DLK_API .*[ *]\(dlk_[a-z0-9_]*\)(.*/    \1;/p' $(1) | sort -u
$(BUILD)/libdlk.map: $(PUBLIC_H)
	@mkdir -p $(dir $@)
	$(Q){ echo 'DLK_0 { global:'; $(call DLK_API_SYMS,include/dlk.h); \
	    echo '  local: *; };'; \
	    echo 'DLK_PRIVATE_BENCH { global:'; $(call DLK_API_SYMS,include/dlk_bench.h); \
	    echo '} DLK_0;'; } > $@

$(LIBSO): $(LIB_OBJ) $(BUILD)/libdlk.map
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -shared -Wl,-soname,$(SONAME) \
	    -Wl,--version-script=$(BUILD)/libdlk.map -o $@ $(LIB_OBJ) $(LIBS)
	$(Q)ln -sf $(notdir $@) $(BUILD)/$(SONAME) && ln -sf $(SONAME) $(BUILD)/libdlk.so

# FAULT=1 (make fault): dlk's own allocations go through
# tests/fault/fail_alloc.c, which fails the one DLK_FAIL_ALLOC names
# (tests/t/t025-alloc-faults.sh runs the core cases through every one).
FAULT   ?= 0
ifeq ($(FAULT),1)
FAULT_OBJ := $(BUILD)/tests/fault/fail_alloc.o
FAULT_LDFLAGS := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup,--wrap=posix_memalign
endif

$(DLK): $(CMD_OBJ) $(LIBA) $(FAULT_OBJ)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) $(FAULT_LDFLAGS) -o $@ $(CMD_OBJ) $(FAULT_OBJ) \
	    $(LIBA) $(LIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/unit/unit.h $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(filter %.o,$^) $(LIBA) $(LIBS)

# the S3 store's test reads the environment as the dlk tool does
$(BUILD)/tests/test_s3_store: $(BUILD)/env/store_env.o

# synth: benchmark datasets made fast through the library (tests use it
# for datasets larger than the loader's memory budget)
$(BUILD)/tests/synth: tests/bench/synth.c $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBA) $(LIBS)

# key_lookup: incremental ingest's key lookup against the listing's cost
$(BUILD)/tests/key_lookup: tests/bench/key_lookup.c $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBA) $(LIBS)

# key_synth: datasets of millions of keyed rows (tests/bench/key_incr.sh)
$(BUILD)/tests/key_synth: tests/bench/key_synth.c $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBA) $(LIBS)

# manifest_scale: a head of millions of chunk entries, published and read
$(BUILD)/tests/manifest_scale: tests/bench/manifest_scale.c $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBA) $(LIBS)

# s3_dir_server: a fast read-only S3 endpoint over a folder (benchmarks;
# a test checks dlk reads through it as it reads the folder)
$(BUILD)/tests/s3_dir_server: tests/bench/s3_dir_server.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< \
	    $(shell $(PKG_CONFIG) --cflags --libs libmicrohttpd 2>/dev/null) -lpthread

# link_proxy: a TCP link with a delay each way and a rate cap a
# connection (the S3 benchmarks through a realistic link)
$(BUILD)/tests/link_proxy: tests/bench/link_proxy.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< -lpthread

unit: $(UNIT_BIN) $(BUILD)/tests/synth $(BUILD)/tests/s3_dir_server \
      $(BUILD)/tests/link_proxy \
      $(BUILD)/tests/key_lookup $(BUILD)/tests/manifest_scale

# The suite: unit tests and CLI tests; last line "N passed, N failed, N skipped".
# The build runs in a make started after check-deps: the pkg-config flags
# above were read when this one started, before a missing -dev package
# was installed.
test: check-deps
	$(Q)$(MAKE) --no-print-directory all unit
	$(Q)DLK=$(abspath $(DLK)) DLK_BUILD=$(abspath $(BUILD)) SAN=$(SAN) tests/run

# CI (.ci/run): the suite on this build, then again under ASan + UBSan.
check:
	$(Q)tests/check

# The demo installs only what building and running it takes (the build's
# libraries, numpy and Pillow), not the test toolchain.
demo: demo-deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)DLK=$(abspath $(DLK)) examples/demo.sh

check-deps:
	$(Q)scripts/deps.sh --ensure test

demo-deps:
	$(Q)scripts/deps.sh --ensure demo

wheel-deps:
	$(Q)scripts/deps.sh --ensure wheel

deps:
	$(Q)scripts/deps.sh --install

fuzz:
	$(Q)$(MAKE) -f tests/fuzz/Makefile

# dlk built to fail its Nth allocation on demand (tests/fault/); with
# SAN=1 under the sanitizers too (build-fault-san/): the error paths
# checked for leaks and bad accesses
FAULT_BUILD := build-fault$(if $(SAN),-san)
fault:
	$(Q)$(MAKE) --no-print-directory BUILD=$(FAULT_BUILD) CUDA=0 FAULT=1 \
	    $(FAULT_BUILD)/dlk

bench: all
	$(Q)DLK=$(abspath $(DLK)) tests/bench/run-all.sh

dlk.pc: dlk.pc.in $(PUBLIC_H)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(libdir)|' \
	    -e 's|@INCDIR@|$(incdir)|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@REQUIRES@|$(PKGS)|' -e 's|@LIBS_PRIVATE@|$(CUDA_LIBS) $(DL_LIBS) -lpthread -lm|' $< > $@

install: install-bin install-lib install-man

install-bin: $(DLK)
	install -d $(DESTDIR)$(bindir)
	install -m 755 $(DLK) $(DESTDIR)$(bindir)/dlk

install-lib: $(LIBA) $(LIBSO) dlk.pc
	install -d $(DESTDIR)$(libdir) $(DESTDIR)$(incdir) $(DESTDIR)$(pcdir)
	install -m 644 $(LIBA) $(DESTDIR)$(libdir)/libdlk.a
	install -m 755 $(LIBSO) $(DESTDIR)$(libdir)/$(notdir $(LIBSO))
	ln -sf $(notdir $(LIBSO)) $(DESTDIR)$(libdir)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(libdir)/libdlk.so
	install -m 644 $(PUBLIC_H) $(DESTDIR)$(incdir)/
	install -m 644 dlk.pc $(DESTDIR)$(pcdir)/dlk.pc

install-man:
	install -d $(DESTDIR)$(mandir)/man1
	install -m 644 man/*.1 $(DESTDIR)$(mandir)/man1/

# FFmpeg's decoding libraries built from source for the wheel and the
# dist tree to carry (scripts/ffmpeg-min.sh: the video decoders and
# demuxers alone, 6.5 MB needing only libc, libm and zlib), so that a
# training node without FFmpeg ingests video; dlk is built against their
# headers, and av_load.c opens them by soname, found first through the
# rpath that finds the other bundled libraries.
FFMPEG_MIN := $(CURDIR)/build-ffmpeg
FFMPEG_LIBS := libavutil libswscale libavcodec libavformat
ffmpeg-min: wheel-deps
	$(Q)scripts/ffmpeg-min.sh $(FFMPEG_MIN)

# A self-contained build for GPU machines: dist/bin/dlk with the image
# and video decoders, the image libraries and FFmpeg's bundled in
# dist/lib (found first through the rpath, an old-style DT_RPATH so that
# it also serves their own dependencies; glibc, libstdc++ and zlib are
# the system's).
# libarchive goes alone: its own dependencies (nettle, lzma, acl, libxml2
# and ICU) are every distribution's, and a bundled nettle older than the
# system's breaks the system's GnuTLS, which libcurl loads beside it.
DIST_BUNDLE := libturbojpeg libpng16
DIST_ALONE := libarchive
DIST_PKGS := jansson libxxhash libzstd libcurl expat libcrypto libarchive $(IMAGE_PKGS)
dist: ffmpeg-min
	$(Q)PKG_CONFIG_PATH=$(FFMPEG_MIN)/lib/pkgconfig $(MAKE) SAN= BUILD=build-dist MEDIA=1 VIDEO=1 \
	    LDFLAGS="$(LDFLAGS) -Wl,--disable-new-dtags,-rpath,'\$$\$$ORIGIN/../lib'" \
	    build-dist/dlk build-dist/libdlk.so.$(VERSION)
	$(Q)rm -rf dist && mkdir -p dist/bin dist/lib dist/share/man/man1
	$(Q)cp build-dist/dlk dist/bin/ && cp man/*.1 dist/share/man/man1/
	$(Q)cp $(PUBLIC_H) build-dist/libdlk.a dist/lib/
	$(Q)cp build-dist/libdlk.so.$(VERSION) dist/lib/$(SONAME)
	$(Q)mkdir -p dist/python && cp -r python/pyproject.toml python/setup.py \
	    python/dlk_cli.py python/README.md python/dlk dist/python/ && rm -f dist/python/dlk/*.so*
	$(Q)cp env/store_env.c env/store_env.h dist/python/dlk/
	$(Q)mkdir -p dist/tests/python dist/tests/gpu && \
	    cp tests/python/*.py dist/tests/python/ && cp tests/gpu/*.py dist/tests/gpu/
	$(Q)for l in $$(ldd build-dist/dlk | awk '/=>/{print $$3}'); do \
	    case $$(basename $$l) in $(foreach b,$(DIST_BUNDLE),$(b).so*|) none) \
	    echo $$l; ldd $$l | awk '/=>/{print $$3}';; \
	    $(foreach b,$(DIST_ALONE),$(b).so*|) nothing) echo $$l;; esac; done | sort -u | \
	    grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|libz)\.so|/ld-linux' | \
	    xargs -r cp -L -t dist/lib/
	$(Q)for l in $(FFMPEG_LIBS); do f=$$(ls $(FFMPEG_MIN)/lib/$$l.so.* | grep -E '\.so\.[0-9]+$$'); \
	    cp -L $$f dist/lib/ && patchelf --force-rpath --set-rpath '$$ORIGIN' dist/lib/$$(basename $$f); \
	    ldd $$f | awk '/=>/{print $$3}' | grep -E '/libdav1d\.so' | xargs -r cp -L -t dist/lib/; done
	$(Q)mkdir -p dist/share/licenses/ffmpeg && cp $(FFMPEG_MIN)/COPYING.* \
	    $(FFMPEG_MIN)/SOURCE dist/share/licenses/ffmpeg/
	$(Q)$(CC) -O2 -std=c11 -D_GNU_SOURCE -Iinclude -o dist/bin/synth tests/bench/synth.c \
	    build-dist/libdlk.a $(shell $(PKG_CONFIG) --libs $(DIST_PKGS)) \
	    $(CUDA_LIBS) -lpthread -lm -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/../lib'
	$(Q)$(CC) -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Ilib -o dist/bin/decode_bench \
	    tests/bench/decode_bench.c build-dist/libdlk.a \
	    $(shell $(PKG_CONFIG) --cflags --libs $(DIST_PKGS)) \
	    $(CUDA_LIBS) -lpthread -lm -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/../lib'
	$(Q)$(CC) -O2 -D_GNU_SOURCE -o dist/bin/link_proxy tests/bench/link_proxy.c -lpthread
	$(Q)if $(PKG_CONFIG) --exists libmicrohttpd; then $(CC) -O2 -std=c11 -D_GNU_SOURCE \
	    -o dist/bin/s3_dir_server tests/bench/s3_dir_server.c \
	    $$($(PKG_CONFIG) --cflags --libs libmicrohttpd) -lpthread \
	    -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/../lib' && \
	    cp -L $$(ldd dist/bin/s3_dir_server | awk '/libmicrohttpd/{print $$3}') dist/lib/; fi
	$(Q)if [ "$(CUDA)" = 1 ]; then $(NVCC) -O2 -o dist/bin/copy_overlap \
	    tests/bench/copy_overlap.cu -cudart static && $(NVCC) -O2 \
	    -o dist/bin/pin_probe tests/bench/pin_probe.cu -cudart static && $(NVCC) -O2 \
	    -o dist/bin/map_pin_probe tests/bench/map_pin_probe.cu -cudart static -lpthread && $(NVCC) -O2 \
	    -o dist/bin/host_path_probe tests/bench/host_path_probe.cu -cudart static && \
	    $(NVCC) -O2 -o dist/bin/h2d_all_gpus tests/bench/h2d_all_gpus.cu -cudart static && \
	    $(NVCC) -O2 -o dist/bin/host_path_all_gpus tests/bench/host_path_all_gpus.cu \
	    -cudart static -lpthread && $(NVCC) -O2 -o dist/bin/verify_bench \
	    tests/bench/verify_bench.cu build-dist/libdlk.a -cudart static -lpthread -lm; fi
	$(Q)mkdir -p dist/tests/bench && cp tests/bench/*.sh tests/bench/*.py dist/tests/bench/
	@echo "dist/: $$(du -sh dist | cut -f1) (bin/dlk needs: $$(ldd dist/bin/dlk | awk '/=>/{print $$1}' | tr '\n' ' '))"

# A binary wheel for pip: the package with libdlk.so, its binding and the
# dlk command, and every library they need but the C runtime, grafted in
# by auditwheel (which tags it manylinux for the newest glibc symbol they
# use), then scripts/wheel-graft.sh (those the manylinux policy leaves to
# the system but a bare image may lack: zlib, expat) and FFmpeg's
# decoding libraries built for it (ffmpeg-min; Debian's FFmpeg would
# bring some 130 libraries, X11, GLib and cairo among them), which no
# ELF file of the wheel names: the first video opens them.  libstdc++
# and libgcc (CUDA's runtime needs them) are
# linked in; CUDA itself is the driver's, found at run time, so one wheel
# serves machines with and without GPUs.
WHEEL_BUILD := build-wheel
WHEEL := $(WHEEL_BUILD)/wheelhouse/.stamp
PY_SRC := $(wildcard python/pyproject.toml python/*.py python/README.md python/dlk/*.py python/dlk/*.c)
# the wheel and the dist tree are never sanitized, even from a `make
# SAN=1 ...` whose SAN every make below it inherits
wheel: wheel-deps ffmpeg-min
	$(Q)PKG_CONFIG_PATH=$(FFMPEG_MIN)/lib/pkgconfig $(MAKE) --no-print-directory SAN= BUILD=$(WHEEL_BUILD) VIDEO=1 \
	    CXXRT="-Wl,-Bstatic -lstdc++ -Wl,-Bdynamic" LDFLAGS="$(LDFLAGS) -static-libgcc" \
	    $(WHEEL_BUILD)/dlk $(WHEEL_BUILD)/libdlk.so.$(VERSION)
	$(Q)$(MAKE) --no-print-directory SAN= $(WHEEL)
	@ls $(WHEEL_BUILD)/wheelhouse/*.whl

# setuptools builds in the package's folder: a fresh copy of it, so that
# nothing of an earlier build travels in the wheel
$(WHEEL): $(WHEEL_BUILD)/dlk $(WHEEL_BUILD)/libdlk.so.$(VERSION) $(PY_SRC) env/store_env.c \
    scripts/wheel-graft.sh $(FFMPEG_MIN)/.built
	$(Q)rm -rf $(WHEEL_BUILD)/raw $(WHEEL_BUILD)/wheelhouse $(WHEEL_BUILD)/python
	$(Q)mkdir -p $(WHEEL_BUILD)/python/dlk && cp $$(find python -maxdepth 1 -type f -name "*.*") $(WHEEL_BUILD)/python/ && \
	    cp python/dlk/*.py python/dlk/*.c $(WHEEL_BUILD)/python/dlk/
	$(Q)DLK_SOURCE_DIR=$(CURDIR) DLK_LIBDIR=$(abspath $(WHEEL_BUILD)) python3 -m pip wheel \
	    -q --no-build-isolation --no-deps -w $(WHEEL_BUILD)/raw ./$(WHEEL_BUILD)/python
	$(Q)auditwheel repair --strip -w $(WHEEL_BUILD)/wheelhouse $(WHEEL_BUILD)/raw/dlk-*.whl \
	    >$(WHEEL_BUILD)/auditwheel.log 2>&1 || { cat $(WHEEL_BUILD)/auditwheel.log; exit 1; }
	$(Q)scripts/wheel-graft.sh $(WHEEL_BUILD)/wheelhouse/dlk-*.whl $(FFMPEG_MIN)
	$(Q)touch $@

clean:
	rm -rf build build-san build-tsan build-fuzz build-fault build-fault-san build-dist build-wheel build-ffmpeg build-ffmpeg.src dist dlk.pc

-include $(LIB_OBJ:.o=.d) $(CMD_OBJ:.o=.d)
