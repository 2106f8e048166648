// SPDX-License-Identifier: MIT
/* A dlopen()ed plugin: a template of its own, instantiated twice, and an inline member. */
#include <string_view>

#include <lowkey/lowkey.h>

namespace
{
template <typename T> __attribute__((noinline)) T scaled(T v, T by)
{
	LK_PROBE(cxx_plugin, scaled, v, by);
	return v * by;
}

struct handler {
	std::string_view name;

	__attribute__((noinline)) int handle(int x) const
	{
		LK_SPAN(cxx_plugin, handle);
		LK_PROBE(cxx_plugin, handled, name, x);
		return x + 1;
	}
};
} // namespace

extern "C" int lkt_plugin_run(int i)
{
	handler h{ "plugin" };

	return h.handle(i) + scaled(i, 2) + static_cast<int>(scaled(1.5, 2.0));
}
