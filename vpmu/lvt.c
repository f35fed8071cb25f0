/* SPDX-License-Identifier: MIT */
/*
 * The local APIC LVT performance-counter entry (SDM Vol. 3A 11.5.1,
 * Figure 11-8): bits 7:0 vector, 10:8 delivery mode (000 fixed, 100 NMI),
 * 12 delivery status, 16 mask. Delivery masks the entry, as hardware does;
 * the guest's handler unmasks it before returning (Vol. 3B 20.4.9.5).
 */
#include "bits.h"
#include "vpmu/msr.h"
#include "vpmu/vpmu.h"

#define APIC_MODE_FIXED 0
#define APIC_MODE_NMI	4

void vpmu_lvt_decode(uint32_t lvt, struct vpmu_lvt *ret)
{
	unsigned int mode = (unsigned int) FIELD_GET(APIC_LVT_DELIVERY_MODE, lvt);

	ret->vector = (uint8_t) FIELD_GET(APIC_LVT_VECTOR, lvt);
	ret->after = lvt;
	ret->action = VPMU_LVT_DROP;
	if (lvt & APIC_LVT_MASKED)
		return;
	if (mode == APIC_MODE_NMI)
		ret->action = VPMU_LVT_NMI;
	/* vectors 0-15 are illegal: the APIC logs an error, nothing is delivered */
	else if (mode == APIC_MODE_FIXED && ret->vector >= 16)
		ret->action = VPMU_LVT_FIXED;
	/* SMI, INIT and ExtINT are not PMI modes a vPMU delivers */
	if (ret->action != VPMU_LVT_DROP)
		ret->after = lvt | (uint32_t) APIC_LVT_MASKED;
}
