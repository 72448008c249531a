# tools/tools.mk -- the `parkway` command (build/parkway).
#
#   make parkway-tool   build/parkway, with the BPF scheduler embedded
#
# C, libbpf's object API (bpf_object__open_mem on the embedded .bpf.o):
# bpftool 7.5 skeletons do not compile against libbpf-dev 1.4.6.
# `make` builds it too when clang-19 and libbpf are installed.

PARKWAY_BIN := $(BUILD)/parkway
CLI_DIR     := tools/parkway_cli
CLI_OBJS    := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(CLI_DIR)/*.c)) $(BUILD)/obj/$(CLI_DIR)/bpf_obj.o
CLI_CFLAGS  := -std=gnu11 -O2 -g -Wall -Wextra -D_GNU_SOURCE $(shell pkg-config --cflags libbpf 2>/dev/null)
CLI_LIBS    := $(shell pkg-config --libs libbpf 2>/dev/null || echo -lbpf)

.PHONY: parkway-tool
parkway-tool: $(PARKWAY_BIN)

ifneq (,$(shell command -v $(BPF_CLANG) 2>/dev/null))
ifneq (,$(wildcard /usr/include/bpf/libbpf.h))
all: $(PARKWAY_BIN)
endif
endif

$(BUILD)/obj/$(CLI_DIR)/%.o: $(CLI_DIR)/%.c $(wildcard $(CLI_DIR)/*.h) bpf/parkway_sched.h
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) -c $< -o $@

$(BUILD)/obj/$(CLI_DIR)/bpf_obj.o: $(CLI_DIR)/bpf_obj.S $(BPF_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -c -DPARKWAY_BPF_OBJ='"$(BPF_OBJ)"' $< -o $@

$(PARKWAY_BIN): $(CLI_OBJS)
	$(CC) -o $@ $^ $(CLI_LIBS)
