/* SPDX-License-Identifier: MIT */
/* Public structs of any size in and out (vpmu/vpmu.h, "ABI"). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "abi.h"

int abi_tail_is_zero(const void *p, size_t from, size_t size)
{
	const uint8_t *b = p;

	for (size_t i = from; i < size; i++)
		if (b[i])
			return 0;
	return 1;
}

int abi_copy_in(void *dst, size_t dst_size, const void *src, size_t size)
{
	if (size > dst_size && !abi_tail_is_zero(src, dst_size, size))
		return -E2BIG;
	memcpy(dst, src, size < dst_size ? size : dst_size);
	if (size < dst_size)
		memset((uint8_t *) dst + size, 0, dst_size - size);
	return 0;
}

void abi_copy_out(void *dst, size_t size, const void *src, size_t src_size)
{
	memcpy(dst, src, size < src_size ? size : src_size);
	if (size > src_size)
		memset((uint8_t *) dst + src_size, 0, size - src_size);
}
