/* leaf_fn and mid_fn of unwind-frames.h: built with -fomit-frame-pointer
 * (tests/unit/meson.build), whatever the compiler. */
#include "unwind-frames.h"

#include <stddef.h>

uint64_t cap_ip, cap_sp, cap_bp, ra_leaf, ra_mid;
uint8_t cap_stack[1024];

/* copies the live stack above sp (not an object: ASan must not check it) */
__attribute__((noinline, no_sanitize_address)) static void copy_stack(uint64_t sp)
{
	const volatile uint8_t *s = (const volatile uint8_t *)(uintptr_t)sp;
	for (size_t i = 0; i < sizeof(cap_stack); i++)
		cap_stack[i] = s[i];
}

__attribute__((noinline, used)) void leaf_fn(void)
{
	uint64_t ip, sp, bp;
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	cap_ip = ip;
	cap_sp = sp;
	cap_bp = bp;
	ra_leaf = (uint64_t)(uintptr_t)__builtin_return_address(0);
	copy_stack(sp);
}

__attribute__((noinline, used)) void mid_fn(void)
{
	volatile char pad[40]; /* a frame of its own size */
	pad[0] = 1;
	leaf_fn();
	ra_mid = (uint64_t)(uintptr_t)__builtin_return_address(0);
	pad[1] = pad[0];
}
