/*
 * JIT frames in the middle of the stack, where a DWARF unwinder needs CFI for
 * the JIT code to reach the callers above it: rbp is no frame pointer there
 * (it holds the address of a zeroed buffer, as an interpreter's rbp holds a
 * heap pointer), so a frame-pointer guess ends the stack.
 *
 *   driver -> call_via -> [JIT outer] -> mid -> call_via -> [JIT inner] -> spin
 *
 *   jitframes [MS] [MODE [DIR]]
 *     dump DIR  (the default, DIR .) the two JIT functions are a routine of
 *               this file with a frame of its own (pushes rbx and rbp, 48
 *               bytes), each described in DIR/jit-PID.dump with a
 *               JIT_CODE_UNWINDING_INFO record before its JIT_CODE_LOAD: an
 *               .eh_frame and its .eh_frame_hdr as perf's jitdump
 *               specification, V8 and CPython lay them out (just after the
 *               code, at its size rounded up to 8), written unbuffered
 *     tramp     the two are copies of this program's
 *               _Py_trampoline_func_start.._Py_trampoline_func_end (CPython's
 *               perf trampoline), named in /tmp/perf-PID.map as py::outer and
 *               py::inner, as python3.12 -X perf makes them. Built as
 *               jitframes, the template is CPython's own bytes, without CFI as
 *               CPython ships it; built as jitframes_cfi (TEMPLATE_CFI), it is
 *               another routine (push %rbx; call *%rcx; pop %rbx; ret) that
 *               only its CFI (.eh_frame) describes
 *     mapped    the dump's routine, named in /tmp/perf-PID.map only: JIT code
 *               without CFI, where a DWARF unwind must stop (and say why)
 *     nojit     call_via calls mid and spin directly (no JIT code)
 *
 * Prints `pid N`, `info outer 0xADDR inner 0xADDR`, then `truth driver P`:
 * the share of the process's CPU time spent inside driver(). Other
 * architectures: prints `skip: ...`, exits 77.
 */
#include "workload.h"
#include "jitdump-write.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>

#if defined(__x86_64__)

typedef uint64_t (*eval_fn)(uint64_t);

/* call_via(code, fn, arg): calls code with fn in rcx and arg in rdi (CPython's
 * trampoline convention), rbp pointing at a zeroed buffer, not at a frame */
uint64_t call_via(const void *code, eval_fn fn, uint64_t arg);
__asm__(".text\n"
	".globl call_via\n"
	".type call_via, @function\n"
	"call_via:\n"
	".cfi_startproc\n"
	"push %rbp\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbp, -16\n"
	"push %rbx\n"
	".cfi_def_cfa_offset 24\n"
	".cfi_offset %rbx, -24\n"
	"sub $8, %rsp\n"
	".cfi_def_cfa_offset 32\n"
	"mov %rdi, %rax\n"
	"mov %rsi, %rcx\n"
	"mov %rdx, %rdi\n"
	"lea jf_no_frame(%rip), %rbp\n"
	"call *%rax\n"
	"add $8, %rsp\n"
	".cfi_def_cfa_offset 24\n"
	"pop %rbx\n"
	".cfi_def_cfa_offset 16\n"
	"pop %rbp\n"
	".cfi_def_cfa_offset 8\n"
	"ret\n"
	".cfi_endproc\n"
	".size call_via, .-call_via\n"
	".data\n"
	".balign 64\n"
	"jf_no_frame: .zero 64\n"
	".text\n");

/* The template, exported (the program is linked with -rdynamic, as python is) */
#ifdef TEMPLATE_CFI
__asm__(".text\n"
	".globl _Py_trampoline_func_start\n"
	".globl _Py_trampoline_func_end\n"
	"_Py_trampoline_func_start:\n"
	".cfi_startproc\n"
	"push %rbx\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbx, -16\n"
	"call *%rcx\n"
	"pop %rbx\n"
	".cfi_def_cfa_offset 8\n"
	".cfi_restore %rbx\n"
	"ret\n"
	".cfi_endproc\n"
	"_Py_trampoline_func_end:\n");
#else
/* CPython's Python/asm_trampoline.S on x86-64, byte for byte, no CFI */
__asm__(".text\n"
	".globl _Py_trampoline_func_start\n"
	".globl _Py_trampoline_func_end\n"
	"_Py_trampoline_func_start:\n"
	"sub $8, %rsp\n"
	"call *%rcx\n"
	"add $8, %rsp\n"
	"ret\n"
	"_Py_trampoline_func_end:\n");
#endif
extern const unsigned char _Py_trampoline_func_start[], _Py_trampoline_func_end[];

/* The dump's JIT routine: push %rbx; push %rbp; sub $24,%rsp; mov %rcx,%rbp;
 * call *%rcx; add $24,%rsp; pop %rbp; pop %rbx; ret */
static const unsigned char frame_code[] = { 0x53, 0x55, 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0xcd,
					    0xff, 0xd1, 0x48, 0x83, 0xc4, 0x18, 0x5d, 0x5b, 0xc3 };
/* its CFI rows, as DW_CFA instructions: at 1 the CFA is rsp+16 and rbx is
 * saved at CFA-16; at 2 rsp+24, rbp at CFA-24; at 6 rsp+48; at 15 rsp+24; at
 * 16 rsp+16, rbp restored; at 17 rsp+8, rbx restored */
static const unsigned char frame_cfa[] = { 0x41, 0x0e, 0x10, 0x83, 0x02, 0x41, 0x0e, 0x18,
					   0x86, 0x03, 0x44, 0x0e, 0x30, 0x49, 0x0e, 0x18,
					   0x41, 0x0e, 0x10, 0xc6, 0x41, 0x0e, 0x08, 0xc3 };

/* The .eh_frame (a CIE, the routine's FDE, a terminator) and .eh_frame_hdr
 * of code at addr, as they would lie at addr + size rounded up to 8. */
static void unwind_data(struct buf *u, uint64_t addr, size_t size, size_t *hdr_len)
{
	uint64_t eh = addr + ((size + 7) & ~(size_t)7);
	u->n = 0;
	/* CIE: "zR", code 1, data -8, return address column 16, pointers pcrel
	 * sdata4; the CFA is rsp+8, the return address at CFA-8 */
	put32(u, 0);
	put32(u, 0);
	put8(u, 1);
	put(u, "zR", 3);
	put8(u, 1);
	put8(u, 0x78);
	put8(u, 16);
	put8(u, 1);
	put8(u, 0x1b);
	put8(u, 0x0c), put8(u, 7), put8(u, 8);
	put8(u, 0x90), put8(u, 1);
	while (u->n % 4)
		put8(u, 0);
	set32(u, 0, (uint32_t)(u->n - 4));
	size_t fde = u->n;
	put32(u, 0);
	put32(u, (uint32_t)(fde + 4)); /* back to the CIE */
	put32(u, (uint32_t)(int32_t)(addr - (eh + u->n)));
	put32(u, (uint32_t)size);
	put8(u, 0);
	put(u, frame_cfa, sizeof(frame_cfa));
	while (u->n % 4)
		put8(u, 0);
	set32(u, fde, (uint32_t)(u->n - fde - 4));
	put32(u, 0); /* the terminator */
	uint64_t hdr = eh + u->n;
	size_t at = u->n;
	put8(u, 1);
	put8(u, 0x1b); /* eh_frame_ptr: pcrel sdata4 */
	put8(u, 0x03); /* fde_count: udata4 */
	put8(u, 0x3b); /* the table: datarel sdata4 */
	put32(u, (uint32_t)(int32_t)(eh - (hdr + 4)));
	put32(u, 1);
	put32(u, (uint32_t)(int32_t)(addr - hdr));
	put32(u, (uint32_t)(int32_t)(eh + fde - hdr));
	*hdr_len = u->n - at;
}

static void dump_load(int fd, const unsigned char *code, size_t size, const char *name,
		      uint64_t index)
{
	struct buf u, p = { .n = 0 };
	size_t hdr_len;
	unwind_data(&u, (uint64_t)(uintptr_t)code, size, &hdr_len);
	put64(&p, u.n);
	put64(&p, hdr_len);
	put64(&p, (u.n + 15) & ~(size_t)15);
	put(&p, u.b, u.n);
	while (p.n % 8)
		put8(&p, 0);
	record(fd, 4, &p, 0);
	p.n = 0;
	put32(&p, (uint32_t)getpid());
	put32(&p, (uint32_t)getpid());
	put64(&p, (uint64_t)(uintptr_t)code);
	put64(&p, (uint64_t)(uintptr_t)code);
	put64(&p, size);
	put64(&p, index);
	put(&p, name, strlen(name) + 1);
	put(&p, code, size);
	record(fd, 0, &p, 0);
}

static int dump_open(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/jit-%d.dump", dir, (int)getpid());
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	struct buf h = { .n = 0 };
	put32(&h, 0x4A695444u);
	put32(&h, 1);
	put32(&h, 40);
	put32(&h, 62); /* EM_X86_64 */
	put32(&h, 0);
	put32(&h, (uint32_t)getpid());
	put64(&h, now_ns());
	put64(&h, 0);
	wr(fd, &h);
	/* the marker a profiler sees: an executable mapping of the dump */
	if (mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) ==
	    MAP_FAILED) {
		perror("mmap jitdump");
		exit(1);
	}
	return fd;
}

static const void *outer_code, *inner_code;

WL_NOINLINE uint64_t spin(uint64_t n)
{
	uint64_t x = n | 1;
	WL_SPIN(x, n, 3);
	return x;
}

WL_NOINLINE uint64_t mid(uint64_t n)
{
	uint64_t r = inner_code ? call_via(inner_code, spin, n) : spin(n);
	wl_sink += r;
	return r + 1;
}

WL_NOINLINE uint64_t driver(double ms)
{
	double t0 = wl_wall_ms();
	uint64_t r = 0;
	while (wl_wall_ms() - t0 < ms)
		r += outer_code ? call_via(outer_code, mid, WL_UNIT) : mid(WL_UNIT);
	return r;
}

int main(int argc, char **argv)
{
	double ms = wl_arg(argc, argv, 1, 800);
	const char *mode = argc > 2 ? argv[2] : "dump";
	const char *dir = argc > 3 ? argv[3] : ".";
	wl_print_pid();
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *mem =
		mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (!strcmp(mode, "dump") || !strcmp(mode, "mapped")) {
		memcpy(mem, frame_code, sizeof(frame_code));
		memcpy(mem + 256, frame_code, sizeof(frame_code));
	} else if (!strcmp(mode, "tramp")) {
		/* two copies of the template, 16 bytes apart... as CPython's arena has them */
		size_t len = (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
		memcpy(mem, _Py_trampoline_func_start, len);
		memcpy(mem + ((len + 15) & ~(size_t)15), _Py_trampoline_func_start, len);
	} else if (strcmp(mode, "nojit")) {
		fprintf(stderr, "jitframes: unknown mode '%s' (dump, tramp, mapped or nojit)\n",
			mode);
		return 2;
	}
	if (mprotect(mem, page, PROT_READ | PROT_EXEC) != 0) {
		perror("mprotect");
		return 1;
	}
	if (!strcmp(mode, "dump")) {
		int fd = dump_open(dir);
		dump_load(fd, mem, sizeof(frame_code), "jf_outer", 1);
		dump_load(fd, mem + 256, sizeof(frame_code), "jf_inner", 2);
		outer_code = mem;
		inner_code = mem + 256;
	} else if (strcmp(mode, "nojit")) {
		/* tramp: the copies as python3.12 -X perf names them; mapped: the routine */
		bool tramp = !strcmp(mode, "tramp");
		size_t len = tramp ? (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start)
				   : sizeof(frame_code);
		outer_code = mem;
		inner_code = mem + (tramp ? ((len + 15) & ~(size_t)15) : 256);
		char mp[64];
		snprintf(mp, sizeof(mp), "/tmp/perf-%d.map", (int)getpid());
		FILE *f = fopen(mp, "w");
		if (!f) {
			perror(mp);
			return 1;
		}
		fprintf(f, "%lx %zx %s\n%lx %zx %s\n", (unsigned long)(uintptr_t)outer_code, len,
			tramp ? "py::outer:jitframes.py" : "jit_outer",
			(unsigned long)(uintptr_t)inner_code, len,
			tramp ? "py::inner:jitframes.py" : "jit_inner");
		fclose(f);
	}
	printf("info outer %p inner %p\n", outer_code, inner_code);
	fflush(stdout);
	double c0 = wl_process_ms();
	driver(ms);
	double c1 = wl_process_ms();
	wl_truth("driver", c1 - c0, c1);
	return 0;
}

#else
int main(void)
{
	printf("skip: jitframes is x86-64 code\n");
	return 77;
}
#endif
