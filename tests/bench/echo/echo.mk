# tests/bench/echo/echo.mk -- the echo benchmark of the io_uring layer:
# parkway's echo server against standalone Asio (epoll and io_uring
# backends) and a hand-written epoll loop, all driven by one load client
# over loopback. Not part of `make test`.
#
#   make bench-echo                     build, run (~3.5 min), print the table,
#                                       write $(BUILD)/bench/echo/results.json
#   make bench-echo ECHO_ARGS=--quick   one repetition, shorter runs (~25 s)
#   make bench-echo-build               only build the binaries
#
# With BENCH_ARGS=--quick (make bench) the echo runs are quick too.
#
# See tests/bench/echo/run_echo.py and docs/benchmarks.md, "Echo over
# loopback (io_uring layer)". Needs libasio-dev (make deps).

ECHO_DIR  := $(BUILD)/bench/echo
# g++ like the other benchmarks, also when CXX=clang++ builds the library.
ECHO_CC   := g++
ECHO_CXX  := -std=c++20 $(OPT) -Wall -Wextra -Wno-interference-size -pthread
ECHO_SRC  := tests/bench/echo
ECHO_BINS := $(ECHO_DIR)/echo_parkway $(ECHO_DIR)/echo_asio_epoll $(ECHO_DIR)/echo_asio_uring \
             $(ECHO_DIR)/echo_epoll $(ECHO_DIR)/echo_client
ECHO_ARGS ?= $(filter --quick,$(BENCH_ARGS))

.PHONY: bench-echo bench-echo-build
bench-echo-build: $(ECHO_BINS)

$(ECHO_DIR)/echo_parkway: $(ECHO_SRC)/echo_parkway.cpp $(ECHO_SRC)/echo.mk $(LIB_A) $(HEADERS)
	@mkdir -p $(dir $@)
	$(ECHO_CC) $(CPPFLAGS) $(ECHO_CXX) $< -o $@ $(LIB_A) -luring $(LDLIBS)

# Asio's default reactor on Linux: epoll.
$(ECHO_DIR)/echo_asio_epoll: $(ECHO_SRC)/echo_asio.cpp $(ECHO_SRC)/echo.mk
	@mkdir -p $(dir $@)
	$(ECHO_CC) $(ECHO_CXX) $< -o $@ $(LDLIBS)

# Asio on io_uring: with epoll disabled, io_uring is the default backend
# (ASIO_HAS_IO_URING_AS_DEFAULT) for sockets and for the scheduler's wait.
$(ECHO_DIR)/echo_asio_uring: $(ECHO_SRC)/echo_asio.cpp $(ECHO_SRC)/echo.mk
	@mkdir -p $(dir $@)
	$(ECHO_CC) $(ECHO_CXX) -DASIO_HAS_IO_URING -DASIO_DISABLE_EPOLL $< -o $@ -luring $(LDLIBS)

$(ECHO_DIR)/echo_epoll: $(ECHO_SRC)/echo_epoll.cpp $(ECHO_SRC)/echo.mk
	@mkdir -p $(dir $@)
	$(ECHO_CC) $(ECHO_CXX) $< -o $@ $(LDLIBS)

$(ECHO_DIR)/echo_client: $(ECHO_SRC)/echo_client.cpp tests/bench/client_slice.hpp tests/bench/common.hpp $(ECHO_SRC)/echo.mk
	@mkdir -p $(dir $@)
	$(ECHO_CC) $(ECHO_CXX) $< -o $@ $(LDLIBS)

bench-echo: $(ECHO_BINS)
	python3 $(ECHO_SRC)/run_echo.py --bin $(ECHO_DIR) --out $(ECHO_DIR)/results.json $(ECHO_ARGS)
