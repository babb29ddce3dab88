/* Demangling (libiberty) and the short names of narrow text columns. */
#define _GNU_SOURCE
#include "unit.h"

#include "tally/demangle.h"

static void check_demangle(const char *mangled, const char *want)
{
	char *d = tally_demangle(mangled);
	if (!want) {
		if (d)
			fail_msg("'%s' demangled to '%s', expected nothing", mangled, d);
		return;
	}
	if (!d || strcmp(d, want))
		fail_msg("'%s' demangled to '%s', expected '%s'", mangled, d ? d : "(null)", want);
	free(d);
}

static void test_demangle__cxx_rust(void **state)
{
	(void)state;
	check_demangle("_ZN4ns_a4GridIiE5sweepEi", "ns_a::Grid<int>::sweep(int)");
	check_demangle("_Znwm", "operator new(unsigned long)");
	check_demangle("_ZN2v84base7ieee7543sinEd", "v8::base::ieee754::sin(double)");
	/* Rust, legacy (the hash dropped) and v0 */
	check_demangle("_ZN4core3ptr13drop_in_place17h1234567890abcdefE",
		       "core::ptr::drop_in_place");
	check_demangle("_RNvCs1234_7mycrate3foo", "mycrate::foo");
	/* C names and garbage are left alone */
	check_demangle("main", NULL);
	check_demangle("_Z", NULL);
	check_demangle("_Zgarbage!", NULL);
	assert_false(tally_is_mangled("hot_loop"));
	assert_false(tally_is_mangled(NULL));
}

static void check_short(const char *name, const char *want)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addstr(&sb, "x|"); /* appended, never replaced */
	tally_name_short(&sb, name);
	if (strncmp(sb.buf, "x|", 2) || strcmp(sb.buf + 2, want))
		fail_msg("short form of '%s' is '%s', expected 'x|%s'", name, sb.buf, want);
	strbuf_release(&sb);
}

static void test_demangle__short(void **state)
{
	(void)state;
	check_short("ns_a::Grid<int>::sweep(int)", "ns_a::Grid::sweep");
	check_short(
		"void std::__introsort_loop<__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, "
		"long, __gnu_cxx::__ops::_Iter_less_iter>(__gnu_cxx::__normal_iterator<int*, std::vector<int, "
		"std::allocator<int> > >, __gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, "
		"long, __gnu_cxx::__ops::_Iter_less_iter)",
		"std::__introsort_loop");
	check_short("std::vector<int, std::allocator<int> >::size() const", "std::vector::size");
	check_short("operator new(unsigned long)", "operator new");
	check_short("void sort<int>(int*)", "sort");
	check_short("std::allocator<int>::operator new(unsigned long)",
		    "std::allocator::operator new");
	check_short("std::ostream::operator<<(int)", "std::ostream::operator<<");
	check_short("bool operator< <int>(Foo<int> const&, Foo<int> const&)", "operator<");
	check_short("main::{lambda(int)#1}::operator()(int) const",
		    "main::{lambda(int)#1}::operator()");
	check_short("(anonymous namespace)::helper(char const*)", "(anonymous namespace)::helper");
	check_short("std::__cxx11::basic_string<char>::_M_create[abi:cxx11](unsigned long&)",
		    "std::__cxx11::basic_string::_M_create");
	check_short("<alloc::vec::Vec<u8> as core::ops::drop::Drop>::drop",
		    "<alloc::vec::Vec<u8> as core::ops::drop::Drop>::drop");
	check_short("core::ptr::drop_in_place<alloc::string::String>", "core::ptr::drop_in_place");
	/* C names, kernel names and JIT names pass unchanged */
	check_short("hot_loop", "hot_loop");
	check_short("ext4_file_write_iter [ext4]", "ext4_file_write_iter [ext4]");
	check_short("[unknown]", "[unknown]");
	check_short("JS:*<anonymous> /tmp/app.js:1:13", "JS:*<anonymous> /tmp/app.js:1:13");
	check_short("py::<module>:/tmp/x.py", "py::<module>:/tmp/x.py");
	check_short("ns::foo(int) [clone .constprop.0]", "ns::foo [clone .constprop.0]");
	check_short("", "");
}

static void test_demangle__matches(void **state)
{
	(void)state;
	assert_true(tally_name_matches("ns_b::churn(double)", "ns_b::churn(double)"));
	assert_true(tally_name_matches("ns_b::churn(double)", "ns_b::churn"));
	assert_true(tally_name_matches("ns_b::churn(double)", "_ZN4ns_b5churnEd"));
	assert_false(tally_name_matches("ns_b::churn(double)", "churn"));
	assert_false(tally_name_matches("ns_b::churn(double)", "_ZN4ns_b5churnEi"));
	assert_true(tally_name_matches("hot_loop", "hot_loop"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_demangle__cxx_rust),
		cmocka_unit_test(test_demangle__short),
		cmocka_unit_test(test_demangle__matches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
