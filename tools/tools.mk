# tools/tools.mk -- the `parkway` command (build/parkway).
#
#   make parkway-tool   build/parkway
#   make test-cli       its usage messages and exit codes (tests/check-cli.sh), and
#                       sched load's verifier-log tail and signals (tests/check_cli_load.c)
#
# `parkway trace` (tools/trace/, C++) needs nothing beyond the compiler:
# the command is always built, and `make install` always installs it.
# `parkway sched` (C, libbpf's object API: bpf_object__open_mem on the
# embedded .bpf.o; bpftool 7.5 skeletons do not compile against libbpf-dev
# 1.4.6) is built in when clang-19 and libbpf are installed; without them
# sched_absent.c answers its subcommands with what is missing
# (PARKWAY_SCHED_WHY).

PARKWAY_BIN := $(BUILD)/parkway
CLI_DIR     := tools/parkway_cli
TRACE_DIR   := tools/trace
CLI_CFLAGS  := -std=gnu11 -O2 -g -Wall -Wextra -D_GNU_SOURCE $(shell pkg-config --cflags libbpf 2>/dev/null)
CLI_LIBS    := $(shell pkg-config --libs libbpf 2>/dev/null || echo -lbpf)
TRACE_CXXFLAGS := -std=c++20 -O2 -g -Wall -Wextra -D_GNU_SOURCE -Iuserspace -I$(TRACE_DIR)
TRACE_OBJS  := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard $(TRACE_DIR)/*.cpp))

PARKWAY_SCHED_WHY := $(strip \
  $(if $(shell command -v $(BPF_CLANG) 2>/dev/null),,$(BPF_CLANG) not found;) \
  $(if $(wildcard /usr/include/bpf/libbpf.h),,libbpf headers (/usr/include/bpf/libbpf.h) not found;))
ifeq (,$(PARKWAY_SCHED_WHY))
CLI_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out $(CLI_DIR)/sched_absent.c,$(wildcard $(CLI_DIR)/*.c))) \
  $(BUILD)/obj/$(CLI_DIR)/bpf_obj.o
else
CLI_OBJS := $(BUILD)/obj/$(CLI_DIR)/main.o $(BUILD)/obj/$(CLI_DIR)/sched_absent.o
CLI_LIBS :=
PARKWAY_SCHED_WHY := $(PARKWAY_SCHED_WHY) make deps installs them
endif
# Read by the top-level Makefile's install.
PARKWAY_TOOL_OK := yes
all: $(PARKWAY_BIN)
install: $(PARKWAY_BIN)

.PHONY: parkway-tool test-cli
parkway-tool: $(PARKWAY_BIN)

$(BUILD)/obj/$(CLI_DIR)/%.o: $(CLI_DIR)/%.c $(wildcard $(CLI_DIR)/*.h) $(TRACE_DIR)/trace_cli.h bpf/parkway_sched.h
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) -c $< -o $@

$(BUILD)/obj/$(TRACE_DIR)/%.o: $(TRACE_DIR)/%.cpp $(wildcard $(TRACE_DIR)/*.hpp $(TRACE_DIR)/*.h) userspace/trace/format.hpp bpf/parkway_sched.h
	@mkdir -p $(dir $@)
	$(CXX) $(TRACE_CXXFLAGS) -c $< -o $@

# `parkway --version` prints the library's version.
$(BUILD)/obj/$(CLI_DIR)/main.o: CLI_CFLAGS += -DPARKWAY_VERSION='"$(VERSION)"'
$(BUILD)/obj/$(CLI_DIR)/main.o: Makefile

$(BUILD)/obj/$(CLI_DIR)/bpf_obj.o: $(CLI_DIR)/bpf_obj.S $(BPF_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -c -DPARKWAY_BPF_OBJ='"$(BPF_OBJ)"' $< -o $@

$(PARKWAY_BIN): $(CLI_OBJS) $(TRACE_OBJS)
	$(CXX) -o $@ $^ $(CLI_LIBS)

# The command as it is built without clang-19 or libbpf (sched_absent.c),
# linked from the same objects: test-cli checks it too.
PARKWAY_NOSCHED_BIN := $(BUILD)/parkway-nosched
$(PARKWAY_NOSCHED_BIN): $(BUILD)/obj/$(CLI_DIR)/main.o $(BUILD)/obj/$(CLI_DIR)/sched_absent.o $(TRACE_OBJS)
	$(CXX) -o $@ $^

# `parkway sched load`'s ways out that need no root or sched_ext (the
# verifier log's tail, the signals that unload): its static functions,
# through tests/check_cli_load.c. Only where the scheduler is built in.
ifeq (,$(PARKWAY_SCHED_WHY))
CLI_LOAD_CHECK := $(BUILD)/tests/check_cli_load
$(CLI_LOAD_CHECK): tests/check_cli_load.c $(CLI_DIR)/sched_load.c $(wildcard $(CLI_DIR)/*.h) bpf/parkway_sched.h \
		$(BUILD)/obj/$(CLI_DIR)/sched_common.o $(BUILD)/obj/$(CLI_DIR)/sched_pins.o
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) -o $@ $(filter tests/%.c %.o,$^) $(CLI_LIBS)
endif

TEST_SUITES += test-cli
test-cli: $(PARKWAY_BIN) $(PARKWAY_NOSCHED_BIN) $(CLI_LOAD_CHECK)
	@log=$$(mktemp); rc=0; \
	bash tests/check-cli.sh $(PARKWAY_BIN) $(VERSION) >$$log 2>&1 || rc=1; \
	bash tests/check-cli.sh $(PARKWAY_NOSCHED_BIN) $(VERSION) --no-sched >>$$log 2>&1 || rc=1; \
	$(if $(CLI_LOAD_CHECK),$(CLI_LOAD_CHECK) >>$$log 2>&1 || rc=1;) \
	grep -vE '^[0-9]+ passed, [0-9]+ failed' $$log; \
	awk '/^[0-9]+ passed, [0-9]+ failed/ {p+=$$1; f+=$$3; s+=$$5} END {printf "%d passed, %d failed, %d skipped\n", p, f, s}' $$log; \
	rm -f $$log; exit $$rc
