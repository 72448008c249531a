# tools/vm/vm.mk -- sched_ext tests against a real kernel in QEMU.
#
#   make vm-test      fetch Debian sid's cloud kernel (cached in
#                     $(PARKWAY_VM_CACHE)), boot it under QEMU TCG with the
#                     tools and test programs, run the 18 cases in two
#                     guests, booted side by side (VM_TESTS=1,3 runs only some)
#
# Prints "N passed, N failed, N skipped"; cases count as skipped (with the
# reason) only when QEMU or the kernel cannot be had.

PARKWAY_VM_CACHE ?= /var/cache/parkway-vm
VM_BUILD := $(BUILD)/vm
VM_CXXFLAGS := $(CXXSTD) -O2 -g -Wall -Wextra -Iinclude -Iuserspace -D_GNU_SOURCE -pthread

TEST_SUITES += vm-test
# The runtime's side of the scheduler, linked whole into the guest's probes.
SCHED_EXT_LINK_SRCS := userspace/sched_ext_link.cpp userspace/env_choice.cpp
.PHONY: vm-test

$(VM_BUILD)/pw_linkprobe: tools/vm/progs/pw_linkprobe.cpp $(SCHED_EXT_LINK_SRCS) userspace/sched_ext_link.hpp userspace/env_choice.hpp bpf/parkway_sched.h
	@mkdir -p $(dir $@)
	$(CXX) $(VM_CXXFLAGS) tools/vm/progs/pw_linkprobe.cpp $(SCHED_EXT_LINK_SRCS) -o $@

$(VM_BUILD)/pw_abuse: tools/vm/progs/pw_abuse.cpp $(SCHED_EXT_LINK_SRCS) userspace/sched_ext_link.hpp userspace/env_choice.hpp bpf/parkway_sched.h
	@mkdir -p $(dir $@)
	$(CXX) $(VM_CXXFLAGS) tools/vm/progs/pw_abuse.cpp $(SCHED_EXT_LINK_SRCS) -o $@

$(VM_BUILD)/pw_seccomp: tools/vm/progs/pw_seccomp.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(VM_CXXFLAGS) $< -o $@

$(VM_BUILD)/pw_vmprog: tools/vm/progs/pw_vmprog.cpp $(LIB_A) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(VM_CXXFLAGS) $< $(LIB_A) -o $@ $(LDLIBS)

# pw_vmprog needs the runtime; if it does not build, the cases using it fail
# (they say why) while the others still run (a failed build leaves no older
# pw_vmprog behind).
vm-test: $(PARKWAY_BIN) $(VM_BUILD)/pw_linkprobe $(VM_BUILD)/pw_abuse $(VM_BUILD)/pw_seccomp
	@$(MAKE) --no-print-directory $(VM_BUILD)/pw_vmprog || { rm -f $(VM_BUILD)/pw_vmprog; \
	  echo "vm-test: pw_vmprog did not build: cases 2 and 3 will fail"; }
	@PARKWAY_VM_CACHE=$(PARKWAY_VM_CACHE) bash tools/vm/run-vm-tests.sh $(BUILD)

TEST_BUILDS += $(VM_BUILD)/pw_linkprobe $(VM_BUILD)/pw_abuse $(VM_BUILD)/pw_seccomp $(VM_BUILD)/pw_vmprog
