# docs/spec/slot.mk -- the SPIN checks of TaskGroup's inline slot
# (model: docs/spec/slot.pml, design note: docs/design/slot.md).
# `make spec-slot` runs every check (about 15 s); the last line of its
# output is "N passed, N failed, N skipped" and it exits non-zero if any
# failed. `make spec-slot SLOT_CHECKS="bug-x-untimed"` runs some of them.

SLOT_CHECKS ?=

.PHONY: spec-slot
spec-slot:
	@bash docs/spec/slot.sh $(SLOT_CHECKS)

TEST_SUITES += spec-slot
