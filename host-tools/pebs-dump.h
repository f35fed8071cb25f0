/* SPDX-License-Identifier: MIT */
/*
 * The PEBS dump format now lives in the public vpmu/pebs.h. This shim
 * keeps host-tools/vpmu-pebs.c building until it includes <vpmu/pebs.h>;
 * delete it then.
 */
#ifndef VPMU_PEBS_DUMP_H
#define VPMU_PEBS_DUMP_H

#include "vpmu/pebs.h"

#endif
