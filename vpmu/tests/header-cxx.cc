// The public headers must build and link as C++.
#include <vpmu/bits.h>
#include <vpmu/msr.h>
#include <vpmu/pebs.h>
#include <vpmu/vpmu.h>
#include <vpmu/walk.h>

int main()
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *vcpu = nullptr;
	struct vpmu_guest_memory *mem = nullptr;
	static unsigned char ram[4096];
	struct vpmu_mem_region r = { 0, sizeof(ram), ram };

	vpmu_config_init(&cfg);
	if (vpmu_vcpu_new(&cfg, &vcpu) != 0)
		return 1;
	vpmu_vcpu_free(vcpu);
	if (vpmu_guest_memory_new(&r, 1, &mem) != 0)
		return 1;
	vpmu_guest_memory_free(mem);
	if (pebs3_gpr_offset(PEBS_RBX) != 0x18 ||
	    VPMU_FIELD_PREP(PEBS_BASIC_RECORD_SIZE, 32) >> 48 != 32)
		return 1;
	return vpmu_model_count() > 0 ? 0 : 1;
}
