// SPDX-License-Identifier: MIT
/*
 * The files libdwfl reads for `lowkey watch` and `lowkey locks`, opened so that no other user can
 * kill lowkey by cutting them (dwfl_files.h).
 */
#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dwfl_files.h"
#include "probe_elf.h"

Elf *lk_dwfl_open_elf(const char *path, int *fd)
{
	Elf *elf;

	elf_version(EV_CURRENT);
	*fd = open_regular_file(path, NULL, 0);
	if (*fd < 0)
		return NULL;
	elf = elf_begin(*fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF)
		return elf;
	elf_end(elf);
	close(*fd);
	*fd = -1;
	return NULL;
}

static bool trusted_inode(const char *path, uid_t me)
{
	struct stat st;

	return stat(path, &st) == 0 && (st.st_uid == 0 || st.st_uid == me) &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

bool lk_dwfl_trusted(const char *path)
{
	char *real = realpath(path, NULL);
	bool ok = real && strcmp(real, path) == 0 && trusted_inode("/", geteuid());

	for (size_t i = 1; ok && real[i - 1]; i++) {
		char c = real[i];

		if (c != '/' && c)
			continue;
		real[i] = 0;
		ok = trusted_inode(real, geteuid());
		real[i] = c;
	}
	free(real);
	return ok;
}

/* /proc/PID/map_files/START-END for the mapping that starts at base, into buf; false if none. */
static bool mapped_file(pid_t pid, Dwarf_Addr base, char *buf, size_t len)
{
	char dir[64], prefix[32];
	struct dirent *e;
	bool found = false;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/map_files", (int)pid);
	snprintf(prefix, sizeof(prefix), "%lx-", (unsigned long)base);
	d = opendir(dir);
	while (d && !found && (e = readdir(d)))
		found = strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
			snprintf(buf, len, "%s/%s", dir, e->d_name) < (int)len;
	if (d)
		closedir(d);
	return found;
}

static bool deleted(const char *name)
{
	static const char mark[] = " (deleted)";
	size_t len = strlen(name);

	return len >= sizeof(mark) - 1 && strcmp(name + len - (sizeof(mark) - 1), mark) == 0;
}

int lk_dwfl_proc_find_elf(pid_t pid, Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
			  char **file_name, Elf **elfp)
{
	char path[PATH_MAX + 64];
	int fd = -1;

	if (name[0] != '/')
		return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
	/* map_files may be listed where its links cannot be followed (not root): then by name */
	*elfp = mapped_file(pid, base, path, sizeof(path)) ? lk_dwfl_open_elf(path, &fd) : NULL;
	/* not a deleted file's name: whatever another user may have put there since */
	if (!*elfp && !deleted(name))
		*elfp = lk_dwfl_open_elf(name, &fd);
	if (!*elfp)
		return -1;
	*file_name = strdup(name);	/* where its debug files are looked for */
	return fd;
}

int lk_dwfl_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			   const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			   char **debuginfo_file_name)
{
	int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
					      debuglink_crc, debuginfo_file_name);

	if (fd >= 0 || !file_name || !lk_dwfl_trusted(file_name))
		return fd;
	return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
					    debuglink_crc, debuginfo_file_name);
}
