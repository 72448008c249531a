# docs/spec/priority_tags.mk -- SPIN checks of the priority-tag
# transactions on the injection queue (priority_tags.pml; the list of
# checks, with what each must show, is in priority_tags_check.sh).
#
#   make spec-priority-tags                  all checks (about 3 minutes of CPU)
#   make spec-priority-tags PT_CHECKS="np-2p1w bug-no-epoch"   some of them

PT_CHECKS ?=

.PHONY: spec-priority-tags
spec-priority-tags:
	@bash docs/spec/priority_tags_check.sh $(PT_CHECKS)

TEST_SUITES += spec-priority-tags
