# tests/bench/httpd/httpd_bench.mk -- parkway-httpd against nginx over
# loopback, driven by wrk and two small clients of our own (the idle
# connections' holder in run_httpd_bench.py; the open-loop client,
# http_open_loop.cpp). Not part of `make test`.
#
#   make bench-httpd                      build parkway-httpd, run (~7 min),
#                                         print the table, write
#                                         $(BUILD)/bench/httpd.json
#   make bench-httpd HTTPD_BENCH_ARGS=--quick   one repetition, shorter runs
#   python3 tests/bench/httpd/run_httpd_bench.py --only idle   one section
#
# Needs nginx-light and wrk (make deps). The script starts its own nginx
# (own config from nginx.conf.in, pid file and temp dirs in a temporary
# directory, 127.0.0.1 and a free port) and stops every server it started.
# See docs/benchmarks.md, "HTTP server: parkway-httpd against nginx".
#
# The prerequisite names the binary by path, not $(HTTPD_BIN): this file may
# be read before tools/httpd/httpd_parts.mk defines that variable and rule.

HTTPD_BENCH_ARGS ?= $(filter --quick,$(BENCH_ARGS))

$(BUILD)/bench/httpd/http_open_loop: tests/bench/httpd/http_open_loop.cpp tests/bench/client_slice.hpp tests/bench/common.hpp \
                                     tests/bench/httpd/httpd_bench.mk
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 -O2 -Wall -Wextra $< -o $@

.PHONY: bench-httpd
bench-httpd: $(BUILD)/parkway-httpd $(BUILD)/bench/httpd/http_open_loop
	@mkdir -p $(BUILD)/bench
	python3 tests/bench/httpd/run_httpd_bench.py --httpd $(BUILD)/parkway-httpd \
	  --open-loop-client $(BUILD)/bench/httpd/http_open_loop \
	  --out $(BUILD)/bench/httpd.json $(HTTPD_BENCH_ARGS)
