/* The functions test-unwind.c takes a real stack in (unwind-frameless.c,
 * built with -fomit-frame-pointer; unwind-framed.c, with
 * -fno-omit-frame-pointer: tests/unit/meson.build), so that gcc and clang
 * both build them with and without a frame pointer. */
#ifndef TALLY_TEST_UNWIND_FRAMES_H
#define TALLY_TEST_UNWIND_FRAMES_H

#include <stdint.h>

/* what leaf_fn saw: its ip, sp and rbp, the return addresses into mid_fn
 * and top_fn, and the stack above its sp */
extern uint64_t cap_ip, cap_sp, cap_bp, ra_leaf, ra_mid;
extern uint8_t cap_stack[1024];

/* no frame pointer: the chain from rbp skips it and its caller */
void leaf_fn(void);
void mid_fn(void);
/* with its frame on the chain; calls mid_fn, which calls leaf_fn */
void top_fn(void);

/* CFI in .debug_frame only, none in .eh_frame (unwind-nounwind.c) */
void nounwind_fn(void);

#endif
