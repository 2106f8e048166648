// SPDX-License-Identifier: MIT
/* Source lines for `lowkey watch` and `lowkey locks` (dwfl_lines.h). */
#include "dwfl_lines.h"

/*
 * The source line of addr, for objects without .debug_aranges: libdwfl (elfutils 0.188, Debian
 * 12's) finds an address's compile unit through that table only, and Clang does not emit it (GCC
 * does), so dwfl_module_getsrc() finds no line in code Clang built. The units' own address ranges
 * say it too.
 */
static const char *line_from_units(Dwfl_Module *mod, uint64_t addr, int *lineno)
{
	Dwarf_Addr bias;

	for (Dwarf_Die *cu = NULL; (cu = dwfl_module_nextcu(mod, cu, &bias));) {
		Dwarf_Line *line;

		if (dwarf_haspc(cu, addr - bias) != 1)
			continue;
		line = dwarf_getsrc_die(cu, addr - bias);
		if (!line || dwarf_lineno(line, lineno) != 0)
			return NULL;
		return dwarf_linesrc(line, NULL, NULL);
	}
	return NULL;
}

const char *lk_dwfl_source_line(Dwfl_Module *mod, uint64_t addr, int *line)
{
	Dwfl_Line *l = dwfl_module_getsrc(mod, addr);
	const char *file = l ? dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL) : NULL;

	return file ? file : line_from_units(mod, addr, line);
}
