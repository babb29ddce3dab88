/*
 * fifoimage LIB DIR [MS [stay]]: copies the shared library LIB to DIR/lib.so,
 * loads it, then puts a FIFO where that file was (the mapping stays), prints
 * `ready`, and spends about MS milliseconds (default 300) of CPU time in the
 * library's lib_work; then prints `done`, and with `stay` waits for a signal.  A profiler that
 * opens the image by its path when the first sample lands in it meets a FIFO: opened without
 * O_NONBLOCK it waits forever for a writer.
 */
#define _GNU_SOURCE
#include "workload.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fifoimage LIB DIR [MS]\n");
		return 2;
	}
	double ms = wl_arg(argc, argv, 3, 300);
	char path[4096];
	snprintf(path, sizeof(path), "%s/lib.so", argv[2]);
	FILE *in = fopen(argv[1], "rb"), *out = fopen(path, "wb");
	if (!in || !out) {
		perror("fifoimage: copy");
		return 1;
	}
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, n, out);
	fclose(in);
	if (fclose(out) != 0) {
		perror(path);
		return 1;
	}
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "fifoimage: %s\n", dlerror());
		return 1;
	}
	uint64_t (*work)(uint64_t) = (uint64_t (*)(uint64_t))dlsym(h, "lib_work");
	if (!work || unlink(path) < 0 || mkfifo(path, 0644) < 0) {
		perror("fifoimage: the FIFO");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	double t0 = wl_thread_ms();
	while (wl_thread_ms() - t0 < ms)
		wl_sink += work(1);
	printf("done\n");
	fflush(stdout);
	if (argc > 4 && !strcmp(argv[4], "stay"))
		pause();
	return 0;
}
