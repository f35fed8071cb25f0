/* SPDX-License-Identifier: MIT */
/*
 * Kernel loader tests. Every image is generated here, in memory, by small
 * builders for ELF64, ELF32-with-multiboot-header and a.out-kludge
 * multiboot images (kernel-images.h), so each test states exactly which
 * bytes go where.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define KI_CHECK(cond) cr_assert(cond)
#include "kernel-images.h"
#include "loader.h"

#define RAM_SIZE (128ULL << 20)
#define PAGE	 0x1000ULL
#define SZ_1M	 0x100000ULL

static struct vmm_ram ram;
static char err[256];
static struct vmm_boot boot;

/* Every image here lives below this; the rest of RAM stays unbacked zero pages. */
#define RAM_FILLED (8ULL << 20)

static void free_ram(void)
{
	if (ram.base)
		munmap(ram.base, ram.size);
	ram.base = NULL;
}

static void setup_ram_sparse(uint64_t size)
{
	free_ram();
	ram.base = mmap(NULL, size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert_neq(ram.base, MAP_FAILED);
	ram.size = size;
}

static void setup_ram(uint64_t size)
{
	setup_ram_sparse(size);
	/* Not zero, so a test sees whether the loader really cleared bss. */
	memset(ram.base, 0xCC, size < RAM_FILLED ? size : RAM_FILLED);
}

static void setup(void)
{
	setup_ram(RAM_SIZE);
	img = calloc(1, IMG_CAP);
	cr_assert_not_null(img);
	memset(err, 0, sizeof(err));
	memset(&boot, 0, sizeof(boot));
}

static void teardown(void)
{
	free_ram();
	free(img);
	img = NULL;
}

TestSuite(loader, .init = setup, .fini = teardown);

static uint32_t ram32(uint64_t addr)
{
	cr_assert_leq(addr + 4, ram.size);
	return get32(ram.base + addr);
}

static uint64_t ram64(uint64_t addr)
{
	cr_assert_leq(addr + 8, ram.size);
	return get64(ram.base + addr);
}

static int load(size_t len, const char *cmdline, const struct vmm_module *mods, size_t nr)
{
	memset(err, 0x5A, sizeof(err));
	return vmm_load_kernel(&ram, img, len, cmdline, mods, nr, &boot, err, sizeof(err));
}

static void expect_ok(int rc)
{
	cr_assert_eq(rc, 0, "load failed: %d: %.*s", rc, (int) sizeof(err), err);
}

static void expect_error(int rc, int want, const char *what)
{
	cr_assert_eq(rc, -want, "%s: got %d, want %d; err: %.*s", what, rc, -want,
		     (int) sizeof(err), err);
	cr_assert_not_null(memchr(err, 0, sizeof(err)), "%s: err not NUL-terminated", what);
	cr_assert_neq(err[0], 0, "%s: empty err", what);
	cr_assert_null(strchr(err, '\n'), "%s: err has a newline: %s", what, err);
	if (getenv("LOADER_TEST_SHOW_ERR"))
		fprintf(stderr, "%s: %s\n", what, err);
}

static void expect_error_with(int rc, int want, const char *what, const char *needle)
{
	expect_error(rc, want, what);
	cr_assert_not_null(strstr(err, needle), "%s: err \"%s\" does not say \"%s\"", what, err,
			   needle);
}

static void expect_seg_loaded(const struct tseg *s, unsigned int idx)
{
	cr_assert_eq(memcmp(ram.base + s->paddr, img + s->offset, s->filesz), 0,
		     "segment %u bytes differ", idx);
	for (uint64_t j = idx ? 0 : pat_skip0; j < s->filesz; j++)
		cr_assert_eq(ram.base[s->paddr + j], pat(idx, j));
	for (uint64_t j = s->filesz; j < s->memsz; j++)
		cr_assert_eq(ram.base[s->paddr + j], 0, "bss byte %#llx of segment %u not zero",
			     (unsigned long long) j, idx);
}

/* --- ELF64 ---------------------------------------------------------------- */

Test(loader, elf64_segments_exact_bytes_and_bss)
{
	size_t len = good_elf64();

	expect_ok(load(len, NULL, NULL, 0));
	expect_seg_loaded(&e64_segs[0], 0);
	expect_seg_loaded(&e64_segs[1], 1);
	/* Nothing past p_memsz and nothing between the segments is touched. */
	cr_assert_eq(ram.base[0x203000], 0xCC);
	cr_assert_eq(ram.base[0x1FFFFF], 0xCC);
	cr_assert_eq(ram.base[0x3FFFFF], 0xCC);
	cr_assert_eq(ram.base[0x400100], 0xCC);
}

Test(loader, elf64_boot_fields)
{
	expect_ok(load(good_elf64(), "ignored", NULL, 0));
	cr_assert_eq(boot.kind, VMM_BOOT_ELF64);
	cr_assert_eq(boot.entry, 0x200010);
	cr_assert_eq(boot.image_start, 0x200000);
	cr_assert_eq(boot.image_end, 0x400100);
	/* Boot area at 0x1000: 16 KiB stack, GDT page, PML4, PDPT, one PD. */
	cr_assert_eq(boot.stack, 0x5000);
	cr_assert_eq(boot.gdt, 0x5000);
	cr_assert_eq(boot.cr3, 0x6000);
	cr_assert_eq(boot.free_start, 0x400100);
	cr_assert_eq(boot.mb_info, 0);
}

/* Walks the 4-level tables like the MMU (SDM Vol. 3A 4.5), returning the PDE. */
static uint64_t walk(uint64_t cr3, uint64_t va, uint64_t *ret_pa)
{
	uint64_t pml4e = ram64((cr3 & ~0xFFFULL) + ((va >> 39) & 511) * 8);
	uint64_t pdpte, pde;

	cr_assert(pml4e & 1, "PML4E not present for %#llx", (unsigned long long) va);
	pdpte = ram64((pml4e & 0x000FFFFFFFFFF000ULL) + ((va >> 30) & 511) * 8);
	cr_assert(pdpte & 1, "PDPTE not present for %#llx", (unsigned long long) va);
	cr_assert_eq(pdpte & 0x80, 0, "PDPTE is a 1 GiB page");
	pde = ram64((pdpte & 0x000FFFFFFFFFF000ULL) + ((va >> 21) & 511) * 8);
	cr_assert(pde & 1, "PDE not present for %#llx", (unsigned long long) va);
	cr_assert(pde & 0x80, "PDE for %#llx is not a 2 MiB page", (unsigned long long) va);
	*ret_pa = (pde & 0x000FFFFFFFE00000ULL) | (va & 0x1FFFFF);
	return pde;
}

Test(loader, elf64_identity_map_2m_pages)
{
	uint64_t pa, pde, pml4 = 0x6000, pdpt, pd, size = 512ULL << 20;

	/* 512 MiB so that 0x12345678 is RAM. */
	setup_ram_sparse(size);
	expect_ok(load(good_elf64(), NULL, NULL, 0));
	pde = walk(boot.cr3, 0x12345678, &pa);
	cr_assert_eq(pa, 0x12345678);
	cr_assert_eq(pde, 0x12200000ULL | 0x83);
	walk(boot.cr3, ram.size - 1, &pa);
	cr_assert_eq(pa, ram.size - 1);
	walk(boot.cr3, 0, &pa);
	cr_assert_eq(pa, 0);

	/* Exact entries: PML4[0] -> PDPT, PDPT[0] -> PD, PD[i] = i * 2 MiB | P | RW | PS. */
	pdpt = ram64(pml4) & ~0xFFFULL;
	cr_assert_eq(ram64(pml4) & 0xFFF, 0x3);
	cr_assert_eq(pdpt, 0x7000);
	for (int i = 1; i < 512; i++)
		cr_assert_eq(ram64(pml4 + i * 8), 0, "PML4[%d]", i);
	pd = ram64(pdpt) & ~0xFFFULL;
	cr_assert_eq(ram64(pdpt) & 0xFFF, 0x3);
	cr_assert_eq(pd, 0x8000);
	for (int i = 1; i < 512; i++)
		cr_assert_eq(ram64(pdpt + i * 8), 0, "PDPT[%d]", i);
	for (uint64_t i = 0; i < 512; i++) {
		uint64_t want = i < size / 0x200000 ? (i << 21) | 0x83 : 0;

		cr_assert_eq(ram64(pd + i * 8), want, "PD[%llu]", (unsigned long long) i);
	}
}

Test(loader, elf64_identity_map_multi_gib_and_odd_size)
{
	uint64_t pa, size = (1ULL << 30) + 0x201000;

	setup_ram_sparse(size);
	expect_ok(load(good_elf64(), NULL, NULL, 0));
	/* Two PDs: 513 full 2 MiB pages plus the partial last one. */
	cr_assert_eq(ram64(boot.cr3 + 0x1000) & ~0xFFFULL, 0x8000);
	cr_assert_eq(ram64(boot.cr3 + 0x1000 + 8) & ~0xFFFULL, 0x9000);
	walk(boot.cr3, size - 1, &pa);
	cr_assert_eq(pa, size - 1);
	walk(boot.cr3, 0x40123456, &pa);
	cr_assert_eq(pa, 0x40123456);
	cr_assert_eq(ram64(0x9000 + 1 * 8), 0x40200000ULL | 0x83);
	cr_assert_eq(ram64(0x9000 + 2 * 8), 0);
}

Test(loader, elf64_gdt_exact)
{
	uint64_t code, data;

	expect_ok(load(good_elf64(), NULL, NULL, 0));
	cr_assert_eq(ram64(boot.gdt), 0);
	code = ram64(boot.gdt + 0x08);
	data = ram64(boot.gdt + 0x10);
	cr_assert_eq(code, 0x00AF9B000000FFFFULL);
	cr_assert_eq(data, 0x00CF93000000FFFFULL);
	/* SDM Vol. 3A 3.4.5: P, DPL 0, S=1; code L=1 and D=0 (64-bit); data writable. */
	cr_assert(code & (1ULL << 47));
	cr_assert_eq((code >> 45) & 3, 0);
	cr_assert(code & (1ULL << 53));
	cr_assert_eq(code & (1ULL << 54), 0);
	cr_assert_eq((code >> 40) & 0xF, 0xB);
	cr_assert_eq((data >> 40) & 0xF, 0x3);
	cr_assert(data & (1ULL << 47));
	/* The rest of the GDT page is zero (limit is 3 * 8 - 1 = 23). */
	for (uint64_t a = boot.gdt + 0x18; a < boot.gdt + PAGE; a += 8)
		cr_assert_eq(ram64(a), 0);
}

Test(loader, elf64_stack_and_tables_clear_of_segments)
{
	uint64_t stack_lo;

	expect_ok(load(good_elf64(), NULL, NULL, 0));
	cr_assert_eq(boot.stack % 16, 0);
	stack_lo = boot.stack - 0x4000;
	cr_assert_geq(stack_lo, PAGE, "the boot area must leave page 0 alone");
	for (uint64_t a = stack_lo; a < boot.stack; a++)
		cr_assert_eq(ram.base[a], 0);
	cr_assert(boot.cr3 + 3 * PAGE <= boot.image_start || boot.cr3 >= boot.image_end);
	/* Page 0 untouched. */
	for (uint64_t a = 0; a < PAGE; a++)
		cr_assert_eq(ram.base[a], 0xCC);
}

Test(loader, elf64_low_kernel_pushes_boot_area_above_it)
{
	struct tseg s[1] = { { .paddr = 0x0, .filesz = 0x100, .memsz = 0x1F800 } };
	size_t len = build_elf(true, 0x40, s, 1, -1);

	expect_ok(load(len, NULL, NULL, 0));
	expect_seg_loaded(&s[0], 0);
	cr_assert_eq(boot.image_end, 0x1F800);
	cr_assert_eq(boot.stack, 0x20000 + 0x4000);
	cr_assert_eq(boot.gdt, 0x24000);
	cr_assert_eq(boot.cr3, 0x25000);
	cr_assert_eq(boot.free_start, 0x28000);
	cr_assert_eq(ram64(0x25000) & ~0xFFFULL, 0x26000);
}

Test(loader, elf64_higher_half_entry_is_translated)
{
	struct tseg s[1] = { {
		.paddr = 0x1000000,
		.vaddr = 0xFFFFFFFF81000000ULL,
		.filesz = 0x200,
		.memsz = 0x1000,
	} };
	size_t len = build_elf(true, 0xFFFFFFFF81000100ULL, s, 1, -1);

	expect_ok(load(len, NULL, NULL, 0));
	cr_assert_eq(boot.entry, 0x1000100);
	expect_seg_loaded(&s[0], 0);
}

Test(loader, elf64_non_load_and_empty_headers_ignored)
{
	struct tseg s[3] = {
		{ .type = PT_NOTE, .paddr = 0x50000000, .filesz = 0x10, .memsz = 0x10 },
		{ .paddr = 0x300000, .filesz = 0x10, .memsz = 0x10 },
		{ .paddr = 0x300008, .filesz = 0, .memsz = 0 },
	};
	size_t len = build_elf(true, 0x300000, s, 3, -1);

	expect_ok(load(len, NULL, NULL, 0));
	cr_assert_eq(boot.image_start, 0x300000);
	cr_assert_eq(boot.image_end, 0x300010);
	expect_seg_loaded(&s[1], 1);
}

/* --- multiboot ------------------------------------------------------------ */

static const char mod0[] = "initrd contents: the quick brown fox";
static uint8_t mod1[5000];

static void expect_mmap(uint64_t e, uint64_t base, uint64_t len, uint32_t type)
{
	cr_assert_eq(ram32(e), 20);
	cr_assert_eq(ram64(e + 4), base);
	cr_assert_eq(ram64(e + 12), len);
	cr_assert_eq(ram32(e + 20), type);
}

static void expect_info(uint32_t info, const char *cmdline, const struct vmm_module *mods,
			size_t nr, uint64_t image_end)
{
	uint64_t mmap, m, cursor = (image_end + PAGE - 1) & ~(PAGE - 1);

	cr_assert_eq(ram32(info + 0), (1u << 0) | (1u << 2) | (1u << 3) | (1u << 6) | (1u << 9));
	cr_assert_eq(ram32(info + 4), 640);
	cr_assert_eq(ram32(info + 8), (ram.size - SZ_1M) / 1024);
	cr_assert_str_eq((char *) ram.base + ram32(info + 16), cmdline);
	cr_assert_str_eq((char *) ram.base + ram32(info + 64), "vpmu-vmm");
	cr_assert_eq(ram32(info + 20), nr);
	m = ram32(info + 24);
	cr_assert_neq(m, 0);
	for (size_t i = 0; i < nr; i++, m += 16) {
		uint32_t start = ram32(m), end = ram32(m + 4);

		cr_assert_eq(start, cursor, "module %zu at %#x, want %#llx", i, start,
			     (unsigned long long) cursor);
		cr_assert_eq(start % PAGE, 0);
		cr_assert_geq(start, image_end);
		cr_assert_eq(end - start, mods[i].size);
		if (mods[i].size)
			cr_assert_eq(memcmp(ram.base + start, mods[i].data, mods[i].size), 0);
		cr_assert_str_eq((char *) ram.base + ram32(m + 8),
				 mods[i].cmdline ? mods[i].cmdline : "");
		cr_assert_eq(ram32(m + 12), 0);
		cursor = (end + PAGE - 1) & ~(PAGE - 1);
	}
	cr_assert_eq(ram32(info + 44), 3 * 24);
	mmap = ram32(info + 48);
	expect_mmap(mmap, 0, 0xA0000, 1);
	expect_mmap(mmap + 24, 0xA0000, 0x60000, 2);
	expect_mmap(mmap + 48, SZ_1M, ram.size - SZ_1M, 1);
}

Test(loader, multiboot_elf32_loads_and_fills_info)
{
	const char *cmdline = "console=ttyS0 vpmu.test=1";
	struct vmm_module mods[2] = {
		{ .data = mod0, .size = sizeof(mod0), .cmdline = "initrd /boot/initrd" },
		{ .data = mod1, .size = sizeof(mod1), .cmdline = NULL },
	};
	size_t len = good_elf32_mb(0x3);

	for (size_t i = 0; i < sizeof(mod1); i++)
		mod1[i] = (uint8_t) (i * 13 + 1);
	expect_ok(load(len, cmdline, mods, 2));
	cr_assert_eq(boot.kind, VMM_BOOT_MULTIBOOT);
	cr_assert_eq(boot.entry, 0x100020);
	cr_assert_eq(boot.mb_info, 0x1000);
	cr_assert_eq(boot.image_start, 0x100000);
	cr_assert_eq(boot.image_end, 0x104345);
	expect_seg_loaded(&e32_segs[0], 0);
	expect_seg_loaded(&e32_segs[1], 1);
	/* The header itself is part of the loaded text. */
	cr_assert_eq(ram32(0x100000), MB_MAGIC);
	expect_info(boot.mb_info, cmdline, mods, 2, boot.image_end);
	cr_assert_eq(ram32(ram32(boot.mb_info + 24)), 0x105000);
	cr_assert_eq(ram32(ram32(boot.mb_info + 24) + 16), 0x106000);
	cr_assert_eq(boot.free_start, 0x106000 + sizeof(mod1));
	/* Info block, mmap and strings all sit below 640 KiB, clear of page 0. */
	cr_assert_lt(ram32(boot.mb_info + 16), 0xA0000);
	for (uint64_t a = 0; a < PAGE; a++)
		cr_assert_eq(ram.base[a], 0xCC);
}

Test(loader, multiboot_aout_kludge_loads)
{
	size_t len = build_aout(&good_aout_desc, 0x2);

	expect_ok(load(len, "a.out", NULL, 0));
	cr_assert_eq(boot.kind, VMM_BOOT_MULTIBOOT);
	cr_assert_eq(boot.entry, 0x100040);
	cr_assert_eq(boot.image_start, 0x100000);
	cr_assert_eq(boot.image_end, 0x100000 + 0x1800 + 0x2100);
	cr_assert_eq(memcmp(ram.base + 0x100000, img, 0x1800), 0);
	for (uint64_t a = 0x101800; a < 0x103900; a++)
		cr_assert_eq(ram.base[a], 0);
	cr_assert_eq(ram.base[0x103900], 0xCC);
	cr_assert_eq(boot.mb_info, 0x1000);
	expect_info(boot.mb_info, "a.out", NULL, 0, boot.image_end);
	cr_assert_eq(boot.free_start, boot.image_end);
}

Test(loader, multiboot_aout_kludge_with_offset_and_whole_file)
{
	/* Header 0x200 into a file whose text starts 0x100 in: load_addr maps to offset 0x100. */
	uint8_t *h;

	memset(img, 0, IMG_CAP);
	for (int i = 0; i < 0x1000; i++)
		img[i] = pat(0, i);
	h = img + 0x200;
	mb_header(h, 1u << 16);
	put32(h + 12, 0x200100); /* header_addr */
	put32(h + 16, 0x200000); /* load_addr: file offset 0x100 */
	put32(h + 20, 0);	 /* load_end_addr 0: to the end of the file */
	put32(h + 24, 0);	 /* no bss */
	put32(h + 28, 0x200ABC);
	expect_ok(load(0x1000, NULL, NULL, 0));
	cr_assert_eq(boot.image_start, 0x200000);
	cr_assert_eq(boot.image_end, 0x200F00);
	cr_assert_eq(memcmp(ram.base + 0x200000, img + 0x100, 0xF00), 0);
	cr_assert_eq(ram.base[0x200F00], 0xCC);
	cr_assert_eq(boot.entry, 0x200ABC);
}

Test(loader, multiboot_no_modules_null_cmdline)
{
	expect_ok(load(good_elf32_mb(0), NULL, NULL, 0));
	expect_info(boot.mb_info, "", NULL, 0, boot.image_end);
	cr_assert_eq(boot.free_start, boot.image_end);
}

Test(loader, multiboot_optional_flag_bits_accepted)
{
	/* Bits 16-31 other than the a.out kludge are optional: ignored, not refused. */
	expect_ok(load(good_elf32_mb((1u << 20) | 1), NULL, NULL, 0));
}

Test(loader, multiboot_low_kernel_pushes_info_above_modules)
{
	struct tseg s[1] = { { .paddr = 0x0, .filesz = 0x40, .memsz = 0x9F000 } };
	struct vmm_module mods[1] = { { .data = mod0, .size = sizeof(mod0), .cmdline = "m" } };
	size_t len = build_elf(false, 0x10, s, 1, 0);

	expect_ok(load(len, "low", mods, 1));
	cr_assert_eq(boot.image_end, 0x9F000);
	cr_assert_eq(ram32(ram32(boot.mb_info + 24)), 0x9F000);
	cr_assert_eq(boot.mb_info, 0xA0000);
	expect_info(boot.mb_info, "low", mods, 1, boot.image_end);
	cr_assert_gt(boot.free_start, boot.mb_info + 88);
}

Test(loader, multiboot_empty_module)
{
	struct vmm_module mods[2] = {
		{ .data = NULL, .size = 0, .cmdline = "empty" },
		{ .data = mod0, .size = sizeof(mod0), .cmdline = "second" },
	};

	expect_ok(load(good_elf32_mb(1), "x", mods, 2));
	expect_info(boot.mb_info, "x", mods, 2, boot.image_end);
}

Test(loader, multiboot_small_ram_memory_info)
{
	setup_ram(0x200000);
	expect_ok(load(good_elf32_mb(0), NULL, NULL, 0));
	cr_assert_eq(ram32(boot.mb_info + 8), 1024);
	expect_mmap(ram32(boot.mb_info + 48) + 48, SZ_1M, SZ_1M, 1);
}

/* --- truncation: every prefix of a good image must be refused ------------- */

static void expect_every_prefix_refused(size_t len, const char *what)
{
	char name[64];

	expect_ok(load(len, "c", NULL, 0));
	for (size_t n = 0; n < len; n++) {
		int rc = load(n, "c", NULL, 0);

		snprintf(name, sizeof(name), "%s prefix %zu/%zu", what, n, len);
		cr_assert(rc == -EINVAL || rc == -ENOEXEC, "%s: got %d", name, rc);
		expect_error(rc, -rc, name);
	}
}

Test(loader, truncated_elf64_every_prefix)
{
	setup_ram(16 << 20);
	expect_every_prefix_refused(good_elf64(), "ELF64");
}

Test(loader, truncated_elf32_multiboot_every_prefix)
{
	setup_ram(16 << 20);
	expect_every_prefix_refused(good_elf32_mb(3), "ELF32 multiboot");
}

Test(loader, truncated_aout_every_prefix)
{
	setup_ram(16 << 20);
	expect_every_prefix_refused(build_aout(&good_aout_desc, 0), "a.out");
}

Test(loader, truncated_messages)
{
	size_t len = good_elf64();

	expect_error_with(load(40, NULL, NULL, 0), EINVAL, "ELF64 header", "truncated image");
	expect_error_with(load(100, NULL, NULL, 0), EINVAL, "phdrs",
			  "program header table ends at byte 176 but the file has 100 bytes");
	expect_error_with(load(len - 1, NULL, NULL, 0), EINVAL, "data", "segment 1");
	expect_error_with(load(2, NULL, NULL, 0), ENOEXEC, "2 bytes", "not a kernel");
}

/* --- bad images ------------------------------------------------------------ */

Test(loader, not_a_kernel)
{
	memset(img, 0x90, 10000);
	expect_error_with(load(10000, NULL, NULL, 0), ENOEXEC, "nops",
			  "not a kernel: no ELF magic and no multiboot header in the first 8 KiB");
	expect_error(load(0, NULL, NULL, 0), ENOEXEC, "empty");
}

Test(loader, multiboot_header_past_8k_not_found)
{
	memset(img, 0, 0x3000);
	mb_header(img + 8192, 1u << 16);
	expect_error_with(load(0x3000, NULL, NULL, 0), ENOEXEC, "late header", "not a kernel");
	/* The last slot that still lies within the first 8 KiB is found. */
	memset(img, 0, 0x3000);
	mb_header(img + 8192 - 12, 0);
	expect_error_with(load(0x3000, NULL, NULL, 0), ENOEXEC, "edge", "not an ELF file");
}

Test(loader, multiboot_unaligned_header_not_found)
{
	size_t len = build_aout(&good_aout_desc, 0);

	memmove(img + AOUT_HDR_OFF + 2, img + AOUT_HDR_OFF, 32);
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "unaligned", "not a kernel");
}

Test(loader, multiboot_bad_checksum)
{
	size_t len = build_aout(&good_aout_desc, 0);

	put32(img + AOUT_HDR_OFF + 8, get32(img + AOUT_HDR_OFF + 8) + 1);
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "aout checksum", "bad checksum");
	len = good_elf32_mb(0);
	put32(img + e32_segs[0].offset + 8, 0);
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "elf32 checksum", "bad checksum");
}

Test(loader, multiboot_video_mode_refused)
{
	expect_error_with(load(good_elf32_mb(1u << 2), NULL, NULL, 0), ENOEXEC, "video",
			  "video mode");
}

Test(loader, multiboot_unknown_required_flag_refused)
{
	expect_error_with(load(good_elf32_mb(1u << 9), NULL, NULL, 0), ENOEXEC, "bit 9",
			  "unknown features");
}

Test(loader, multiboot_elf64_without_kludge_refused)
{
	size_t len = good_elf64();

	mb_header(img + e64_segs[0].offset, 0);
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "elf64 mb", "32-bit ELF");
}

Test(loader, elf32_without_multiboot_refused)
{
	expect_error_with(load(good_elf32_mb(-1), NULL, NULL, 0), ENOEXEC, "elf32",
			  "without a multiboot header");
}

Test(loader, elf_wrong_identification)
{
	size_t len = good_elf64();

	img[4] = 3;
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "class", "unknown class");
	len = good_elf64();
	img[5] = 2;
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "big-endian", "little-endian");
	len = good_elf64();
	img[6] = 0;
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "version", "ELF version");
	len = good_elf64();
	img[0] = 0x7E;
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "magic", "not a kernel");
}

Test(loader, elf_wrong_machine_or_type)
{
	size_t len = good_elf64();

	put16(img + 18, 3);
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "elf64 EM_386", "e_machine 3");
	len = good_elf64();
	put16(img + 16, 3);
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "ET_DYN", "ET_EXEC");
	len = good_elf32_mb(0);
	put16(img + 18, 62);
	expect_error_with(load(len, NULL, NULL, 0), ENOEXEC, "elf32 EM_X86_64", "e_machine 62");
}

Test(loader, elf_bad_phentsize_and_phnum)
{
	size_t len = good_elf64();

	put16(img + 54, 64);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "phentsize", "e_phentsize 64");
	len = good_elf32_mb(0);
	put16(img + 42, 56);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "phentsize32", "e_phentsize 56");
	len = good_elf64();
	put16(img + 56, 0);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "phnum 0", "no program headers");
	len = good_elf64();
	put16(img + 56, 0xFFFF);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "phnum max",
			  "program header table ends at byte");
}

Test(loader, elf_huge_offsets)
{
	size_t len = good_elf64();

	put64(img + 32, 0xFFFFFFFFFFFFFFF0ULL);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "e_phoff",
			  "program header table starts");
	len = good_elf64();
	put64(img + 64 + 8, 0xFFFFFFFFFFFFFF00ULL);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "p_offset", "ends past the end");
	len = good_elf64();
	put64(img + 64 + 8, 0x10);
	put64(img + 64 + 32, 0xFFFFFFFFFFFFFFF8ULL);
	put64(img + 64 + 40, 0xFFFFFFFFFFFFFFF8ULL);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "p_filesz", "ends past the end");
}

Test(loader, elf_filesz_larger_than_memsz)
{
	struct tseg s[1] = { { .paddr = 0x100000, .filesz = 0x200, .memsz = 0x100 } };
	size_t len = build_elf(true, 0x100000, s, 1, -1);

	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "filesz",
			  "p_filesz 0x200 larger than p_memsz 0x100");
}

Test(loader, elf_overlapping_segments)
{
	struct tseg s[3] = {
		{ .paddr = 0x100000, .filesz = 0x100, .memsz = 0x100 },
		{ .paddr = 0x200000, .filesz = 0x100, .memsz = 0x1000 },
		{ .paddr = 0x200FFF, .filesz = 0x1, .memsz = 0x1 },
	};
	size_t len = build_elf(true, 0x100000, s, 3, -1);

	expect_error_with(
		load(len, NULL, NULL, 0), EINVAL, "overlap",
		"ELF64 segment 2 (p_paddr 0x200fff, p_memsz 0x1) overlaps ELF64 segment 1");
	/* Touching is fine. */
	s[2].paddr = 0x201000;
	len = build_elf(true, 0x100000, s, 3, -1);
	expect_ok(load(len, NULL, NULL, 0));
	len = good_elf32_mb(0);
	put32(img + 52 + 32 + 12, 0x1007FF);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "overlap32",
			  "overlaps ELF32 segment 0");
}

Test(loader, elf_entry_outside_segments)
{
	size_t len = good_elf64();

	put64(img + 24, 0x203000);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "entry after bss",
			  "entry point 0x203000 is outside every loaded segment");
	len = good_elf64();
	put64(img + 24, 0x7FFFFFFFFFFFULL);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "entry beyond RAM", "entry point");
	len = good_elf64();
	put64(img + 24, 0x1FFFFF);
	expect_error(load(len, NULL, NULL, 0), EINVAL, "entry just below");
	len = build_aout(&good_aout_desc, 0);
	put32(img + AOUT_HDR_OFF + 28, 0x100000 + 0x1800 + 0x2100);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "aout entry", "entry point");
}

Test(loader, elf_segment_beyond_ram)
{
	struct tseg s[1] = { { .paddr = RAM_SIZE - 0x100, .filesz = 0x80, .memsz = 0x101 } };
	size_t len = build_elf(true, RAM_SIZE - 0x100, s, 1, -1);

	expect_error_with(load(len, NULL, NULL, 0), E2BIG, "beyond RAM",
			  "does not fit in 128 MiB of RAM");
	s[0].memsz = 0x100;
	len = build_elf(true, RAM_SIZE - 0x100, s, 1, -1);
	expect_ok(load(len, NULL, NULL, 0));
	cr_assert_eq(boot.image_end, RAM_SIZE);
}

Test(loader, elf_segment_wraps)
{
	struct tseg s[1] = { { .paddr = 0xFFFFFFFFFFFFF000ULL, .filesz = 0x10, .memsz = 0x2000 } };
	size_t len = build_elf(true, 0xFFFFFFFFFFFFF000ULL, s, 1, -1);

	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "wrap", "wraps around");
}

Test(loader, multiboot_segment_above_4g)
{
	size_t len = good_elf32_mb(0);

	put32(img + 52 + 32 + 12, 0xFFFFF000);
	put32(img + 52 + 32 + 20, 0x2000);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "4G", "ends above 4 GiB");
}

Test(loader, elf_too_many_segments)
{
	static struct tseg s[65];

	for (int i = 0; i < 65; i++)
		s[i] = (struct tseg){ .paddr = 0x100000 + i * 0x1000, .filesz = 1, .memsz = 1 };
	expect_error_with(load(build_elf(true, 0x100000, s, 65, -1), NULL, NULL, 0), EINVAL,
			  "65 segs", "more than 64");
	expect_ok(load(build_elf(true, 0x100000, s, 64, -1), NULL, NULL, 0));
}

Test(loader, elf_no_loadable_segment)
{
	struct tseg s[1] = { { .type = PT_NOTE, .paddr = 0x100000, .filesz = 4, .memsz = 4 } };

	expect_error_with(load(build_elf(true, 0x100000, s, 1, -1), NULL, NULL, 0), EINVAL,
			  "no PT_LOAD", "no non-empty PT_LOAD");
}

Test(loader, aout_bad_addresses)
{
	size_t len = build_aout(&good_aout_desc, 0);
	uint8_t *h = img + AOUT_HDR_OFF;

	put32(h + 16, 0x100020); /* load_addr above header_addr */
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "load>header", "is above header_addr");
	len = build_aout(&good_aout_desc, 0);
	put32(h + 16, 0x0FFF00); /* would start before the file */
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "before file", "past the header's");
	len = build_aout(&good_aout_desc, 0);
	put32(h + 20, 0x0FFFFF);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "load_end", "below load_addr");
	len = build_aout(&good_aout_desc, 0);
	put32(h + 24, 0x101000);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "bss_end", "bss_end_addr");
	len = build_aout(&good_aout_desc, 0);
	put32(h + 20, 0x102000);
	expect_error_with(load(len, NULL, NULL, 0), EINVAL, "load_end past file",
			  "truncated image");
}

Test(loader, modules_that_do_not_fit)
{
	struct vmm_module mods[1] = { { .data = mod1, .size = sizeof(mod1) } };
	size_t len = good_elf32_mb(0);

	setup_ram(0x106000);
	expect_error_with(load(len, NULL, mods, 1), E2BIG, "module", "module 0");
	setup_ram(0x107000);
	expect_ok(load(len, NULL, mods, 1));
	cr_assert_eq(boot.free_start, 0x105000 + sizeof(mod1));
}

Test(loader, no_room_for_boot_area)
{
	struct tseg s[1] = { { .paddr = 0, .filesz = 0x10, .memsz = 0x200000 } };
	size_t len = build_elf(true, 0, s, 1, -1);

	setup_ram(0x200000);
	expect_error_with(load(len, NULL, NULL, 0), E2BIG, "elf64 full", "no room");
	len = build_elf(false, 0, s, 1, 0);
	expect_error_with(load(len, NULL, NULL, 0), E2BIG, "mb full", "no room");
}

Test(loader, failure_leaves_ram_and_ret_untouched)
{
	struct vmm_module mods[1] = { { .data = mod1, .size = sizeof(mod1) } };
	uint8_t *copy;
	struct vmm_boot before;
	size_t len;

	setup_ram(0x106000);
	copy = malloc(ram.size);
	memcpy(copy, ram.base, ram.size);
	memset(&boot, 0xA5, sizeof(boot));
	before = boot;
	/* Fails only at the very last check, after every segment was accepted. */
	len = good_elf32_mb(0);
	expect_error(load(len, NULL, mods, 1), E2BIG, "late failure");
	len = good_elf64();
	expect_error(load(len, NULL, NULL, 0), E2BIG, "elf64 beyond");
	cr_assert_eq(memcmp(copy, ram.base, ram.size), 0, "RAM changed on failure");
	cr_assert_eq(memcmp(&before, &boot, sizeof(boot)), 0, "ret changed on failure");
	free(copy);
}

Test(loader, err_buffer_sizes)
{
	char small[8];
	size_t len = good_elf64();

	put64(img + 24, 0x203000);
	for (size_t n = 1; n <= sizeof(small); n++) {
		memset(small, 'x', sizeof(small));
		cr_assert_eq(vmm_load_kernel(&ram, img, len, NULL, NULL, 0, &boot, small, n),
			     -EINVAL);
		cr_assert_eq(small[n - 1], 0);
		cr_assert_eq(strlen(small), n - 1);
	}
	cr_assert_eq(vmm_load_kernel(&ram, img, len, NULL, NULL, 0, &boot, NULL, 0), -EINVAL);
	/* On success err is the empty string. */
	len = good_elf64();
	memset(err, 'x', sizeof(err));
	cr_assert_eq(vmm_load_kernel(&ram, img, len, NULL, NULL, 0, &boot, err, sizeof(err)), 0);
	cr_assert_eq(err[0], 0);
}

Test(loader, bad_arguments)
{
	struct vmm_ram none = { 0 };
	size_t len = good_elf64();

	expect_error(vmm_load_kernel(&none, img, len, NULL, NULL, 0, &boot, err, sizeof(err)),
		     EINVAL, "no RAM");
	expect_error(vmm_load_kernel(&ram, img, len, NULL, NULL, 0, NULL, err, sizeof(err)), EINVAL,
		     "no ret");
	expect_error(vmm_load_kernel(&ram, NULL, 10, NULL, NULL, 0, &boot, err, sizeof(err)),
		     EINVAL, "no image");
	len = good_elf32_mb(0);
	expect_error(vmm_load_kernel(&ram, img, len, NULL, NULL, 2, &boot, err, sizeof(err)),
		     EINVAL, "no mods");
}
