# parkway -- top-level Makefile.
#
#   make deps          install the Debian packages everything below needs
#   make               libparkway.a, libparkway.so, parkway.pc (in build/)
#   make demo          build and run the demo (parallel work, then idle CPU)
#   make test          unit tests + SPIN models + sched_ext VM tests
#   make test-tsan     unit tests under ThreadSanitizer
#   make test-asan     unit tests under AddressSanitizer + UBSan
#   make bench         benchmarks against oneTBB, OpenMP, ... (not in test)
#   make install PREFIX=/usr/local     (make uninstall PREFIX=... removes it again)
#   make help          the main targets, one line each
#
# Each area keeps its rules in its own fragment (tests/tests.mk,
# docs/spec/spec.mk, bpf/bpf.mk, tools/tools.mk, tools/vm/vm.mk,
# tests/bench/bench.mk, tools/httpd/httpd_parts.mk); this file holds the library and the shared flags.

PREFIX   ?= /usr/local
CXX      ?= g++
BUILD    ?= build
VERSION  := 0.1.0
# The soname carries the ABI version: the major version, or 0.minor while
# the major version is 0 (a 0.x release may change the API and the ABI;
# cmake/parkwayConfigVersion.cmake.in applies the same rule to find_package).
VERSION_MAJOR := $(word 1,$(subst ., ,$(VERSION)))
VERSION_MINOR := $(word 2,$(subst ., ,$(VERSION)))
SOVERSION     := $(if $(filter 0,$(VERSION_MAJOR)),0.$(VERSION_MINOR),$(VERSION_MAJOR))
SONAME        := libparkway.so.$(SOVERSION)

WARN      := -Wall -Wextra -Wno-interference-size
CXXSTD    := -std=c++20
OPT       ?= -O2 -g
CPPFLAGS  += -Iinclude -Iuserspace -D_GNU_SOURCE
CXXFLAGS  += $(CXXSTD) $(OPT) $(WARN) -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -pthread
LDLIBS    += -pthread -luring

# clang warns about unknown warning options; keep one flag set for both.
ifneq (,$(findstring clang,$(CXX)))
WARN := -Wall -Wextra
endif

LIB_SRCS := $(wildcard userspace/*.cpp userspace/*/*.cpp)
LIB_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(LIB_SRCS))
LIB_A    := $(BUILD)/libparkway.a
LIB_SO   := $(BUILD)/libparkway.so
PC_FILE  := $(BUILD)/parkway.pc
HEADERS  := $(wildcard include/parkway/*.hpp)

.PHONY: all deps lib demo test test-unit test-tsan test-asan bench install uninstall clean check-warnings check-warnings-clang help
all: lib
lib: $(LIB_A) $(LIB_SO) $(PC_FILE)

deps:
	@bash tools/install-deps.sh

$(BUILD)/obj/%.o: %.cpp $(HEADERS) $(wildcard userspace/*.hpp userspace/*/*.hpp)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# Only parkway:: symbols leave the shared library (userspace/exports.map).
# Linked again when the Makefile changes: the soname comes from VERSION.
# The soname's link beside it lets a program linked in $(BUILD) start.
$(LIB_SO): $(LIB_OBJS) userspace/exports.map Makefile
	$(CXX) -shared -o $@ $(LIB_OBJS) -Wl,--version-script=userspace/exports.map \
	  -Wl,-soname,$(SONAME) $(LDLIBS) -luring
	ln -sfn libparkway.so $(dir $@)$(SONAME)

# The .pc names the prefix it is installed under; `make install` writes it
# again for its own PREFIX. Files written by a redirection get the mode
# 644 explicitly: under a umask such as 077 they would otherwise be
# unreadable to every user but the one who installed.
define write_pc
	@mkdir -p $(dir $(2))
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: parkway\nDescription: work-stealing task runtime whose idle workers sleep on futex words\nVersion: %s\nCflags: -I$${includedir} -std=c++20 -pthread\nLibs: -L$${libdir} -lparkway -pthread\nLibs.private: -luring\n' \
	  "$(1)" "$(VERSION)" > $(2)
	chmod 644 $(2)
endef

$(PC_FILE): Makefile
	$(call write_pc,$(PREFIX),$@)

# The CMake package (find_package(parkway CONFIG)): cmake/*.cmake.in with
# the version and soname filled in; no CMake needed to build or install.
# It finds the prefix from its own place (PREFIX/lib/cmake/parkway), so an
# installed tree still works after it is moved or copied elsewhere.
CMAKE_PKG_DIR := lib/cmake/parkway
CMAKE_PKG     := parkwayConfig.cmake parkwayConfigVersion.cmake
define write_cmake
	sed -e 's|@PARKWAY_VERSION@|$(VERSION)|g' -e 's|@PARKWAY_SONAME@|$(SONAME)|g' cmake/$(2).in > $(1)/$(2)
	chmod 644 $(1)/$(2)
endef

# build/parkway (the `parkway` command) is installed when tools/tools.mk is
# there (it adds the prerequisite and sets PARKWAY_TOOL_OK); its `trace`
# commands need only the compiler, its `sched` ones clang-19 and libbpf.
install: lib httpd
	rm -rf $(DESTDIR)$(PREFIX)/include/parkway  # no header of an older version stays
	install -d $(DESTDIR)$(PREFIX)/include/parkway $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin \
	  $(DESTDIR)$(PREFIX)/$(CMAKE_PKG_DIR)
	install -m 755 $(BUILD)/parkway-httpd $(DESTDIR)$(PREFIX)/bin/parkway-httpd
	$(if $(PARKWAY_TOOL_OK),install -m 755 $(PARKWAY_BIN) $(DESTDIR)$(PREFIX)/bin/parkway,@echo "install: skipped the parkway tool ($(PREFIX)/bin/parkway): $(or $(PARKWAY_TOOL_WHY),tools/tools.mk not found)")
	install -m 644 $(HEADERS) $(DESTDIR)$(PREFIX)/include/parkway/
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/libparkway.so.$(VERSION)
	ln -sfn libparkway.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sfn $(SONAME) $(DESTDIR)$(PREFIX)/lib/libparkway.so
	$(call write_pc,$(PREFIX),$(DESTDIR)$(PREFIX)/lib/pkgconfig/parkway.pc)
	$(call write_cmake,$(DESTDIR)$(PREFIX)/$(CMAKE_PKG_DIR),parkwayConfig.cmake)
	$(call write_cmake,$(DESTDIR)$(PREFIX)/$(CMAKE_PKG_DIR),parkwayConfigVersion.cmake)

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/parkway
	rm -f $(DESTDIR)$(PREFIX)/bin/parkway-httpd $(DESTDIR)$(PREFIX)/bin/parkway
	rm -f $(DESTDIR)$(PREFIX)/lib/libparkway.a $(DESTDIR)$(PREFIX)/lib/libparkway.so \
	  $(DESTDIR)$(PREFIX)/lib/$(SONAME) $(DESTDIR)$(PREFIX)/lib/libparkway.so.$(VERSION) \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/parkway.pc
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/$(CMAKE_PKG_DIR)/,$(CMAKE_PKG))
	rmdir $(DESTDIR)$(PREFIX)/$(CMAKE_PKG_DIR) 2>/dev/null || true

clean:
	rm -rf $(BUILD)

help:
	@echo "make deps            install the Debian packages the targets below need"
	@echo "make, make all       the library and build/parkway"
	@echo "make lib             libparkway.a, libparkway.so, parkway.pc in $(BUILD)/"
	@echo "make demo            build and run the demo (parallel work, then idle CPU)"
	@echo "make test            every test suite below, then one total line"
	@echo "make test-unit       unit tests (test-tsan, test-asan: the same under sanitizers)"
	@echo "make test-install    install into $(BUILD)/, build programs against it, uninstall"
	@echo "make test-cli        the parkway command's messages and exit codes"
	@echo "make test-httpd      parkway-httpd end to end (test-http-parser: its parser alone)"
	@echo "make spec-parking    one SPIN model (also spec-slot, spec-deque, ...)"
	@echo "make bench           benchmarks against oneTBB, OpenMP, ... (not in make test)"
	@echo "make install         headers, libraries, .pc, CMake package, tools under PREFIX ($(PREFIX))"
	@echo "make uninstall       remove what make install PREFIX=... installed"
	@echo "make httpd           build $(BUILD)/parkway-httpd, the example HTTP server"
	@echo "make vm-test         sched_ext tests in a QEMU guest running a sched_ext kernel"
	@echo "make parkway-tool    build $(BUILD)/parkway: trace reports and exports, the sched_ext scheduler"
	@echo "make clean           remove $(BUILD)/"
	@echo "test suites (make test runs them all): $(TEST_SUITES)"

# The demo builds against an installed copy found by pkg-config, the way a
# server would link parkway.
DEMO_PREFIX := $(CURDIR)/$(BUILD)/prefix
$(BUILD)/demo: tools/demo.cpp $(LIB_A) $(LIB_SO) $(PC_FILE)
	@$(MAKE) --no-print-directory install PREFIX=$(DEMO_PREFIX) >/dev/null
	$(CXX) -O2 -Wall -Wextra -o $@ tools/demo.cpp \
	  $$(PKG_CONFIG_PATH=$(DEMO_PREFIX)/lib/pkgconfig pkg-config --cflags --libs parkway) \
	  -Wl,-rpath,$(DEMO_PREFIX)/lib

# check-usdt.sh's workload in which a steal must happen, built the same way.
$(BUILD)/usdt_steal: tests/usdt_steal.cpp $(BUILD)/demo
	$(CXX) -std=c++20 -O2 -Wall -Wextra -o $@ tests/usdt_steal.cpp \
	  $$(PKG_CONFIG_PATH=$(DEMO_PREFIX)/lib/pkgconfig pkg-config --cflags --libs parkway) \
	  -Wl,-rpath,$(DEMO_PREFIX)/lib

demo: deps $(BUILD)/demo
	$(BUILD)/demo

# Fragments. A fragment that has a test suite appends its make target to
# TEST_SUITES; the target must end its output with a line
# "N passed, N failed, N skipped" and exit non-zero when something failed.
TEST_SUITES :=
-include tests/tests.mk
-include $(wildcard docs/spec/*.mk)
-include bpf/bpf.mk
-include tools/tools.mk
-include tools/vm/vm.mk
-include tests/bench/bench.mk
-include tools/httpd/httpd_parts.mk
-include tests/doc_snippets.mk

# make test: every suite, each in its own make, then one total line, in two
# phases (tests/run-suites.sh). Phase 1 runs two lanes side by side: the
# builds of the suites of phase 2 and the suites that measure no time
# (SPIN models, compile checks, the QEMU guests under -icount, messages);
# phase 2 runs each other suite alone (idle CPU, timeouts, latency bounds).
# test-doc-snippets stays in phase 2: a guide example bounds a shutdown
# by 20 ms.
TEST_BUILDS     += lib $(PARKWAY_BIN) $(PARKWAY_NOSCHED_BIN)
TEST_LANE_BUILT := test-builds vm-test test-builds-san test-http-parser test-cli test-install \
  test-slot-forced test-trace-san
TEST_LANE_FREE  := $(filter spec-%,$(TEST_SUITES)) check-warnings-clang test-api-errors

# What phase 2 runs, built ahead: the plain build (then the demo, whose
# recipe installs into $(BUILD)/prefix), then each sanitizer build in turn
# (one make per build directory, never two at once in one directory).
# The plain build is made with -Werror: it is check-warnings' g++ half
# (tests/tests.mk), for what it compiles; objects an earlier plain make
# left are not compiled again (make check-warnings checks from scratch).
.PHONY: test-builds test-builds-san
test-builds:
	+@$(MAKE) --no-print-directory -k OPT="$(OPT) -Werror" $(TEST_BUILDS)
	+@$(MAKE) --no-print-directory OPT="$(OPT) -Werror" $(BUILD)/demo $(BUILD)/usdt_steal
test-builds-san:
	+@rc=0; for t in $(TEST_BUILDS_SAN); do $(MAKE) --no-print-directory $$t || rc=1; done; exit $$rc

test: deps
	@bash tests/run-suites.sh $(MAKE) --lane "$(TEST_LANE_BUILT)" --lane "$(TEST_LANE_FREE)" -- $(TEST_SUITES)
