/* The public headers must build as strict C99 (checked at compile time). */
#include <vpmu/bits.h>
#include <vpmu/msr.h>
#include <vpmu/pebs.h>
#include <vpmu/vpmu.h>
#include <vpmu/walk.h>

int header_c99_probe(void);
int header_c99_probe(void)
{
	struct vpmu_config cfg;
	struct vpmu_walk_result w;

	vpmu_config_init(&cfg);
	w.len = VPMU_FIELD_GET(APIC_LVT_DELIVERY_MODE, APIC_LVT_MASKED) + DS_PEBS_INDEX;
	return cfg.nr_gp + (int) w.len + (int) pebs3_gpr_offset(PEBS_R8);
}
