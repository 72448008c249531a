# docs/spec/io_park.mk -- the SPIN checks of a worker parked inside its
# io_uring ring (model: docs/spec/io_park.pml, design note:
# docs/design/io.md). `make spec-io-park` runs every check; the last line
# of its output is "N passed, N failed, N skipped" and it exits non-zero
# if any failed. `make spec-io-park IO_PARK_CHECKS="abl-no-rearm"` runs
# some of them.

IO_PARK_CHECKS ?=

.PHONY: spec-io-park
spec-io-park:
	@bash docs/spec/io_park.sh $(IO_PARK_CHECKS)

TEST_SUITES += spec-io-park
