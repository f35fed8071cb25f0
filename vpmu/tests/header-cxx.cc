// The public header must build and link as C++.
#include <vpmu/vpmu.h>

int main()
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *vcpu = nullptr;

	vpmu_config_init(&cfg);
	if (vpmu_vcpu_new(&cfg, &vcpu) != 0)
		return 1;
	vpmu_vcpu_free(vcpu);
	return vpmu_model_count() > 0 ? 0 : 1;
}
