/* Every exported function of libpqos v26.03 assigned to a pointer of the type Intel's pqos.h
 * gives it (prototypes copied as facts from intel-cmt-cat's lib/pqos.h): compiled with
 * -Werror, a parameter or return type that differs is an "incompatible pointer type" error.
 * tests/abi.rs compiles it and checks the list against the library's exported symbols. */
#include "pqos.h"

#define P(name, ret, args) ret(*volatile p_##name) args = name;

P(pqos_init, int, (const struct pqos_config *config))
P(pqos_fini, int, (void))
P(pqos_retval_to_string, const char *, (int retval))
P(pqos_cap_get, int, (const struct pqos_cap **cap, const struct pqos_cpuinfo **cpu))
P(pqos_sysconfig_get, int, (const struct pqos_sysconfig **sysconf))
P(pqos_inter_get, int, (enum pqos_interface *interface))
P(pqos_get_available_interfaces, int, (enum pqos_interface *interfaces, unsigned *count))
P(pqos_mon_reset, int, (void))
P(pqos_mon_reset_config, int, (const struct pqos_mon_config *cfg))
P(pqos_mon_assoc_get, int, (const unsigned lcore, pqos_rmid_t *rmid))
P(pqos_mon_assoc_get_channel, int, (const pqos_channel_t channel_id, pqos_rmid_t *rmid))
P(pqos_mon_assoc_get_dev, int,
  (const uint16_t segment, const uint16_t bdf, const unsigned vc, pqos_rmid_t *rmid))
P(pqos_mon_start, int,
  (const unsigned num_cores, const unsigned *cores, const enum pqos_mon_event event,
   void *context, struct pqos_mon_data *group))
P(pqos_mon_start_cores, int,
  (const unsigned num_cores, const unsigned *cores, const enum pqos_mon_event event,
   void *context, struct pqos_mon_mem_region *mem_region, struct pqos_mon_data **group))
P(pqos_mon_start_pid, int,
  (const pid_t pid, const enum pqos_mon_event event, void *context,
   struct pqos_mon_data *group))
P(pqos_mon_start_pids, int,
  (const unsigned num_pids, const pid_t *pids, const enum pqos_mon_event event,
   void *context, struct pqos_mon_data *group))
P(pqos_mon_start_pids2, int,
  (const unsigned num_pids, const pid_t *pids, const enum pqos_mon_event event,
   void *context, struct pqos_mon_data **group))
P(pqos_mon_add_pids, int,
  (const unsigned num_pids, const pid_t *pids, struct pqos_mon_data *group))
P(pqos_mon_remove_pids, int,
  (const unsigned num_pids, const pid_t *pids, struct pqos_mon_data *group))
P(pqos_mon_start_uncore, int,
  (const unsigned num_sockets, const unsigned *sockets, const enum pqos_mon_event event,
   void *context, struct pqos_mon_data **group))
P(pqos_mon_start_channels, int,
  (const unsigned num_channels, const pqos_channel_t *channels,
   const enum pqos_mon_event event, void *context, struct pqos_mon_data **group))
P(pqos_mon_start_dev, int,
  (const uint16_t segment, const uint16_t bdf, const uint8_t channel,
   const enum pqos_mon_event event, void *context, struct pqos_mon_data **group))
P(pqos_mon_stop, int, (struct pqos_mon_data *group))
P(pqos_mon_poll, int, (struct pqos_mon_data **groups, const unsigned num_groups))
P(pqos_alloc_assoc_set, int, (const unsigned lcore, const unsigned class_id))
P(pqos_alloc_assoc_get, int, (const unsigned lcore, unsigned *class_id))
P(pqos_alloc_assoc_set_pid, int, (const pid_t task, const unsigned class_id))
P(pqos_alloc_assoc_get_pid, int, (const pid_t task, unsigned *class_id))
P(pqos_alloc_assign, int,
  (const unsigned technology, const unsigned *core_array, const unsigned core_num,
   unsigned *class_id))
P(pqos_alloc_release, int, (const unsigned *core_array, const unsigned core_num))
P(pqos_alloc_assign_pid, int,
  (const unsigned technology, const pid_t *task_array, const unsigned task_num,
   unsigned *class_id))
P(pqos_alloc_release_pid, int, (const pid_t *task_array, const unsigned task_num))
P(pqos_alloc_reset, int,
  (const enum pqos_cdp_config l3_cdp_cfg, const enum pqos_cdp_config l2_cdp_cfg,
   const enum pqos_mba_config mba_cfg))
P(pqos_alloc_reset_config, int, (const struct pqos_alloc_config *cfg))
P(pqos_l3ca_set, int,
  (const unsigned l3cat_id, const unsigned num_cos, const struct pqos_l3ca *ca))
P(pqos_l3ca_get, int,
  (const unsigned l3cat_id, const unsigned max_num_ca, unsigned *num_ca,
   struct pqos_l3ca *ca))
P(pqos_l3ca_get_min_cbm_bits, int, (unsigned *min_cbm_bits))
P(pqos_l2ca_set, int, (const unsigned l2id, const unsigned num_cos, const struct pqos_l2ca *ca))
P(pqos_l2ca_get, int,
  (const unsigned l2id, const unsigned max_num_ca, unsigned *num_ca, struct pqos_l2ca *ca))
P(pqos_l2ca_get_min_cbm_bits, int, (unsigned *min_cbm_bits))
P(pqos_mba_set, int,
  (const unsigned mba_id, const unsigned num_cos, const struct pqos_mba *requested,
   struct pqos_mba *actual))
P(pqos_mba_get, int,
  (const unsigned mba_id, const unsigned max_num_cos, unsigned *num_cos,
   struct pqos_mba *mba_tab))
P(pqos_alloc_assoc_get_channel, int, (const pqos_channel_t channel, unsigned *class_id))
P(pqos_alloc_assoc_get_dev, int,
  (const uint16_t segment, const uint16_t bdf, const unsigned vc, unsigned *class_id))
P(pqos_alloc_assoc_set_channel, int, (const pqos_channel_t channel, const unsigned class_id))
P(pqos_alloc_assoc_set_dev, int,
  (const uint16_t segment, const uint16_t bdf, const unsigned vc, const unsigned class_id))
P(pqos_devinfo_get_channel_id, pqos_channel_t,
  (const struct pqos_devinfo *devinfo, const uint16_t segment, const uint16_t bdf,
   const unsigned vc))
P(pqos_devinfo_get_channel_ids, pqos_channel_t *,
  (const struct pqos_devinfo *devinfo, const uint16_t segment, const uint16_t bdf,
   unsigned *num_channels))
P(pqos_devinfo_get_channel, const struct pqos_channel *,
  (const struct pqos_devinfo *dev, const pqos_channel_t channel_id))
P(pqos_cpu_get_mba_ids, unsigned *, (const struct pqos_cpuinfo *cpu, unsigned *count))
P(pqos_cpu_get_smba_ids, unsigned *, (const struct pqos_cpuinfo *cpu, unsigned *count))
P(pqos_cpu_get_l3cat_ids, unsigned *, (const struct pqos_cpuinfo *cpu, unsigned *count))
P(pqos_cpu_get_sockets, unsigned *, (const struct pqos_cpuinfo *cpu, unsigned *count))
P(pqos_cpu_get_numa, unsigned *, (const struct pqos_cpuinfo *cpu, unsigned *count))
P(pqos_cpu_get_l2ids, unsigned *, (const struct pqos_cpuinfo *cpu, unsigned *count))
P(pqos_cpu_get_l3_clusters, unsigned *, (const struct pqos_cpuinfo *cpu, unsigned *count))
P(pqos_cpu_get_cores_l3id, unsigned *,
  (const struct pqos_cpuinfo *cpu, const unsigned l3_id, unsigned *count))
P(pqos_cpu_get_cores, unsigned *,
  (const struct pqos_cpuinfo *cpu, const unsigned socket, unsigned *count))
P(pqos_pid_get_pid_assoc, unsigned *, (const unsigned class_id, unsigned *count))
P(pqos_cpu_get_one_by_mba_id, int,
  (const struct pqos_cpuinfo *cpu, const unsigned mba_id, unsigned *lcore))
P(pqos_cpu_get_one_by_smba_id, int,
  (const struct pqos_cpuinfo *cpu, const unsigned smba_id, unsigned *lcore))
P(pqos_cpu_get_core_info, const struct pqos_coreinfo *,
  (const struct pqos_cpuinfo *cpu, unsigned lcore))
P(pqos_cpu_get_one_core, int,
  (const struct pqos_cpuinfo *cpu, const unsigned socket, unsigned *lcore))
P(pqos_cpu_get_one_by_numaid, int,
  (const struct pqos_cpuinfo *cpu, const unsigned numaid, unsigned *lcore))
P(pqos_cpu_get_one_by_l3cat_id, int,
  (const struct pqos_cpuinfo *cpu, const unsigned l3cat_id, unsigned *lcore))
P(pqos_cpu_get_one_by_l3id, int,
  (const struct pqos_cpuinfo *cpu, const unsigned l3id, unsigned *lcore))
P(pqos_cpu_get_one_by_l2id, int,
  (const struct pqos_cpuinfo *cpu, const unsigned l2id, unsigned *lcore))
P(pqos_cpu_check_core, int, (const struct pqos_cpuinfo *cpu, const unsigned lcore))
P(pqos_cpu_get_socketid, int,
  (const struct pqos_cpuinfo *cpu, const unsigned lcore, unsigned *socket))
P(pqos_cpu_get_numaid, int,
  (const struct pqos_cpuinfo *cpu, const unsigned lcore, unsigned *numa))
P(pqos_cpu_get_clusterid, int,
  (const struct pqos_cpuinfo *cpu, const unsigned lcore, unsigned *cluster))
P(pqos_cap_get_type, int,
  (const struct pqos_cap *cap, const enum pqos_cap_type type,
   const struct pqos_capability **cap_item))
P(pqos_cap_get_event, int,
  (const struct pqos_cap *cap, const enum pqos_mon_event event,
   const struct pqos_monitor **p_mon))
P(pqos_l3ca_get_cos_num, int, (const struct pqos_cap *cap, unsigned *cos_num))
P(pqos_l2ca_get_cos_num, int, (const struct pqos_cap *cap, unsigned *cos_num))
P(pqos_mba_get_cos_num, int, (const struct pqos_cap *cap, unsigned *cos_num))
P(pqos_smba_get_cos_num, int, (const struct pqos_cap *cap, unsigned *cos_num))
/* the same under intel-cmt-cat 7.1.0's names (COS renamed CLOS) */
P(pqos_l3ca_get_clos_num, int, (const struct pqos_cap *cap, unsigned *clos_num))
P(pqos_l2ca_get_clos_num, int, (const struct pqos_cap *cap, unsigned *clos_num))
P(pqos_mba_get_clos_num, int, (const struct pqos_cap *cap, unsigned *clos_num))
P(pqos_smba_get_clos_num, int, (const struct pqos_cap *cap, unsigned *clos_num))
P(pqos_l3ca_cdp_enabled, int,
  (const struct pqos_cap *cap, int *cdp_supported, int *cdp_enabled))
P(pqos_l3ca_iordt_enabled, int, (const struct pqos_cap *cap, int *supported, int *enabled))
P(pqos_l2ca_cdp_enabled, int,
  (const struct pqos_cap *cap, int *cdp_supported, int *cdp_enabled))
P(pqos_mba_ctrl_enabled, int,
  (const struct pqos_cap *cap, int *ctrl_supported, int *ctrl_enabled))
P(pqos_get_vendor, enum pqos_vendor, (const struct pqos_cpuinfo *cpu))
P(pqos_mon_get_value, int,
  (const struct pqos_mon_data *const group, const enum pqos_mon_event event_id,
   uint64_t *value, uint64_t *delta))
P(pqos_mon_get_region_value, int,
  (const struct pqos_mon_data *const group, const enum pqos_mon_event event_id,
   int region_num, uint64_t *value, uint64_t *delta))
P(pqos_mon_get_ipc, int, (const struct pqos_mon_data *const group, double *value))
P(pqos_mon_get_tel_value, int,
  (const struct pqos_mon_data *group, const enum pqos_mon_event event, double *value))
P(pqos_free, void, (void *ptr))
P(pqos_dump, int, (const struct pqos_mmio_dump *dump_cfg))
P(pqos_dump_rmids, int, (const struct pqos_mmio_dump_rmids *dump_cfg))
P(pqos_io_devs_get, int, (struct pqos_pci_info *pci_info, uint16_t segment, uint16_t bdf))

/* The callback type of pqos_config, as Intel's header spells it. */
static void log_cb(void *context, const size_t size, const char *message)
{
        (void)context;
        (void)size;
        (void)message;
}
struct pqos_config cfg_check = {.callback_log = log_cb};

int main(void)
{
        return 0;
}
