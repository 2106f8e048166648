// SPDX-License-Identifier: MIT
/*
 * lowkey from C++: probes in a function template and an inline member function, a key tested in a
 * template, a span that an exception leaves, std::string_view and enum class arguments, and a
 * lowkey::mutex under std::lock_guard. Traces itself when given a path; otherwise its probes cost
 * a NOP each and `lowkey trace -- ./cxx` traces it from outside.
 *
 *   c++ -std=c++17 cxx.cpp $(pkg-config --cflags --libs lowkey) -o cxx     (g++ or clang++)
 *   ./cxx orders.ctf && lowkey report orders.ctf && lowkey list ./cxx
 */
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <lowkey/lock.hpp>
#include <lowkey/lowkey.h>

LK_DEFINE_KEY_FALSE(audit); /* off: one NOP per test of it */

enum class side : char { buy = 'B', sell = 'S' };

template <typename Price> struct book {
	std::vector<Price> levels;
	lowkey::mutex lock{ "book" }; /* contention counted, listed by name */

	void add(side s, Price price, std::string_view venue)
	{
		LK_SPAN(orders, add);
		std::lock_guard<lowkey::mutex> hold(lock);

		LK_PROBE(orders, order, s, price, venue); /* a site per instantiation */
		if (lk_branch_unlikely(&audit))
			std::printf("audit: %c %s\n", static_cast<char>(s),
				    std::string(venue).c_str());
		levels.push_back(price);
	}

	Price best() const
	{
		LK_SPAN(orders, best);
		if (levels.empty())
			throw std::runtime_error("empty book"); /* the span still ends */
		Price b = levels.front();
		for (Price p : levels)
			b = p < b ? p : b;
		return b;
	}
};

int main(int argc, char **argv)
{
	book<long> ticks;
	book<double> prices;

	if (argc > 1) {
		struct lk_trace_config c = {};

		c.path = argv[1];
		lk_probe_enable("orders");
		if (lk_trace_start(&c) != 0) {
			std::fprintf(stderr, "cannot trace to %s: %s\n", argv[1], lk_last_error());
			return 1;
		}
	}
	try {
		book<int>().best();
	} catch (const std::runtime_error &e) {
		std::printf("caught: %s\n", e.what());
	}
	for (int i = 0; i < 1000; i++) {
		ticks.add(i % 2 ? side::buy : side::sell, 100 + i % 7, "XNAS");
		prices.add(side::buy, 99.5 + i % 3, std::string("XLON"));
	}
	lk_key_enable(&audit); /* rewrites the key's sites in both instantiations */
	ticks.add(side::sell, 42, "XPAR");
	lk_key_disable(&audit);
	std::printf("best: %ld and %.1f\n", ticks.best(), prices.best());
	if (argc > 1 && lk_trace_stop() != 0) {
		std::fprintf(stderr, "tracing failed: %s\n", lk_last_error());
		return 1;
	}
	return 0;
}
