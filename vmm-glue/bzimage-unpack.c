/* SPDX-License-Identifier: MIT */
/*
 * The kernel inside a bzImage, decompressed by the VMM (bzimage_unpack).
 *
 * A bzImage's protected-mode part is a decompressor with the kernel
 * (vmlinux, an ELF64 file) as its payload: payload_offset and
 * payload_length in the setup header (boot protocol 2.08+,
 * Documentation/arch/x86/boot.rst) say where, the first bytes say how it
 * is compressed. On an emulator the decompressor is the slowest part of a
 * boot (Debian's XZ payload: ~4.5 billion guest instructions, more than
 * the kernel then needs to reach /init), so the VMM inflates it itself,
 * as VMMs that boot a vmlinux do, and enters the kernel's own startup_64
 * (the ELF entry) with the same 64-bit boot protocol state: the loaded
 * segments at their physical addresses, RSI the zero page. What is lost is
 * only what the decompressor would have done on top: physical and virtual
 * KASLR (the kernel is where it was linked, as with nokaslr).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bzimage.h"

#ifdef HAVE_LZMA
#include <lzma.h>
#endif

#define BP_PAYLOAD_OFFSET 0x248
#define BP_PAYLOAD_LENGTH 0x24c

static const uint8_t xz_magic[6] = { 0xfd, '7', 'z', 'X', 'Z', 0 };

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
	       (uint32_t) p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return rd32(p) | (uint64_t) rd32(p + 4) << 32;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

#ifdef HAVE_LZMA
/* XZ into a buffer grown as needed, at most `max` bytes. */
static int unxz(const uint8_t *in, size_t in_size, size_t max, uint8_t **ret, size_t *ret_size,
		char *err, size_t errlen)
{
	lzma_stream s = LZMA_STREAM_INIT;
	size_t cap = in_size * 4 < max ? in_size * 4 : max;
	uint8_t *out = malloc(cap);
	lzma_ret lr;

	if (!out)
		return fail(err, errlen, -ENOMEM, "out of memory for the decompressed kernel");
	if (lzma_stream_decoder(&s, UINT64_MAX, 0) != LZMA_OK) {
		free(out);
		return fail(err, errlen, -ENOMEM, "cannot start an XZ decoder");
	}
	s.next_in = in;
	s.avail_in = in_size;
	s.next_out = out;
	s.avail_out = cap;
	for (;;) {
		lr = lzma_code(&s, LZMA_FINISH);
		if (lr == LZMA_STREAM_END)
			break;
		if (lr == LZMA_OK && !s.avail_out && cap < max) {
			size_t done = cap;
			uint8_t *n;

			cap = cap * 2 < max ? cap * 2 : max;
			n = realloc(out, cap);
			if (!n) {
				lzma_end(&s);
				free(out);
				return fail(err, errlen, -ENOMEM,
					    "out of memory for the decompressed kernel");
			}
			out = n;
			s.next_out = out + done;
			s.avail_out = cap - done;
			continue;
		}
		lzma_end(&s);
		free(out);
		return fail(err, errlen, -EINVAL,
			    lr == LZMA_OK ? "the kernel's XZ payload inflates past %zu MiB"
					  : "the kernel's XZ payload is damaged (liblzma error %d)",
			    lr == LZMA_OK ? max >> 20 : (size_t) lr);
	}
	*ret_size = (size_t) s.total_out;
	lzma_end(&s);
	*ret = out;
	return 0;
}
#endif

/*
 * The vmlinux ELF64 (x86-64, executable) in elf[0, size): its PT_LOAD
 * segments checked to lie inside the file and, by physical address, inside
 * [base, base + span); the entry point the same way.
 */
static int check_vmlinux(const uint8_t *elf, size_t size, uint64_t base, uint64_t span,
			 uint64_t *ret_entry, char *err, size_t errlen)
{
	uint64_t phoff, entry;
	unsigned int phnum, phentsize, loads = 0;
	bool entry_in = false;

	if (size < 64 || memcmp(elf, "\177ELF", 4) || elf[4] != 2 || elf[5] != 1 ||
	    (elf[16] | elf[17] << 8) != 2 || (elf[18] | elf[19] << 8) != 62)
		return fail(err, errlen, -ENOEXEC,
			    "the bzImage's payload is not an x86-64 ELF executable (vmlinux)");
	entry = rd64(elf + 24);
	phoff = rd64(elf + 32);
	phentsize = elf[54] | elf[55] << 8;
	phnum = elf[56] | elf[57] << 8;
	if (phentsize < 56 || phoff > size || (uint64_t) phnum * phentsize > size - phoff)
		return fail(err, errlen, -ENOEXEC, "vmlinux: program headers outside the file");
	for (unsigned int i = 0; i < phnum; i++) {
		const uint8_t *ph = elf + phoff + (uint64_t) i * phentsize;
		uint64_t off = rd64(ph + 8), paddr = rd64(ph + 24), filesz = rd64(ph + 32),
			 memsz = rd64(ph + 40);

		if (rd32(ph) != 1) /* PT_LOAD */
			continue;
		if (off > size || filesz > size - off || filesz > memsz || paddr < base ||
		    memsz > span || paddr - base > span - memsz)
			return fail(
				err, errlen, -ENOEXEC,
				"vmlinux: segment %u (physical %#" PRIx64 ", %#" PRIx64
				" bytes) outside the file or the kernel's init_size from %#" PRIx64,
				i, paddr, memsz, base);
		if (entry >= paddr && entry - paddr < memsz)
			entry_in = true;
		loads++;
	}
	if (!loads || !entry_in)
		return fail(err, errlen, -ENOEXEC,
			    "vmlinux: no loadable segment holds the entry point %#" PRIx64, entry);
	*ret_entry = entry;
	return 0;
}

int bzimage_unpack(const uint8_t *img, const struct bzimage *bz, uint8_t **ret, size_t *ret_size,
		   uint64_t *ret_entry, char *err, size_t errlen)
{
	uint64_t off, len, entry = 0;
	const uint8_t *payload;
	uint8_t *elf = NULL;
	size_t elf_size = 0;
	int r;

	if (bz->version < 0x0208)
		return fail(err, errlen, -ENOTSUP,
			    "boot protocol %u.%02u names no payload (2.08+ does)", bz->version >> 8,
			    bz->version & 0xff);
	off = rd32(img + BP_PAYLOAD_OFFSET);
	len = rd32(img + BP_PAYLOAD_LENGTH);
	if (off > bz->kernel_size || len > bz->kernel_size - off || len < sizeof(xz_magic))
		return fail(err, errlen, -EINVAL,
			    "bzImage payload %#" PRIx64 "+%#" PRIx64
			    " lies outside the kernel's %" PRIu64 " bytes",
			    off, len, bz->kernel_size);
	payload = img + bz->kernel_offset + off;
	if (memcmp(payload, xz_magic, sizeof(xz_magic)))
		return fail(err, errlen, -ENOTSUP,
			    "the kernel's payload is not XZ-compressed (first bytes %02x %02x %02x "
			    "%02x): the guest decompresses it",
			    payload[0], payload[1], payload[2], payload[3]);
#ifdef HAVE_LZMA
	r = unxz(payload, len, bz->init_size ? bz->init_size : 1ull << 30, &elf, &elf_size, err,
		 errlen);
#else
	r = fail(err, errlen, -ENOTSUP,
		 "vpmu-vmm was built without liblzma: the guest decompresses its kernel");
#endif
	if (r < 0)
		return r;
	r = check_vmlinux(elf, elf_size, bz->load_addr, bz->init_size, &entry, err, errlen);
	if (r < 0) {
		free(elf);
		return r;
	}
	*ret = elf;
	*ret_size = elf_size;
	*ret_entry = entry;
	return 0;
}

void bzimage_place_vmlinux(const uint8_t *elf, uint64_t base, uint8_t *host)
{
	uint64_t phoff = rd64(elf + 32);
	unsigned int phnum = elf[56] | elf[57] << 8, phentsize = elf[54] | elf[55] << 8;

	for (unsigned int i = 0; i < phnum; i++) {
		const uint8_t *ph = elf + phoff + (uint64_t) i * phentsize;
		uint64_t off = rd64(ph + 8), paddr = rd64(ph + 24), filesz = rd64(ph + 32),
			 memsz = rd64(ph + 40);

		if (rd32(ph) != 1)
			continue;
		memcpy(host + (paddr - base), elf + off, filesz);
		memset(host + (paddr - base) + filesz, 0, memsz - filesz);
	}
}
