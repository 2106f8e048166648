// SPDX-License-Identifier: MIT
#include "sites.hpp"

int tu_b_run(int i)
{
	widget w;

	return twice(i) + static_cast<int>(twice(static_cast<long>(i))) + out_of_line(i) +
	       inlined(i) + keyed(static_cast<long>(i)) + keyed(i) +
	       w.member(std::string("tu_b"), color::green, false) +
	       widget::static_member("b", delta::down) + with_lambda(i) + risky(false);
}
