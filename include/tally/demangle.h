/* Function names as people read them: C++ and Rust symbols demangled by
 * libiberty (the GNU demangler binutils and gdb use), and the short form that
 * narrow text columns show (pprof's default: template arguments, parameters and
 * return types dropped). lib/symbols/demangle.c. */
#ifndef TALLY_DEMANGLE_H
#define TALLY_DEMANGLE_H

#include <stdbool.h>

#include "tally/util.h"

/* Whether name looks mangled (Itanium C++ "_Z...", Rust v0 "_R..."): cheap,
 * so that C names never reach the demangler. */
bool tally_is_mangled(const char *name);

/* name demangled with its parameters (C++: "ns::f(int) const"; Rust: the
 * path without its hash), or NULL when it is not a mangled name or the
 * demangler refuses it. The result is the caller's (free). */
char *tally_demangle(const char *name);

/* The short form of a demangled name into out (appended): "std::vector<int,
 * std::allocator<int> >::push_back(int const&)" as "std::vector::push_back".
 * Template arguments, parameter lists, return types, cv-qualifiers and ABI
 * tags go; "(anonymous namespace)", lambdas ("{lambda(int)#1}"), operator
 * names ("operator<<", "operator()") and Rust's "<T as Trait>" paths stay.
 * A name with neither a scope ("::") nor a parameter list at its end (C, the
 * kernel, JIT runtimes' names) or with nothing to drop is appended as it is. */
void tally_name_short(struct strbuf *out, const char *name);

/* Whether want names the function `name` (a demangled name, or a C name):
 * the same text, its short form, or a mangled name that demangles to it. */
bool tally_name_matches(const char *name, const char *want);

#endif
