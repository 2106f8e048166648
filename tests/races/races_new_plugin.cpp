// SPDX-License-Identifier: MIT
/*
 * C++'s operator new and delete in each of their forms, for test_races_heap, a C program that
 * dlopen()s this library RTLD_LOCAL, as an interpreter opens its C++ extensions: the C++ library
 * it brings is out of reach of dlsym(RTLD_NEXT) in liblowkey-races-heap.so, which finds the next
 * operator new through the object of its caller, here.
 */
#include <cstddef>
#include <new>

extern "C" {

/* Each form of operator new by number: plain, nothrow, aligned, aligned nothrow; odd: new[]. */
__attribute__((visibility("default"), noinline)) void *races_plugin_new(int form, std::size_t size,
									std::size_t align)
{
	std::align_val_t al = static_cast<std::align_val_t>(align);

	switch (form) {
	case 0:
		return ::operator new(size);
	case 1:
		return ::operator new[](size);
	case 2:
		return ::operator new(size, std::nothrow);
	case 3:
		return ::operator new[](size, std::nothrow);
	case 4:
		return ::operator new(size, al);
	case 5:
		return ::operator new[](size, al);
	case 6:
		return ::operator new(size, al, std::nothrow);
	case 7:
		return ::operator new[](size, al, std::nothrow);
	}
	return nullptr;
}

/* The operator delete of that form. */
__attribute__((visibility("default"))) void races_plugin_delete(int form, void *p,
								std::size_t align)
{
	std::align_val_t al = static_cast<std::align_val_t>(align);

	if (form < 4)
		(form % 2 ? ::operator delete[](p) : ::operator delete(p));
	else
		(form % 2 ? ::operator delete[](p, al) : ::operator delete(p, al));
}
}
