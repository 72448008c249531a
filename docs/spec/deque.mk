# docs/spec/deque.mk -- the SPIN checks of the work-stealing deque's gate
# protocol under x86-TSO (model: docs/spec/deque.pml, code:
# userspace/deque.hpp). `make spec-deque` runs every check (about 17 s);
# the last line of its output is "N passed, N failed, N skipped" and it
# exits non-zero if any failed. `make spec-deque DEQUE_CHECKS="abl-no-membarrier"`
# runs some of them.

DEQUE_CHECKS ?=

.PHONY: spec-deque
spec-deque:
	@bash docs/spec/deque.sh $(DEQUE_CHECKS)

TEST_SUITES += spec-deque
