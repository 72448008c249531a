# docs/spec/parking.mk -- the SPIN checks of the parking protocol
# (model: docs/spec/parking.pml, design note: docs/design/parking.md).
# `make spec-parking` runs every check; the last line of its output is
# "N passed, N failed, N skipped" and it exits non-zero if any failed.
.PHONY: spec-parking
spec-parking:
	@bash docs/spec/parking.sh

TEST_SUITES += spec-parking
