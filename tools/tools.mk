# tools/tools.mk -- the `parkway` command (build/parkway).
#
#   make parkway-tool   build/parkway, with the BPF scheduler embedded
#   make test-cli       its usage messages and exit codes (tests/check-cli.sh)
#
# C, libbpf's object API (bpf_object__open_mem on the embedded .bpf.o):
# bpftool 7.5 skeletons do not compile against libbpf-dev 1.4.6.
# `make` builds it too, and `make install` installs it, when clang-19 and
# libbpf are installed; PARKWAY_TOOL_WHY says what is missing otherwise.

PARKWAY_BIN := $(BUILD)/parkway
CLI_DIR     := tools/parkway_cli
CLI_OBJS    := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(CLI_DIR)/*.c)) $(BUILD)/obj/$(CLI_DIR)/bpf_obj.o
CLI_CFLAGS  := -std=gnu11 -O2 -g -Wall -Wextra -D_GNU_SOURCE $(shell pkg-config --cflags libbpf 2>/dev/null)
CLI_LIBS    := $(shell pkg-config --libs libbpf 2>/dev/null || echo -lbpf)

PARKWAY_TOOL_WHY := $(strip \
  $(if $(shell command -v $(BPF_CLANG) 2>/dev/null),,$(BPF_CLANG) not found;) \
  $(if $(wildcard /usr/include/bpf/libbpf.h),,libbpf headers (/usr/include/bpf/libbpf.h) not found;))
ifeq (,$(PARKWAY_TOOL_WHY))
PARKWAY_TOOL_OK := yes
all: $(PARKWAY_BIN)
install: $(PARKWAY_BIN)
else
PARKWAY_TOOL_OK :=
PARKWAY_TOOL_WHY := $(PARKWAY_TOOL_WHY) make deps installs them
endif

.PHONY: parkway-tool test-cli
parkway-tool: $(PARKWAY_BIN)

$(BUILD)/obj/$(CLI_DIR)/%.o: $(CLI_DIR)/%.c $(wildcard $(CLI_DIR)/*.h) bpf/parkway_sched.h
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) -c $< -o $@

# `parkway --version` prints the library's version.
$(BUILD)/obj/$(CLI_DIR)/main.o: CLI_CFLAGS += -DPARKWAY_VERSION='"$(VERSION)"'
$(BUILD)/obj/$(CLI_DIR)/main.o: Makefile

$(BUILD)/obj/$(CLI_DIR)/bpf_obj.o: $(CLI_DIR)/bpf_obj.S $(BPF_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -c -DPARKWAY_BPF_OBJ='"$(BPF_OBJ)"' $< -o $@

$(PARKWAY_BIN): $(CLI_OBJS)
	$(CC) -o $@ $^ $(CLI_LIBS)

TEST_SUITES += test-cli
ifeq (yes,$(PARKWAY_TOOL_OK))
test-cli: $(PARKWAY_BIN)
	@bash tests/check-cli.sh $(PARKWAY_BIN) $(VERSION)
else
test-cli:
	@echo "SKIP: test-cli: $(PARKWAY_BIN) cannot be built: $(PARKWAY_TOOL_WHY)"
	@echo "0 passed, 0 failed, 1 skipped"
endif
