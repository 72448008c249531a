# tests/doc_snippets.mk -- the C++ examples of README.md and docs/guide.md.
#
#   make test-doc-snippets   build every ```cpp block against include/ and
#                            $(BUILD)/libparkway.a, run those that are programs
#                            (tests/check-doc-snippets.sh says how blocks are marked)

.PHONY: test-doc-snippets
test-doc-snippets: lib
	@CXX="$(CXX)" bash tests/check-doc-snippets.sh $(BUILD)

TEST_SUITES += test-doc-snippets
