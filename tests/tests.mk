# tests/tests.mk -- the GoogleTest suite, plain and under sanitizers.
#
#   make test-unit    build/tests/parkway_tests
#   make test-tsan    the same tests, library and all, under ThreadSanitizer
#   make test-asan    ... under AddressSanitizer + UndefinedBehaviorSanitizer
#   make check-warnings   the library and tests with g++ and clang-19, -Werror
#   make test-clang   the scheduling, deque and unobserved-exception tests of the clang-19 build

TEST_SRCS := $(wildcard tests/test_*.cpp)
TEST_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(TEST_SRCS))
TEST_BIN  := $(BUILD)/tests/parkway_tests
GTEST_LIBS := -lgtest_main -lgtest -lgmock -luring -pthread

$(TEST_BIN): $(TEST_OBJS) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -o $@ $(TEST_OBJS) $(LIB_A) $(GTEST_LIBS) $(LDLIBS)

# Test objects of a build with -g carry line tables only (-g1 after it):
# backtraces, sanitizer reports and gdb's `bt` still name files and lines,
# and the tests compile in less time (tests/test_io.cpp: about 16 s of CPU
# against 24 s at -O2). Builds without -g (check-warnings) add none.
TEST_DEBUG := $(if $(filter -g,$(OPT)),-g1)
$(BUILD)/obj/tests/%.o: tests/%.cpp $(HEADERS) $(wildcard userspace/*.hpp userspace/*/*.hpp tests/*.hpp)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) -Itests $(CXXFLAGS) $(TEST_DEBUG) -c $< -o $@

.PHONY: test-unit-build
test-unit-build: $(TEST_BIN)

test-unit: $(TEST_BIN)
	@bash tests/run-gtest.sh $(TEST_BIN)

TEST_SUITES += test-unit test-tsan test-asan

# The sanitizer builds, shared by every suite that runs something under a
# sanitizer (test-tsan, test-slot-forced, test-trace-san, test-asan,
# test-httpd-asan): one build/tsan and one build/asan. AddressSanitizer +
# UBSan compile at -Og rather than -O1: the same checks (optimizing only
# removes instrumented accesses, never adds a check), 40% less compile
# time (tests/test_io.cpp: 17.1 s of CPU against 28.6 s) and the unit
# tests run as fast (17.0 s against 18.5 s). TSAN stays at -O1: -Og saves
# only 10% there. Both keep line tables only (-g1): their reports name
# files and lines, and they compile in less time (tests/test_io.cpp:
# about 12 s of CPU against 20 s under TSAN, 19 s against 26 s under ASAN).
TSAN_OPT := -O1 -g1 -fsanitize=thread
ASAN_OPT := -Og -g1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
TSAN_MAKE := $(MAKE) --no-print-directory BUILD=build/tsan OPT="$(TSAN_OPT)" LDLIBS="-pthread -fsanitize=thread"
ASAN_MAKE := $(MAKE) --no-print-directory BUILD=build/asan OPT="$(ASAN_OPT)" \
  LDLIBS="-pthread -fsanitize=address,undefined"

# What the sanitizer suites run, built ahead (make test builds them beside
# the suites that measure no time: tests/run-suites.sh).
.PHONY: test-tsan-build test-asan-build
test-tsan-build:
	+@$(TSAN_MAKE) test-unit-build build/tsan/tests/slot_forced_g1f build/tsan/tests/trace_ground_truth
test-asan-build:
	+@$(ASAN_MAKE) test-unit-build build/asan/tests/trace_ground_truth
TEST_BUILDS_SAN += test-tsan-build test-asan-build test-chaos-build
TEST_BUILDS += $(TEST_BIN) $(SLOT_FORCED_BIN) $(TRACE_GT_BIN) $(TRACE_GT_DYN_BIN)

test-tsan:
	+@$(TSAN_MAKE) test-unit

test-asan:
	+@$(ASAN_MAKE) test-unit

# check-warnings: both compilers, each in a build directory of its own.
# make test runs only the clang half (check-warnings-clang): its g++ half
# is the plain build itself, which test-builds makes with -Werror
# (Makefile), so g++ compiles the library and tests once, not twice.
check-warnings:
	@$(MAKE) --no-print-directory BUILD=build/werror-gcc CXX=g++ OPT="-O2 -Werror" lib test-unit-build
	@$(MAKE) --no-print-directory BUILD=build/werror-clang CXX=clang++-19 OPT="-O2 -Werror" lib test-unit-build
	@echo "check-warnings: g++ and clang++-19 build the library and tests with -Wall -Wextra -Werror"
	@echo "2 passed, 0 failed, 0 skipped"

check-warnings-clang:
	@$(MAKE) --no-print-directory BUILD=build/werror-clang CXX=clang++-19 OPT="-O2 -Werror" lib test-unit-build
	@echo "check-warnings-clang: clang++-19 builds the library and tests with -Wall -Wextra -Werror"
	@echo "1 passed, 0 failed, 0 skipped"

TEST_SUITES += check-warnings-clang

# The clang-19 build of the tests (check-warnings' build, reused), run for
# the scheduling code whose fast paths the compiler shapes: clang skips
# [G1] in cases g++ does not (docs/design/slot.md, "The first spawn"), and
# the deque and parking rely on compiler barriers ([D3], [N1]).
test-clang:
	@$(MAKE) --no-print-directory BUILD=build/werror-clang CXX=clang++-19 OPT="-O2 -Werror" test-unit-build
	@bash tests/run-gtest.sh build/werror-clang/tests/parkway_tests \
	  --gtest_filter='TaskGroup.*:GroupSlot.*:ParallelFor.*:Coro.*:Cancel.*:Runtime.*:Deque.*:Parking.*:Unobserved.*'

TEST_SUITES += test-clang

# The [G1f] case no compiler here produces (a first spawn that skips [G1]
# with a heap task pending, docs/design/slot.md), forced by a hook; its own
# binary because the hook changes TaskGroup::spawn in its file. Plain and
# under ThreadSanitizer.
SLOT_FORCED_BIN := $(BUILD)/tests/slot_forced_g1f
$(SLOT_FORCED_BIN): tests/slot_forced_g1f.cpp $(LIB_A) $(HEADERS) tests/test_util.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) -Itests $(CXXFLAGS) -o $@ $< $(LIB_A) $(GTEST_LIBS) $(LDLIBS)

.PHONY: test-slot-forced test-slot-forced-run
test-slot-forced-run: $(SLOT_FORCED_BIN)
	@bash tests/run-gtest.sh $(SLOT_FORCED_BIN)

test-slot-forced:
	@log=$$(mktemp); rc=0; \
	$(MAKE) --no-print-directory test-slot-forced-run >$$log 2>&1 || rc=1; \
	$(TSAN_MAKE) test-slot-forced-run >>$$log 2>&1 || rc=1; \
	grep -vE '^[0-9]+ passed, [0-9]+ failed' $$log; \
	awk '/^[0-9]+ passed, [0-9]+ failed/ {p+=$$1; f+=$$3; s+=$$5} END {printf "%d passed, %d failed, %d skipped\n", p, f, s}' $$log; \
	rm -f $$log; exit $$rc

TEST_SUITES += test-slot-forced

# Misuse of the public API (a reference or unmovable result, a callable
# that cannot be copied, ...) fails to compile with a message naming it.
.PHONY: test-api-errors
test-api-errors:
	@bash tests/check-api-errors.sh

TEST_SUITES += test-api-errors

# USDT probes: present in the shared library and firing under bpftrace
# (the demo and usdt_steal are linked against the installed libparkway.so).
test-usdt: lib $(BUILD)/demo $(BUILD)/usdt_steal
	@bash tests/check-usdt.sh $(DEMO_PREFIX)/lib/libparkway.so.$(VERSION) $(BUILD)/demo $(BUILD)/usdt_steal

TEST_SUITES += test-usdt

# Installing: files and links, only parkway:: exported, a program outside
# the tree built with pkg-config alone (shared and static), uninstall.
.PHONY: test-install
test-install: lib
	@bash tests/check-install.sh $(MAKE) $(BUILD) $(VERSION)

TEST_SUITES += test-install

# Randomized schedules: the runtime built with PW_CHAOS() points (random
# yields, sleeps and spins at every parking-protocol step and on the steal
# gate's rare paths), running the scheduling and deque tests.
# Only the library and the tests in whose source or project headers
# (found with -MM) PARKWAY_CHAOS appears are compiled again with it
# (listed in build/chaos/chaos-tests); the other test objects are the
# plain build's, linked as they are: the define changes nothing in them
# (tests/test_io.cpp disassembles the same with and without it). This
# build takes 52 s of CPU instead of 133 s.
CHAOS_TESTS_LIST := build/chaos/chaos-tests
$(CHAOS_TESTS_LIST): $(TEST_SRCS) $(HEADERS) $(wildcard userspace/*.hpp userspace/*/*.hpp tests/*.hpp)
	@mkdir -p $(dir $@)
	@for f in $(TEST_SRCS); do \
	  deps=$$($(CXX) $(CPPFLAGS) -Itests $(CXXSTD) -MM $$f | sed -e 's/^[^:]*://' -e 's/\\$$//'); \
	  grep -qs PARKWAY_CHAOS $$deps && echo $$f; \
	done >$@.tmp; mv $@.tmp $@

.PHONY: test-chaos-build
test-chaos-build: $(TEST_OBJS) $(CHAOS_TESTS_LIST)
	+@objs=$$(for o in $(TEST_OBJS); do \
	  if grep -qx "$$(echo $$o | sed -E 's|^$(BUILD)/obj/||; s|\.o$$|.cpp|')" $(CHAOS_TESTS_LIST); \
	  then echo build/chaos/obj/$${o#$(BUILD)/obj/}; else echo $$o; fi; \
	done); \
	$(MAKE) --no-print-directory BUILD=build/chaos OPT="-O2 -g1 -DPARKWAY_CHAOS" TEST_OBJS="$$(echo $$objs)" test-unit-build

# Not Coro.ADroppedSpawnedInAThrowingTreeWaitsForItsOwn: under these
# schedules a dropped Spawned's wait, which is no isolation of the
# child's subtree, still hangs in the fib shape (1 of 2 runs;
# docs/design/coroutines.md, "Limits").
test-chaos: test-chaos-build
	@bash tests/run-gtest.sh build/chaos/tests/parkway_tests \
	  --gtest_filter='Parking.*:Runtime.*:TaskGroup.*:GroupSlot.*:ParallelFor.*:Coro.*:Cancel.*:Deque.*:Stack.*:Fork.*:Io.*-Coro.ADroppedSpawnedInAThrowingTreeWaitsForItsOwn'

TEST_SUITES += test-chaos

# The same runtime with the symmetric [N1] fence and a deque that always
# fences its pops (membarrier switched off,
# as on a kernel without it): userspace/asymmetric_fence.hpp.
.PHONY: test-symmetric-fence
test-symmetric-fence: $(TEST_BIN)
	@PARKWAY_MEMBARRIER=0 bash tests/run-gtest.sh $(TEST_BIN) \
	  --gtest_filter='Parking.*:Runtime.*:TaskGroup.*:GroupSlot.*:ParallelFor.*:Coro.*:AsymmetricFence.Mode*:Deque.*:Stack.*:Fork.*'

TEST_SUITES += test-symmetric-fence

# The I/O tests again with the in-ring park's fallback wake (an eventfd
# read armed in the ring, rung by wakers: docs/design/io.md), the path of
# kernels without IORING_OP_FUTEX_WAIT, forced on this one.
.PHONY: test-io-eventfd
test-io-eventfd: $(TEST_BIN)
	@PARKWAY_IO_WAKE=eventfd bash tests/run-gtest.sh $(TEST_BIN) --gtest_filter='Io.*'

TEST_SUITES += test-io-eventfd

# The I/O tests again on rings set up without SINGLE_ISSUER and
# DEFER_TASKRUN (COOP_TASKRUN: the kernel posts completions as they
# happen), the setup kernels before 6.1 fall back to, forced on this one.
.PHONY: test-io-coop
test-io-coop: $(TEST_BIN)
	@PARKWAY_IO_SETUP=coop bash tests/run-gtest.sh $(TEST_BIN) --gtest_filter='Io*'

TEST_SUITES += test-io-coop

# The in-process trace (PARKWAY_TRACE) and `parkway trace`: a program with
# a known schedule whose report must show it, the format's robustness
# (truncated and corrupt files), the exports, the messages. build/parkway
# is named by path: tools/tools.mk, which sets PARKWAY_BIN, is read later.
TRACE_GT_BIN := $(BUILD)/tests/trace_ground_truth
$(TRACE_GT_BIN): tests/trace_ground_truth.cpp $(LIB_A) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -o $@ $< $(LIB_A) -luring $(LDLIBS)

# The same program linked to libparkway.so, whose probes `parkway trace
# record -- COMMAND` must find in a library the command has not loaded yet.
TRACE_GT_DYN_BIN := $(BUILD)/tests/trace_ground_truth_dyn
$(TRACE_GT_DYN_BIN): tests/trace_ground_truth.cpp $(LIB_SO) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -o $@ $< -L$(BUILD) -lparkway -Wl,-rpath,$(abspath $(BUILD)) -luring $(LDLIBS)

# The report's quantile sketch against sorted lists (its stated error bound).
TRACE_SKETCH_BIN := $(BUILD)/tests/trace_sketch_check
$(TRACE_SKETCH_BIN): tests/trace_sketch_check.cpp tools/trace/trace_sketch.hpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 -O2 -g -Wall -Wextra -Itools/trace -o $@ $<

.PHONY: test-trace
test-trace: $(TRACE_GT_BIN) $(BUILD)/parkway $(TRACE_SKETCH_BIN) $(TRACE_GT_DYN_BIN)
	@python3 tests/check-trace.py $(BUILD)/parkway $(TRACE_GT_BIN) $(TRACE_SKETCH_BIN) $(TRACE_GT_DYN_BIN)

TEST_SUITES += test-trace

# The recorder under ThreadSanitizer and AddressSanitizer + UBSan: the
# ground-truth program (library and all built with the sanitizer, as in
# test-tsan and test-asan) traced at the task level, with small chunks so
# that hand-overs, drops and reused streams all happen.
# The reader too (`parkway trace` alone, ASan + UBSan) reads and exports
# each of those files and damaged copies of one.
TRACE_TOOL_ASAN := build/asan/tests/parkway_trace
$(TRACE_TOOL_ASAN): tests/trace_tool_main.cpp $(wildcard tools/trace/*.cpp tools/trace/*.hpp tools/trace/*.h) userspace/trace/format.hpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 $(ASAN_OPT) \
	  -Wall -Wextra -D_GNU_SOURCE -Iuserspace -Itools/trace -o $@ $< $(wildcard tools/trace/*.cpp)

.PHONY: test-trace-san
test-trace-san: $(BUILD)/parkway $(TRACE_TOOL_ASAN)
	+@$(TSAN_MAKE) build/tsan/tests/trace_ground_truth
	+@$(ASAN_MAKE) build/asan/tests/trace_ground_truth
	@bash tests/check-trace-san.sh $(TRACE_TOOL_ASAN) build/tsan/tests/trace_ground_truth build/asan/tests/trace_ground_truth

TEST_SUITES += test-trace-san
