# docs/spec/park_fence.mk -- the SPIN checks of parking's asymmetric [N1]
# barrier under x86-TSO and of the rule that skips its heavy side when
# every other worker is idle (model: docs/spec/park_fence.pml, design
# note: docs/design/parking.md). `make spec-park-fence` runs every check
# (a few seconds); the last line of its output is "N passed, N failed, N
# skipped" and it exits non-zero if any failed.
.PHONY: spec-park-fence
spec-park-fence:
	@bash docs/spec/park_fence.sh

TEST_SUITES += spec-park-fence
