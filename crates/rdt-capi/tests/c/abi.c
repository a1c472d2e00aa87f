/* Prints the size of every structure of pqos.h and the offset and size of each field, one
 * per line: "struct SIZE" and "struct.field OFFSET SIZE" (tests/abi.rs compares them with
 * intel-cmt-cat v26.03's numbers). */
#include <stddef.h>
#include <stdio.h>

#include "pqos.h"

#define S(s) printf(#s " %zu\n", sizeof(struct s))
#define F(s, f)                                                                          \
        printf(#s "." #f " %zu %zu\n", offsetof(struct s, f), sizeof(((struct s *)0)->f))

int main(void)
{
        S(pqos_config);
        F(pqos_config, fd_log);
        F(pqos_config, callback_log);
        F(pqos_config, context_log);
        F(pqos_config, verbose);
        F(pqos_config, interface);

        S(pqos_cap_l3ca);
        F(pqos_cap_l3ca, mem_size);
        F(pqos_cap_l3ca, num_classes);
        F(pqos_cap_l3ca, num_ways);
        F(pqos_cap_l3ca, way_size);
        F(pqos_cap_l3ca, way_contention);
        F(pqos_cap_l3ca, cdp);
        F(pqos_cap_l3ca, cdp_on);
        F(pqos_cap_l3ca, non_contiguous_cbm);
        F(pqos_cap_l3ca, iordt);
        F(pqos_cap_l3ca, iordt_on);

        S(pqos_cap_l2ca);
        F(pqos_cap_l2ca, mem_size);
        F(pqos_cap_l2ca, num_classes);
        F(pqos_cap_l2ca, num_ways);
        F(pqos_cap_l2ca, way_size);
        F(pqos_cap_l2ca, way_contention);
        F(pqos_cap_l2ca, cdp);
        F(pqos_cap_l2ca, cdp_on);
        F(pqos_cap_l2ca, non_contiguous_cbm);

        S(pqos_cap_mba);
        F(pqos_cap_mba, mem_size);
        F(pqos_cap_mba, num_classes);
        F(pqos_cap_mba, throttle_max);
        F(pqos_cap_mba, throttle_step);
        F(pqos_cap_mba, is_linear);
        F(pqos_cap_mba, ctrl);
        F(pqos_cap_mba, ctrl_on);
        F(pqos_cap_mba, mba40);
        F(pqos_cap_mba, mba40_on);

        S(pqos_monitor);
        F(pqos_monitor, type);
        F(pqos_monitor, max_rmid);
        F(pqos_monitor, scale_factor);
        F(pqos_monitor, counter_length);
        F(pqos_monitor, iordt);

        S(pqos_cap_mon);
        F(pqos_cap_mon, mem_size);
        F(pqos_cap_mon, max_rmid);
        F(pqos_cap_mon, l3_size);
        F(pqos_cap_mon, num_events);
        F(pqos_cap_mon, iordt);
        F(pqos_cap_mon, iordt_on);
        F(pqos_cap_mon, snc_num);
        F(pqos_cap_mon, snc_mode);
        F(pqos_cap_mon, events);

        S(pqos_capability);
        F(pqos_capability, type);
        F(pqos_capability, u);
        F(pqos_capability, u.mon);
        F(pqos_capability, u.smba);
        F(pqos_capability, u.generic_ptr);

        S(pqos_cap);
        F(pqos_cap, mem_size);
        F(pqos_cap, version);
        F(pqos_cap, num_cap);
        F(pqos_cap, capabilities);

        S(pqos_coreinfo);
        F(pqos_coreinfo, lcore);
        F(pqos_coreinfo, socket);
        F(pqos_coreinfo, l3_id);
        F(pqos_coreinfo, l2_id);
        F(pqos_coreinfo, l3cat_id);
        F(pqos_coreinfo, mba_id);
        F(pqos_coreinfo, numa);
        F(pqos_coreinfo, smba_id);

        S(pqos_cacheinfo);
        F(pqos_cacheinfo, detected);
        F(pqos_cacheinfo, num_ways);
        F(pqos_cacheinfo, num_sets);
        F(pqos_cacheinfo, num_partitions);
        F(pqos_cacheinfo, line_size);
        F(pqos_cacheinfo, total_size);
        F(pqos_cacheinfo, way_size);

        S(pqos_cpuinfo);
        F(pqos_cpuinfo, mem_size);
        F(pqos_cpuinfo, l2);
        F(pqos_cpuinfo, l3);
        F(pqos_cpuinfo, vendor);
        F(pqos_cpuinfo, num_cores);
        F(pqos_cpuinfo, cores);

        S(pqos_channel);
        F(pqos_channel, channel_id);
        F(pqos_channel, rmid_tagging);
        F(pqos_channel, clos_tagging);
        F(pqos_channel, cxld);
        F(pqos_channel, mmio_addr);
        F(pqos_channel, numa);

        S(pqos_dev);
        F(pqos_dev, type);
        F(pqos_dev, segment);
        F(pqos_dev, bdf);
        F(pqos_dev, channel);

        S(pqos_devinfo);
        F(pqos_devinfo, num_channels);
        F(pqos_devinfo, channels);
        F(pqos_devinfo, num_devs);
        F(pqos_devinfo, devs);

        S(pqos_cores_domains);
        F(pqos_cores_domains, num_cores);
        F(pqos_cores_domains, domains);

        S(pqos_channels_domains);
        F(pqos_channels_domains, num_channel_ids);
        F(pqos_channels_domains, channel_ids);
        F(pqos_channels_domains, domain_ids);
        F(pqos_channels_domains, domain_id_idxs);

        S(pqos_sysconfig);
        F(pqos_sysconfig, cap);
        F(pqos_sysconfig, cpu);
        F(pqos_sysconfig, dev);
        F(pqos_sysconfig, erdt);
        F(pqos_sysconfig, mrrm);
        F(pqos_sysconfig, cores_domains);
        F(pqos_sysconfig, channels_domains);

        S(pqos_event_values);
        F(pqos_event_values, llc);
        F(pqos_event_values, mbm_local);
        F(pqos_event_values, mbm_total);
        F(pqos_event_values, mbm_remote);
        F(pqos_event_values, mbm_local_delta);
        F(pqos_event_values, mbm_total_delta);
        F(pqos_event_values, mbm_remote_delta);
        F(pqos_event_values, ipc_retired);
        F(pqos_event_values, ipc_retired_delta);
        F(pqos_event_values, ipc_unhalted);
        F(pqos_event_values, ipc_unhalted_delta);
        F(pqos_event_values, ipc);
        F(pqos_event_values, llc_misses);
        F(pqos_event_values, llc_misses_delta);
        F(pqos_event_values, llc_references);
        F(pqos_event_values, llc_references_delta);

        S(pqos_region_aware_event_values);
        F(pqos_region_aware_event_values, mbm_total);
        F(pqos_region_aware_event_values, mbm_total_delta);
        F(pqos_region_aware_event_values, io_llc);
        F(pqos_region_aware_event_values, io_total);
        F(pqos_region_aware_event_values, io_total_delta);
        F(pqos_region_aware_event_values, io_miss);
        F(pqos_region_aware_event_values, io_miss_delta);

        S(pqos_mon_mem_region);
        F(pqos_mon_mem_region, region_num);
        F(pqos_mon_mem_region, num_mem_regions);

        S(pqos_mon_data);
        F(pqos_mon_data, valid);
        F(pqos_mon_data, event);
        F(pqos_mon_data, context);
        F(pqos_mon_data, values);
        F(pqos_mon_data, num_pids);
        F(pqos_mon_data, pids);
        F(pqos_mon_data, tid_nr);
        F(pqos_mon_data, tid_map);
        F(pqos_mon_data, cores);
        F(pqos_mon_data, num_cores);
        F(pqos_mon_data, channels);
        F(pqos_mon_data, num_channels);
        F(pqos_mon_data, intl);
        F(pqos_mon_data, region_values);
        F(pqos_mon_data, regions);

        S(pqos_mon_config);
        F(pqos_mon_config, l3_iordt);
        F(pqos_mon_config, snc);

        S(pqos_alloc_config);
        F(pqos_alloc_config, l3_cdp);
        F(pqos_alloc_config, l2_cdp);
        F(pqos_alloc_config, mba);
        F(pqos_alloc_config, mba40);
        F(pqos_alloc_config, l3_iordt);
        F(pqos_alloc_config, smba);
        F(pqos_alloc_config, reserved);

        S(pqos_l3ca);
        F(pqos_l3ca, domain_id);
        F(pqos_l3ca, class_id);
        F(pqos_l3ca, cdp);
        F(pqos_l3ca, u);
        F(pqos_l3ca, u.ways_mask);
        F(pqos_l3ca, u.s.data_mask);
        F(pqos_l3ca, u.s.code_mask);

        S(pqos_l2ca);
        F(pqos_l2ca, class_id);
        F(pqos_l2ca, cdp);
        F(pqos_l2ca, u);
        F(pqos_l2ca, u.ways_mask);
        F(pqos_l2ca, u.s.data_mask);
        F(pqos_l2ca, u.s.code_mask);

        S(pqos_mba_mem_region);
        F(pqos_mba_mem_region, bw_ctrl_val);
        F(pqos_mba_mem_region, region_num);

        S(pqos_mba);
        F(pqos_mba, class_id);
        F(pqos_mba, mb_max);
        F(pqos_mba, ctrl);
        F(pqos_mba, smba);
        F(pqos_mba, domain_id);
        F(pqos_mba, num_mem_regions);
        F(pqos_mba, mem_regions);

        /* enums are int-sized, as C's */
        printf("enum_pqos_mon_event %zu\n", sizeof(enum pqos_mon_event));
        printf("enum_pqos_interface %zu\n", sizeof(enum pqos_interface));
        return 0;
}
