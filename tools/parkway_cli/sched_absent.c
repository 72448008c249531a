/* sched_absent.c -- `parkway sched` in a build without the BPF scheduler
 * (clang-19 or libbpf were missing; tools/tools.mk): the arguments are
 * still checked by main.c, then each subcommand says what is missing. */
#include <stdio.h>

#include "sched_cli.h"
#include "sched_common.h"

static int absent(const char *what)
{
	fprintf(stderr, "parkway sched %s: this parkway was built without the sched_ext scheduler "
			"(clang-19 and libbpf were missing at build time; `make deps`, then build again)\n", what);
	return EXIT_ENV;
}

int sched_load(const struct load_opts *o)
{
	(void)o;
	return absent("load");
}

int sched_status(void)
{
	return absent("status");
}

int sched_unload(void)
{
	return absent("unload");
}
