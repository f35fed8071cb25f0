/* SPDX-License-Identifier: MIT */
/*
 * The KVM backend's refusals, which need no /dev/kvm: bad sizes and vCPU
 * counts get one line each, and a host without a usable /dev/kvm gets a
 * line that names what is missing. Running guests on KVM is the guest
 * suite's --accel kvm half (skipped where /dev/kvm is absent).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "kvm.h"

Test(kvm, refuses_bad_configs)
{
	struct kvm_vm_config cfg;
	struct kvm_vm *vm = (struct kvm_vm *)0x1;
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
	cr_expect_eq(vm, (struct kvm_vm *)0x1, "untouched on failure");
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
