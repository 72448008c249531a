# bpf/bpf.mk -- the sched_ext scheduler (scx_parkway.bpf.c -> .bpf.o).
#
#   make bpf         compile build/bpf/scx_parkway.bpf.o with clang-19
#   make vmlinux-h   regenerate bpf/vmlinux.h from Debian sid's cloud kernel
#
# bpf/vmlinux.h (x86_64) is committed: the host kernel has no sched_ext, so
# its BTF lacks the types; tools/gen-vmlinux-h.sh rebuilds it from a kernel
# that has them.

BPF_CLANG  ?= clang-19
BPF_OBJ    := $(BUILD)/bpf/scx_parkway.bpf.o
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -Ibpf \
              -Wall -Wno-missing-declarations -Wno-unused-function

.PHONY: bpf vmlinux-h
bpf: $(BPF_OBJ)

$(BPF_OBJ): bpf/scx_parkway.bpf.c bpf/parkway_sched.h bpf/parkway_compat.bpf.h bpf/vmlinux.h
	@mkdir -p $(dir $@)
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@

vmlinux-h:
	bash tools/gen-vmlinux-h.sh
