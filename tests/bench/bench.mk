# tests/bench/bench.mk -- `make bench`: parkway against oneTBB task_group,
# OpenMP tasks (libgomp) and a bare futex floor. Not part of `make test`.
#
#   make bench                  build, run everything (~3 min), print the
#                               ratio table, write $(BUILD)/bench/results.json
#   make bench BENCH_ARGS=--quick   fewer repetitions (a smoke run, ~1 min)
#   make bench-build            only build the binaries
#   make bench-check            check the harness's parsing and percentiles (~15 s;
#                               a suite of make test)
#
# One binary per runtime (same driver, tests/bench/common.hpp), so no two
# runtimes share a process or a getrusage total; run_bench.py interleaves
# their repetitions. See docs/benchmarks.md.

BENCH_DIR   := $(BUILD)/bench
# Always g++ (also when CXX=clang++ builds the library): the OpenMP peer
# must be libgomp, which only g++ targets, and the sequential baselines use
# g++ attributes (noipa) to stop the compiler folding the timed calls.
BENCH_CC    := g++
BENCH_CXX   := -std=c++20 $(OPT) -Wall -Wextra -Wno-interference-size -pthread
BENCH_DEPS  := tests/bench/common.hpp tests/bench/bench.mk
BENCH_BINS  := $(BENCH_DIR)/bench_parkway $(BENCH_DIR)/bench_tbb $(BENCH_DIR)/bench_omp $(BENCH_DIR)/bench_floor
BENCH_ARGS  ?=

# bench_submit.cpp (injection-queue push throughput/latency against
# moodycamel and a mutex deque) is self-contained, with its own main(); it
# is built and run after the runtime comparison when present, writing
# $(BENCH_DIR)/submit.json and submit.txt.
ifneq (,$(wildcard tests/bench/bench_submit.cpp))
BENCH_SUBMIT := $(BENCH_DIR)/bench_submit
endif

.PHONY: bench-build
bench-build: $(BENCH_BINS) $(BENCH_SUBMIT)

$(BENCH_DIR)/bench_parkway: tests/bench/bench_parkway.cpp $(BENCH_DEPS) $(LIB_A) $(HEADERS)
	@mkdir -p $(dir $@)
	$(BENCH_CC) $(CPPFLAGS) $(BENCH_CXX) $< -o $@ $(LIB_A) $(LDLIBS)

$(BENCH_DIR)/bench_tbb: tests/bench/bench_tbb.cpp $(BENCH_DEPS)
	@mkdir -p $(dir $@)
	$(BENCH_CC) $(BENCH_CXX) $< -o $@ -ltbb $(LDLIBS)

$(BENCH_DIR)/bench_omp: tests/bench/bench_omp.cpp $(BENCH_DEPS)
	@mkdir -p $(dir $@)
	$(BENCH_CC) $(BENCH_CXX) -fopenmp $< -o $@ $(LDLIBS)

$(BENCH_DIR)/bench_floor: tests/bench/bench_floor.cpp $(BENCH_DEPS)
	@mkdir -p $(dir $@)
	$(BENCH_CC) $(BENCH_CXX) $< -o $@ $(LDLIBS)

$(BENCH_DIR)/bench_submit: tests/bench/bench_submit.cpp $(LIB_A) $(HEADERS)
	@mkdir -p $(dir $@)
	$(BENCH_CC) $(CPPFLAGS) $(BENCH_CXX) $< -o $@ $(LIB_A) $(LDLIBS)

bench: $(BENCH_BINS) $(BENCH_SUBMIT)
	python3 tests/bench/run_bench.py --bin $(BENCH_DIR) --out $(BENCH_DIR)/results.json $(BENCH_ARGS)
ifneq (,$(BENCH_SUBMIT))
	$(BENCH_SUBMIT) $(filter --quick,$(BENCH_ARGS)) --json $(BENCH_DIR)/submit.json > $(BENCH_DIR)/submit.txt; \
	  rc=$$?; cat $(BENCH_DIR)/submit.txt; exit $$rc
endif

# bench-check: the harness's own parsing and arithmetic (wrk and h2load
# output, percentiles with requests never answered, the compute verdicts),
# with each open-loop client run for 2-3 s over loopback against a server
# that leaves requests unanswered (tests/bench/check_bench.py, ~15 s).
.PHONY: bench-check
bench-check: $(BUILD)/bench/echo/echo_client $(BUILD)/bench/httpd/http_open_loop
	python3 tests/bench/check_bench.py --echo-client $(BUILD)/bench/echo/echo_client \
	  --open-loop-client $(BUILD)/bench/httpd/http_open_loop
TEST_SUITES += bench-check
TEST_BUILDS += $(BUILD)/bench/echo/echo_client $(BUILD)/bench/httpd/http_open_loop

# The I/O benchmarks: echo against Asio and epoll, parkway-httpd against
# nginx (tests/bench/echo/, tests/bench/httpd/). They run after every
# benchmark binary is built, so nothing compiles while they measure.
include tests/bench/echo/echo.mk
-include tests/bench/httpd/httpd_bench.mk
bench: bench-echo bench-httpd
bench-echo: | $(BENCH_BINS) $(BENCH_SUBMIT)
bench-build: bench-echo-build
# Under `make -j bench` the two would otherwise measure at the same time,
# or parkway-httpd would compile while the echo measures: every binary
# first, then the echo, then the httpd, then bench's own recipe.
ifneq (,$(filter bench,$(MAKECMDGOALS)))
bench-echo: | $(BUILD)/parkway-httpd $(BUILD)/bench/httpd/http_open_loop
bench-httpd: | bench-echo
endif
