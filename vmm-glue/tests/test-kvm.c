/* SPDX-License-Identifier: MIT */
/*
 * The KVM backend's refusals, which need no /dev/kvm: bad sizes and vCPU
 * counts get one line each, and a host without a usable /dev/kvm gets a
 * line that names what is missing; with /dev/kvm, a Linux command line too
 * long for the loader gets one (skipped without). Running guests on KVM is
 * the guest suite's --accel kvm half (skipped where /dev/kvm is absent).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "bzimage.h"
#include "kvm.h"

Test(kvm, refuses_bad_configs)
{
	struct kvm_vm_config cfg;
	struct kvm_vm *vm = (struct kvm_vm *) 0x1;
	char err[256];

	kvm_vm_config_init(&cfg);
	cfg.mem_size = 4ull << 30;
	cr_expect_eq(kvm_vm_new(&cfg, &vm, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "RAM size must be a multiple of 4 KiB up to 3 GiB under KVM");
	cfg.mem_size = (128ull << 20) + 1;
	cr_expect_eq(kvm_vm_new(&cfg, &vm, err, sizeof(err)), -EINVAL);
	kvm_vm_config_init(&cfg);
	cfg.smp = 0;
	cr_expect_eq(kvm_vm_new(&cfg, &vm, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "--smp 0: use 1 to 64");
	cfg.smp = KVM_VM_MAX_VCPUS + 1;
	cr_expect_eq(kvm_vm_new(&cfg, &vm, err, sizeof(err)), -EINVAL);
	cr_expect_eq(vm, (struct kvm_vm *) 0x1, "untouched on failure");
	kvm_vm_free(NULL);
}

Test(kvm, probe_says_why)
{
	char why[256] = "";
	int r = kvm_probe(why, sizeof(why));

	if (access("/dev/kvm", F_OK)) {
		cr_expect_eq(r, -ENOENT);
		cr_expect_str_eq(why, "/dev/kvm: No such file or directory");
	} else {
		/* a host with KVM: usable, or one line naming what it lacks */
		cr_expect(r == 0 || (r < 0 && strlen(why) > 10), "%d %s", r, why);
	}
}

/* A Linux command line longer than the kernel takes (cmdline_size): one line, -E2BIG. */
Test(kvm, long_linux_cmdline)
{
	static uint8_t img[4096 + 512];
	static char cmdline[0x10001];
	struct kvm_vm_config cfg;
	struct kvm_vm *vm = NULL;
	char err[256] = "";

	if (kvm_probe(err, sizeof(err)) < 0)
		cr_skip_test("no usable /dev/kvm here: %s", err);
	/* a 64-bit bzImage header (boot protocol 2.15), 3 setup sectors, 2.5 KiB of kernel */
	img[BP_SETUP_SECTS] = 3;
	img[BP_BOOT_FLAG] = 0x55, img[BP_BOOT_FLAG + 1] = 0xaa;
	img[BP_HDR_JUMP] = 0xeb, img[BP_HDR_JUMP + 1] = 0x6a;
	memcpy(img + BP_HEADER, "HdrS", 4);
	img[BP_VERSION] = 0x0f, img[BP_VERSION + 1] = 0x02;
	img[BP_LOADFLAGS] = LOADFLAG_LOADED_HIGH;
	img[BP_XLOADFLAGS] = XLF_KERNEL_64;
	img[BP_CMDLINE_SIZE] = 0xff, img[BP_CMDLINE_SIZE + 1] = 0xff; /* up to 65535 bytes */
	memset(img + BP_INITRD_ADDR_MAX, 0x7f, 4);
	img[0x24c] = 16; /* payload_length: 16 bytes at the kernel's start, not XZ: left packed */
	kvm_vm_config_init(&cfg);
	cr_assert_eq(kvm_vm_new(&cfg, &vm, err, sizeof(err)), 0, "%s", err);
	memset(cmdline, 'a', sizeof(cmdline) - 1);
	cr_expect_eq(kvm_vm_boot_linux(vm, img, sizeof(img), cmdline, NULL, 0, err, sizeof(err)),
		     -E2BIG);
	cr_expect_str_eq(err,
			 "command line of 65536 bytes is longer than the kernel's limit of 65535");
	cmdline[0xffff] = 0;
	cr_expect_eq(kvm_vm_boot_linux(vm, img, sizeof(img), cmdline, NULL, 0, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_not_null(kvm_vm_unpack_note(vm));
	kvm_vm_free(vm);
}
