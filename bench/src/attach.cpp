// SPDX-License-Identifier: GPL-2.0
// attach: a long-running JIT for recorders that attach late.
//
//   attach --functions N [--batch K] [--seconds S] [--interleave]
//
// Writes N functions of 16 bytes into one mapping (each a short loop with a
// tag of its own), announces them through libperfjit with
// perfjit_load_many() in batches of K (default 1000: one side file per
// batch, as a runtime loading a module), prints
//
//   ready <pid> <first address> <end address>
//
// and then calls every function in turn for S seconds (default 60). Nobody
// records while it loads: what a recorder that attaches later names comes
// from the rundown that libperfjit's thread runs when the kernel tells it
// that a recorder appeared. With --interleave it runs each batch's
// functions as soon as they are loaded, as a runtime runs what it just
// compiled, for a recorder that watches the loads. SIGTERM ends the run as
// a runtime's shutdown does: perfjit_close() has the side files stored.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include <perfjit.h>

namespace
{

constexpr size_t kSize = 16;

volatile std::sig_atomic_t stop = 0;

void on_term(int)
{
	stop = 1;
}

// mov $iterations, %ecx; 1: dec %ecx; jnz 1b; mov $tag, %eax; ret
void emit(uint8_t *p, uint32_t iterations, uint32_t tag)
{
	p[0] = 0xb9;
	memcpy(p + 1, &iterations, 4);
	p[5] = 0xff;
	p[6] = 0xc9;
	p[7] = 0x75;
	p[8] = 0xfc;
	p[9] = 0xb8;
	memcpy(p + 10, &tag, 4);
	p[14] = 0xc3;
	p[15] = 0xcc;
}

int usage()
{
	fprintf(stderr, "usage: attach --functions N [--batch K] [--seconds S] [--interleave]\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	size_t n = 0, batch = 1000;
	double seconds = 60;
	bool interleave = false;

	for (int i = 1; i < argc; i += 2) {
		if (!strcmp(argv[i], "--interleave")) {
			interleave = true;
			i--;
			continue;
		}
		if (i + 1 == argc)
			return usage();
		if (!strcmp(argv[i], "--functions"))
			n = strtoul(argv[i + 1], nullptr, 0);
		else if (!strcmp(argv[i], "--batch"))
			batch = strtoul(argv[i + 1], nullptr, 0);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = strtod(argv[i + 1], nullptr);
		else
			return usage();
	}
	if (!n || !batch)
		return usage();

	const size_t len = n * kSize;
	void *mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("attach: mmap");
		return 1;
	}
	auto *code = static_cast<uint8_t *>(mem);
	for (size_t i = 0; i < n; i++)
		emit(code + i * kSize, 2000, static_cast<uint32_t>(i));
	if (mprotect(mem, len, PROT_READ | PROT_EXEC)) {
		perror("attach: mprotect");
		return 1;
	}

	struct sigaction sa {};
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, nullptr);

	perfjit_options opts{};
	opts.size = sizeof(opts);
	opts.mode = PERFJIT_MODE_CODE_REGION;
	perfjit_session *session = nullptr;
	int err = perfjit_open(&opts, &session);
	if (err) {
		fprintf(stderr, "attach: perfjit_open: %s\n", perfjit_strerror(err));
		return 1;
	}

	unsigned sink = 0;
	std::vector<std::string> names(n);
	std::vector<perfjit_code> codes(n);
	for (size_t i = 0; i < n; i++) {
		names[i] = "bench_fn_" + std::to_string(i);
		codes[i] = perfjit_code{};
		codes[i].size = sizeof(perfjit_code);
		codes[i].name = names[i].c_str();
		codes[i].addr = code + i * kSize;
		codes[i].len = kSize;
	}
	for (size_t b = 0; b < n; b += batch) {
		std::vector<const perfjit_code *> ptrs;

		for (size_t i = b; i < n && i < b + batch; i++)
			ptrs.push_back(&codes[i]);
		err = perfjit_load_many(session, ptrs.data(), ptrs.size());
		if (err) {
			fprintf(stderr, "attach: perfjit_load_many: %s\n", perfjit_strerror(err));
			return 1;
		}
		for (size_t r = 0; interleave && r < 20; r++) {
			for (size_t i = b; i < n && i < b + batch; i++)
				sink += reinterpret_cast<unsigned (*)()>(code + i * kSize)();
		}
	}
	printf("ready %d %p %p\n", getpid(), mem, static_cast<void *>(code + len));
	fflush(stdout);

	const auto end = std::chrono::steady_clock::now() +
			 std::chrono::duration<double>(seconds);
	while (!stop && std::chrono::steady_clock::now() < end) {
		for (size_t i = 0; i < n; i++)
			sink += reinterpret_cast<unsigned (*)()>(code + i * kSize)();
	}
	perfjit_close(session);
	return sink == 1 ? 3 : 0;
}
