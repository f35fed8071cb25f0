/* SPDX-License-Identifier: MIT */
/*
 * The LBR stack of models with LBR format 5 (Skylake/Ice Lake: 32 entries,
 * FROM/TO plus LBR_INFO), fed with the guest's own branches by the
 * emulator. Host LBR contents never reach it. SDM Vol. 3B 20.4.8, 20.12:
 * TOS is incremented before each write and wraps; LBR_SELECT bits
 * suppress branch classes (Tables 20-11..13).
 */
#include "bits.h"
#include "vpmu/msr.h"
#include "pmu.h"

#define LBR_SEL_CPL_EQ_0   BIT_ULL(0)
#define LBR_SEL_CPL_NEQ_0  BIT_ULL(1)
#define LBR_SEL_JCC	   BIT_ULL(2)
#define LBR_SEL_REL_CALL   BIT_ULL(3)
#define LBR_SEL_IND_CALL   BIT_ULL(4)
#define LBR_SEL_RETURN	   BIT_ULL(5)
#define LBR_SEL_IND_JMP	   BIT_ULL(6)
#define LBR_SEL_REL_JMP	   BIT_ULL(7)
#define LBR_SEL_FAR	   BIT_ULL(8)
#define LBR_SEL_CALL_STACK BIT_ULL(9)

bool vpmu_lbr_active(const struct vpmu_vcpu *vcpu)
{
	return vcpu->model.lbr_depth && (vcpu->debugctl & DEBUGCTLMSR_LBR) &&
	       !(vcpu->global_status & GLOBAL_STATUS_LBRS_FROZEN);
}

static uint64_t suppress_bit(enum vpmu_branch_kind kind)
{
	switch (kind) {
	case VPMU_BR_COND:
		return LBR_SEL_JCC;
	case VPMU_BR_JMP:
		return LBR_SEL_REL_JMP;
	case VPMU_BR_JMP_IND:
		return LBR_SEL_IND_JMP;
	case VPMU_BR_CALL:
		return LBR_SEL_REL_CALL;
	case VPMU_BR_CALL_IND:
		return LBR_SEL_IND_CALL;
	case VPMU_BR_RET:
		return LBR_SEL_RETURN;
	case VPMU_BR_FAR:
		return LBR_SEL_FAR;
	}
	return ~0ULL;
}

void vpmu_lbr_branch(struct vpmu_vcpu *vcpu, uint64_t from, uint64_t to, enum vpmu_branch_kind kind,
		     unsigned int cpl, uint64_t cycles)
{
	uint64_t sel = vcpu->lbr_select, depth = vcpu->model.lbr_depth;
	uint64_t tos = vcpu->lbr_tos;

	if (!vpmu_lbr_active(vcpu))
		return;
	if (sel & (cpl ? LBR_SEL_CPL_NEQ_0 : LBR_SEL_CPL_EQ_0))
		return;
	/*
	 * Call-stack mode: a return pops the call that it returns from
	 * instead of being recorded (§20.12: calls must not be suppressed
	 * for the stack to be meaningful; other combinations are undefined).
	 */
	if ((sel & LBR_SEL_CALL_STACK) && kind == VPMU_BR_RET) {
		vcpu->lbr_from[tos] = vcpu->lbr_to[tos] = vcpu->lbr_info[tos] = 0;
		vcpu->lbr_tos = (tos + depth - 1) % depth;
		return;
	}
	if (sel & suppress_bit(kind))
		return;
	tos = (tos + 1) % depth;
	vcpu->lbr_tos = tos;
	/* format 5 FROM/TO: 47:0 address, 63:48 its sign extension */
	vcpu->lbr_from[tos] = sign_extend64(from, 48);
	vcpu->lbr_to[tos] = sign_extend64(to, 48);
	vcpu->lbr_info[tos] = cycles > LBR_INFO_CYCLES ? LBR_INFO_CYCLES : cycles;
}
