// trace_tool_main.cpp -- `parkway trace` on its own (argv[1]: report,
// export or record), for the reader built with AddressSanitizer and UBSan
// (test-trace-san).
#include "trace_cli.h"

int main(int argc, char** argv) { return parkway_trace_main(argc, argv); }
