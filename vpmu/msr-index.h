/* SPDX-License-Identifier: MIT */
/*
 * The MSR names now live in the public vpmu/msr.h. This shim keeps files
 * that still include "msr-index.h" building (vmm-glue/kvm.c,
 * host-tools/vpmu-pebs.c); delete it once they include <vpmu/msr.h>.
 */
#ifndef VPMU_MSR_INDEX_H
#define VPMU_MSR_INDEX_H

#include "bits.h"
#include "vpmu/msr.h"

#endif
