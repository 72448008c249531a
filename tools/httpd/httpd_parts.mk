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

$(HTTPD_TEST_BIN): $(HTTPD_TEST_OBJ) $(HTTPD_PART_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(HTTPD_CXXFLAGS) -o $@ $^ -lgtest_main -lgtest -pthread

.PHONY: test-http-parser
test-http-parser: $(HTTPD_TEST_BIN)
	@bash tests/run-gtest.sh $(HTTPD_TEST_BIN)

TEST_SUITES += test-http-parser
