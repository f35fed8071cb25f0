/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the PEBS writer: the input is the guest's memory
 * (page tables, DS area, buffer contents), its paging registers and its
 * PMU MSR state; counters then overflow into PEBS assists. Guest RAM sits
 * between PROT_NONE guard pages, so any write outside it crashes.
 *
 * Input: [model][flags][cr3 page][ds page][buffer page][n msr writes]
 *        then n x [msr index: 1][value: 8], then the RAM image.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vpmu/vpmu.h"
#include "fuzz.h"

#define RAM_SIZE (1u << 20)
#define PAGE	 4096u

static uint8_t *ram;
static struct vpmu_guest_regs regs;

static int get_regs(void *d, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *ret)
{
	*ret = regs;
	return 0;
}

static void setup_ram(void)
{
	uint8_t *block = mmap(NULL, RAM_SIZE + 2 * PAGE, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (block == MAP_FAILED)
		abort();
	mprotect(block, PAGE, PROT_NONE);
	mprotect(block + PAGE + RAM_SIZE, PAGE, PROT_NONE);
	ram = block + PAGE;
}

/* The PEBS-related MSRs an input can write (index taken modulo). */
static const uint32_t msrs[] = {
	0x600, 0x3f1, 0x3f2, 0x3f4,  0x3f5,  0x186,  0x187, 0x4c1, 0x4c2, 0x309,
	0x38d, 0x38f, 0x1d9, 0x1903, 0x1907, 0x1983, 0x390, 0x391, 0x1c9, 0x1c8,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vpmu_config cfg;
	struct vpmu_mem_region r;
	struct vpmu_vcpu *v;
	unsigned int n;

	if (!ram)
		setup_ram();
	if (size < 6)
		return 0;
	vpmu_config_init(&cfg);
	cfg.model = vpmu_model_name(data[0] % vpmu_model_count());
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.regs = get_regs;
	if (vpmu_vcpu_new(&cfg, &v) < 0)
		return 0;
	r = (struct vpmu_mem_region){ .gpa = 0, .size = RAM_SIZE, .hva = ram };
	if (vpmu_vcpu_set_memory(v, &r, 1) < 0)
		abort();

	memset(&regs, 0, sizeof(regs));
	regs.cr0 = (1u << 31) | (data[1] & 1 ? 1u << 16 : 0) | 1;
	regs.cr4 = (data[1] & 2 ? 1u << 5 : 0) | (data[1] & 4 ? 1u << 12 : 0) |
		   (data[1] & 8 ? 1u << 21 : 0) | (data[1] & 16 ? 1u << 4 : 0);
	regs.efer = data[1] & 32 ? (1u << 8) | (1u << 10) : 0;
	regs.efer |= data[1] & 64 ? 1u << 11 : 0;
	regs.cr3 = (uint64_t) data[2] * PAGE;
	regs.long_mode = data[1] & 32;
	regs.sse = data[1] & 128;
	regs.rip = 0x1000;
	n = data[5] % 24;
	data += 6;
	size -= 6;
	for (unsigned int i = 0; i < n && size >= 9; i++, data += 9, size -= 9) {
		uint64_t val;

		memcpy(&val, data + 1, 8);
		vpmu_msr_write(v, msrs[data[0] % (sizeof(msrs) / sizeof(msrs[0]))], val);
	}
	memset(ram, 0, RAM_SIZE);
	memcpy(ram, data, size < RAM_SIZE ? size : RAM_SIZE);
	/* counters on, near their overflow */
	vpmu_msr_write(v, 0x38f, 0xffULL | (0xfULL << 32));
	vpmu_vcpu_sync(v);
	for (unsigned int k = 0; k < 4; k++) {
		struct vpmu_exact_counts c = {
			.instructions = 1ULL << (4 * k),
			.cycles = 1ULL << (4 * k),
			.last_ip = 0x1000 + k,
			.last_dla = 0x2000,
			.cpl = k & 3,
		};

		vpmu_exact_feed(v, &c);
		vpmu_vcpu_sync(v);
	}
	vpmu_vcpu_free(v);
	return 0;
}
