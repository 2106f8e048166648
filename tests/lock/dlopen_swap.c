// SPDX-License-Identifier: MIT
/*
 * dlopen_swap LINK TARGET: load the library LINK (a symbolic link), then point LINK at TARGET, so
 * that the library is named LINK in the process and LINK is TARGET when `lowkey locks` reads it.
 * Exits 0, or 1 if the library cannot be loaded or the link changed.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char tmp[4096];

	if (argc != 3 || !dlopen(argv[1], RTLD_NOW)) {
		fprintf(stderr, "dlopen_swap: %s\n",
			argc == 3 ? dlerror() : "usage: dlopen_swap LINK TARGET");
		return 1;
	}
	snprintf(tmp, sizeof(tmp), "%s.new", argv[1]);
	unlink(tmp);
	if (symlink(argv[2], tmp) != 0 || rename(tmp, argv[1]) != 0) {
		perror("dlopen_swap");
		return 1;
	}
	return 0;
}
