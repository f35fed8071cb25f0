/* The public header must build as strict C99 (checked at compile time). */
#include <vpmu/vpmu.h>

int header_c99_probe(void);
int header_c99_probe(void)
{
	struct vpmu_config cfg;

	vpmu_config_init(&cfg);
	return cfg.nr_gp;
}
