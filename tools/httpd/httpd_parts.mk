# tools/httpd/httpd_parts.mk -- parkway-httpd's transport-independent parts
# (request parser, response head, request paths) and their GoogleTest suite.
#
#   make test-http-parser   build/tools/httpd/test_http, then run it
#
# HTTPD_OPT changes the optimization/sanitizer flags of this build only, e.g.
#   make test-http-parser BUILD=build/asan \
#     HTTPD_OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer"

HTTPD_DIR       := tools/httpd
HTTPD_OPT       ?= -O2 -g
HTTPD_CXXFLAGS  := -std=c++20 $(HTTPD_OPT) -Wall -Wextra -I$(HTTPD_DIR)
HTTPD_PART_SRCS := $(HTTPD_DIR)/http_parser.cpp $(HTTPD_DIR)/http_response.cpp $(HTTPD_DIR)/http_path.cpp
HTTPD_PART_HDRS := $(wildcard $(HTTPD_DIR)/*.hpp)
HTTPD_PART_OBJS := $(patsubst $(HTTPD_DIR)/%.cpp,$(BUILD)/tools/httpd/obj/%.o,$(HTTPD_PART_SRCS))
HTTPD_TEST_OBJ  := $(BUILD)/tools/httpd/obj/test_http.o
HTTPD_TEST_BIN  := $(BUILD)/tools/httpd/test_http

$(BUILD)/tools/httpd/obj/%.o: $(HTTPD_DIR)/%.cpp $(HTTPD_PART_HDRS)
	@mkdir -p $(dir $@)
	$(CXX) $(HTTPD_CXXFLAGS) -c $< -o $@

$(HTTPD_TEST_OBJ): HTTPD_CXXFLAGS += $(TEST_DEBUG)  # line tables only, as the unit tests (tests/tests.mk)

$(HTTPD_TEST_BIN): $(HTTPD_TEST_OBJ) $(HTTPD_PART_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(HTTPD_CXXFLAGS) -o $@ $^ -lgtest_main -lgtest -pthread

.PHONY: test-http-parser
test-http-parser: $(HTTPD_TEST_BIN)
	@bash tests/run-gtest.sh $(HTTPD_TEST_BIN)

TEST_SUITES += test-http-parser

# ---- the server ------------------------------------------------------------
#   make httpd             $(BUILD)/parkway-httpd
#   make test-httpd        start it and check it with curl, raw sockets, a
#                          fuzz client (tests/httpd/fuzz.py), descriptor
#                          exhaustion (tests/httpd/exhaust.py) and wrk
#   make test-httpd-asan   the same checks against a server and library built
#                          with -fsanitize=address,undefined (build/asan);
#                          any sanitizer report on the server's stderr fails
HTTPD_SRV_SRCS := $(HTTPD_DIR)/connection.cpp $(HTTPD_DIR)/handlers.cpp $(HTTPD_DIR)/open_file_cache.cpp \
                  $(HTTPD_DIR)/httpd.cpp
HTTPD_SRV_OBJS := $(patsubst $(HTTPD_DIR)/%.cpp,$(BUILD)/tools/httpd/obj/srv/%.o,$(HTTPD_SRV_SRCS))
HTTPD_BIN      := $(BUILD)/parkway-httpd

$(BUILD)/tools/httpd/obj/srv/%.o: $(HTTPD_DIR)/%.cpp $(HTTPD_PART_HDRS) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(HTTPD_CXXFLAGS) -pthread -D_GNU_SOURCE -Iinclude -c $< -o $@

$(HTTPD_BIN): $(HTTPD_SRV_OBJS) $(HTTPD_PART_OBJS) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CXX) $(HTTPD_CXXFLAGS) -o $@ $(HTTPD_SRV_OBJS) $(HTTPD_PART_OBJS) $(LIB_A) -luring -pthread

.PHONY: httpd test-httpd test-httpd-asan
httpd: $(HTTPD_BIN)
test-httpd: $(HTTPD_BIN)
	@bash tests/check-httpd.sh $(HTTPD_BIN)

# The server of test-httpd-asan links test-asan's library (build/asan,
# ASAN_MAKE in tests/tests.mk); only the server's own objects are added.
.PHONY: test-httpd-asan-build
test-httpd-asan-build:
	+@$(ASAN_MAKE) HTTPD_OPT="$(ASAN_OPT)" httpd
test-httpd-asan: test-httpd-asan-build
	@HTTPD_CHECK_SANITIZER=1 bash tests/check-httpd.sh build/asan/parkway-httpd

TEST_SUITES += test-httpd test-httpd-asan
TEST_BUILDS += $(HTTPD_BIN) $(HTTPD_TEST_BIN)
TEST_BUILDS_SAN += test-httpd-asan-build
