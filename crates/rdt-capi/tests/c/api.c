/* A libpqos program: exercises the API on the platform the environment names (RDT_SIM=MODEL
 * or RDT_SYSROOT=DIR) through the interface given, and prints what it finds as key=value
 * lines (tests/c_api.rs compares them with pqos's and the Rust library's). Checks that must
 * hold whatever the platform print "FAIL ..." and make the exit status 1.
 *
 * usage: api IFACE(msr|os|mmio) caps|alloc|reset|mon|errors|threads|uncore|pids|follow|regions|
 *            ifaces */
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pqos.h"

static int failures;

/* intel-cmt-cat 7.1.0 renamed COS to CLOS: both names are defined, equal */
_Static_assert(PQOS_MAX_CLOS == PQOS_MAX_COS && PQOS_MAX_L3CA_CLOS == PQOS_MAX_L3CA_COS &&
                   PQOS_MAX_L2CA_CLOS == PQOS_MAX_L2CA_COS,
               "CLOS and COS names");

#define EXPECT(call, want)                                                               \
        do {                                                                             \
                int got_ = (call);                                               \
                if (got_ != (want)) {                                                    \
                        printf("FAIL %s:%d %s = %d, want %d\n", __FILE__, __LINE__, #call, \
                               got_, (want));                                            \
                        failures++;                                                      \
                }                                                                        \
        } while (0)

static const struct pqos_cap *cap;
static const struct pqos_cpuinfo *cpu;

static void init(const char *iface)
{
        struct pqos_config cfg;

        memset(&cfg, 0, sizeof(cfg));
        cfg.fd_log = STDERR_FILENO;
        cfg.verbose = 0;
        cfg.interface = strcmp(iface, "os") == 0     ? PQOS_INTER_OS
                        : strcmp(iface, "mmio") == 0 ? PQOS_INTER_MMIO
                                                     : PQOS_INTER_MSR;
        EXPECT(pqos_init(&cfg), PQOS_RETVAL_OK);
        EXPECT(pqos_init(&cfg), PQOS_RETVAL_INIT); /* one init per process */
        EXPECT(pqos_cap_get(&cap, &cpu), PQOS_RETVAL_OK);
        if (cap == NULL || cpu == NULL) {
                printf("FAIL no capabilities\n");
                exit(1);
        }
}

/* `n` is read after the call that fills it (argument order is unspecified in C). */
#define PRINT_IDS(name, call)                                                            \
        do {                                                                             \
                unsigned n_ = 0;                                                         \
                unsigned *ids_ = call;                                                   \
                print_ids(name, ids_, n_);                                               \
        } while (0)

static void print_ids(const char *name, unsigned *ids, unsigned n)
{
        printf("%s=", name);
        for (unsigned i = 0; i < n; i++)
                printf("%s%u", i ? "," : "", ids[i]);
        printf("\n");
        free(ids);
}

static int caps(void)
{
        const struct pqos_capability *item;
        const struct pqos_monitor *mon;
        enum pqos_interface iface;
        unsigned n, lcore, id;
        int sup, en;

        EXPECT(pqos_inter_get(&iface), PQOS_RETVAL_OK);
        printf("interface=%d\n", (int)iface);
        printf("version=%u num_cap=%u\n", cap->version, cap->num_cap);
        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_L3CA, &item) == PQOS_RETVAL_OK) {
                const struct pqos_cap_l3ca *c = item->u.l3ca;
                printf("l3ca num_classes=%u num_ways=%u way_size=%u contention=0x%llx cdp=%d "
                       "cdp_on=%d noncontig=%u\n",
                       c->num_classes, c->num_ways, c->way_size,
                       (unsigned long long)c->way_contention, c->cdp, c->cdp_on,
                       c->non_contiguous_cbm);
                EXPECT(pqos_l3ca_get_cos_num(cap, &n), PQOS_RETVAL_OK);
                EXPECT((int)n, (int)c->num_classes);
                n = 0; /* 7.1.0's name of the same */
                EXPECT(pqos_l3ca_get_clos_num(cap, &n), PQOS_RETVAL_OK);
                EXPECT((int)n, (int)c->num_classes);
                EXPECT(pqos_l3ca_cdp_enabled(cap, &sup, &en), PQOS_RETVAL_OK);
                EXPECT(sup, c->cdp);
                EXPECT(pqos_l3ca_cdp_enabled(cap, NULL, &en), PQOS_RETVAL_OK);
                EXPECT(pqos_l3ca_iordt_enabled(cap, &sup, &en), PQOS_RETVAL_OK);
                EXPECT(pqos_l3ca_get_min_cbm_bits(&n), PQOS_RETVAL_OK);
                printf("l3ca min_cbm_bits=%u\n", n);
        } else {
                EXPECT(pqos_l3ca_get_cos_num(cap, &n), PQOS_RETVAL_RESOURCE);
                EXPECT(pqos_l3ca_get_clos_num(cap, &n), PQOS_RETVAL_RESOURCE);
        }
        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_L2CA, &item) == PQOS_RETVAL_OK) {
                const struct pqos_cap_l2ca *c = item->u.l2ca;
                printf("l2ca num_classes=%u num_ways=%u way_size=%u cdp=%d cdp_on=%d\n",
                       c->num_classes, c->num_ways, c->way_size, c->cdp, c->cdp_on);
                EXPECT(pqos_l2ca_get_cos_num(cap, &n), PQOS_RETVAL_OK);
                EXPECT((int)n, (int)c->num_classes);
                EXPECT(pqos_l2ca_get_clos_num(cap, &n), PQOS_RETVAL_OK);
                EXPECT((int)n, (int)c->num_classes);
                EXPECT(pqos_l2ca_cdp_enabled(cap, &sup, &en), PQOS_RETVAL_OK);
                EXPECT(pqos_l2ca_get_min_cbm_bits(&n), PQOS_RETVAL_OK);
        } else {
                EXPECT(pqos_l2ca_get_cos_num(cap, &n), PQOS_RETVAL_RESOURCE);
                EXPECT(pqos_l2ca_get_min_cbm_bits(&n), PQOS_RETVAL_RESOURCE);
        }
        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_MBA, &item) == PQOS_RETVAL_OK) {
                const struct pqos_cap_mba *c = item->u.mba;
                printf("mba num_classes=%u throttle_max=%u throttle_step=%u linear=%d ctrl=%d "
                       "ctrl_on=%d\n",
                       c->num_classes, c->throttle_max, c->throttle_step, c->is_linear,
                       c->ctrl, c->ctrl_on);
                EXPECT(pqos_mba_get_cos_num(cap, &n), PQOS_RETVAL_OK);
                EXPECT(pqos_mba_get_clos_num(cap, &n), PQOS_RETVAL_OK);
                EXPECT((int)n, (int)c->num_classes);
                EXPECT(pqos_mba_ctrl_enabled(cap, &sup, &en), PQOS_RETVAL_OK);
        }
        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_SMBA, &item) == PQOS_RETVAL_OK) {
                printf("smba num_classes=%u\n", item->u.smba->num_classes);
                EXPECT(pqos_smba_get_cos_num(cap, &n), PQOS_RETVAL_OK);
                EXPECT(pqos_smba_get_clos_num(cap, &n), PQOS_RETVAL_OK);
                EXPECT((int)n, (int)item->u.smba->num_classes);
        } else {
                EXPECT(pqos_smba_get_cos_num(cap, &n), PQOS_RETVAL_RESOURCE);
        }
        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_MON, &item) == PQOS_RETVAL_OK) {
                const struct pqos_cap_mon *m = item->u.mon;
                printf("mon max_rmid=%u l3_size=%u num_events=%u\n", m->max_rmid, m->l3_size,
                       m->num_events);
                for (unsigned i = 0; i < m->num_events; i++) {
                        printf("event type=0x%x max_rmid=%u scale=%u length=%u\n",
                               (unsigned)m->events[i].type, m->events[i].max_rmid,
                               m->events[i].scale_factor, m->events[i].counter_length);
                        EXPECT(pqos_cap_get_event(cap, m->events[i].type, &mon),
                               PQOS_RETVAL_OK);
                }
                EXPECT(pqos_cap_get_event(cap, PQOS_MON_EVENT_IO_L3_OCCUP, &mon),
                       PQOS_RETVAL_ERROR);
        }
        printf("cpu num_cores=%u vendor=%d l3_total=%u l2_total=%u\n", cpu->num_cores,
               (int)pqos_get_vendor(cpu), cpu->l3.total_size, cpu->l2.total_size);
        PRINT_IDS("sockets", pqos_cpu_get_sockets(cpu, &n_));
        PRINT_IDS("l3cat_ids", pqos_cpu_get_l3cat_ids(cpu, &n_));
        PRINT_IDS("mba_ids", pqos_cpu_get_mba_ids(cpu, &n_));
        PRINT_IDS("smba_ids", pqos_cpu_get_smba_ids(cpu, &n_));
        PRINT_IDS("l3_clusters", pqos_cpu_get_l3_clusters(cpu, &n_));
        PRINT_IDS("numa", pqos_cpu_get_numa(cpu, &n_));
        n = 0;
        unsigned *l2 = pqos_cpu_get_l2ids(cpu, &n);
        printf("l2ids_count=%u\n", n);
        pqos_free(l2);
        PRINT_IDS("cores_socket0", pqos_cpu_get_cores(cpu, 0, &n_));
        PRINT_IDS("cores_l3id0", pqos_cpu_get_cores_l3id(cpu, cpu->cores[0].l3_id, &n_));
        if (pqos_cpu_get_cores(cpu, 12345, &n) != NULL)
                printf("FAIL cores of a socket that does not exist\n"), failures++;
        EXPECT(pqos_cpu_get_one_core(cpu, 0, &lcore), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_one_core(cpu, 12345, &lcore), PQOS_RETVAL_ERROR);
        EXPECT(pqos_cpu_get_one_by_mba_id(cpu, cpu->cores[0].mba_id, &lcore), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_one_by_smba_id(cpu, cpu->cores[0].smba_id, &lcore),
               PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_one_by_numaid(cpu, cpu->cores[0].numa, &lcore), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_one_by_l3cat_id(cpu, cpu->cores[0].l3cat_id, &lcore),
               PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_one_by_l3id(cpu, cpu->cores[0].l3_id, &lcore), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_one_by_l2id(cpu, cpu->cores[0].l2_id, &lcore), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_check_core(cpu, cpu->cores[cpu->num_cores - 1].lcore), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_check_core(cpu, 100000), PQOS_RETVAL_ERROR);
        EXPECT(pqos_cpu_get_socketid(cpu, 0, &id), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_numaid(cpu, 0, &id), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_clusterid(cpu, 0, &id), PQOS_RETVAL_OK);
        EXPECT(pqos_cpu_get_socketid(cpu, 100000, &id), PQOS_RETVAL_ERROR);
        if (pqos_cpu_get_core_info(cpu, 0) == NULL || pqos_cpu_get_core_info(cpu, 100000))
                printf("FAIL pqos_cpu_get_core_info\n"), failures++;
        {
                const struct pqos_sysconfig *sys;
                EXPECT(pqos_sysconfig_get(&sys), PQOS_RETVAL_OK);
                if (sys->cap != cap || sys->cpu != cpu || sys->dev != NULL)
                        printf("FAIL sysconfig\n"), failures++;
        }
        return 0;
}

static int alloc(void)
{
        struct pqos_l3ca l3[PQOS_MAX_L3CA_COS];
        struct pqos_l2ca l2[PQOS_MAX_L2CA_COS];
        struct pqos_mba mba, actual, tab[PQOS_MAX_COS];
        const struct pqos_capability *item;
        unsigned n, cls;

        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_L3CA, &item) == PQOS_RETVAL_OK) {
                memset(l3, 0, sizeof(l3));
                l3[0].class_id = 1;
                l3[0].u.ways_mask = 0x3;
                EXPECT(pqos_l3ca_set(cpu->cores[0].l3cat_id, 1, l3), PQOS_RETVAL_OK);
                EXPECT(pqos_l3ca_get(cpu->cores[0].l3cat_id, PQOS_MAX_L3CA_COS, &n, l3),
                       PQOS_RETVAL_OK);
                for (unsigned i = 0; i < n; i++)
                        if (l3[i].class_id == 1)
                                printf("l3ca domain=%u class=1 mask=0x%llx\n",
                                       cpu->cores[0].l3cat_id,
                                       (unsigned long long)l3[i].u.ways_mask);
        }
        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_L2CA, &item) == PQOS_RETVAL_OK) {
                memset(l2, 0, sizeof(l2));
                l2[0].class_id = 1;
                l2[0].u.ways_mask = 0x3;
                EXPECT(pqos_l2ca_set(cpu->cores[0].l2_id, 1, l2), PQOS_RETVAL_OK);
                EXPECT(pqos_l2ca_get(cpu->cores[0].l2_id, PQOS_MAX_L2CA_COS, &n, l2),
                       PQOS_RETVAL_OK);
                for (unsigned i = 0; i < n; i++)
                        if (l2[i].class_id == 1)
                                printf("l2ca domain=%u class=1 mask=0x%llx\n",
                                       cpu->cores[0].l2_id,
                                       (unsigned long long)l2[i].u.ways_mask);
        }
        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_MBA, &item) == PQOS_RETVAL_OK) {
                memset(&mba, 0, sizeof(mba));
                mba.class_id = 1;
                /* Intel: percent; AMD: bandwidth units of 1/8 GB/s */
                mba.mb_max = pqos_get_vendor(cpu) == PQOS_VENDOR_INTEL ? 50 : 16;
                EXPECT(pqos_mba_set(cpu->cores[0].mba_id, 1, &mba, &actual), PQOS_RETVAL_OK);
                printf("mba actual class=%u mb_max=%u\n", actual.class_id, actual.mb_max);
                EXPECT(pqos_mba_get(cpu->cores[0].mba_id, PQOS_MAX_COS, &n, tab),
                       PQOS_RETVAL_OK);
                for (unsigned i = 0; i < n; i++)
                        if (tab[i].class_id == 1)
                                printf("mba domain=%u class=1 mb_max=%u\n",
                                       cpu->cores[0].mba_id, tab[i].mb_max);
        }
        EXPECT(pqos_alloc_assoc_set(1, 1), PQOS_RETVAL_OK);
        EXPECT(pqos_alloc_assoc_get(1, &cls), PQOS_RETVAL_OK);
        printf("core=1 class=%u\n", cls);
        {
                unsigned cores[2] = {2, 3};
                EXPECT(pqos_alloc_assign(1 << PQOS_CAP_TYPE_L3CA, cores, 2, &cls),
                       PQOS_RETVAL_OK);
                printf("assigned class=%u\n", cls);
                EXPECT(pqos_alloc_assoc_get(2, &n), PQOS_RETVAL_OK);
                EXPECT((int)n, (int)cls);
                EXPECT(pqos_alloc_release(cores, 2), PQOS_RETVAL_OK);
                EXPECT(pqos_alloc_assoc_get(3, &n), PQOS_RETVAL_OK);
                EXPECT((int)n, 0);
        }
        return 0;
}

static int reset(void)
{
        struct pqos_alloc_config cfg;
        unsigned cls;

        memset(&cfg, 0, sizeof(cfg));
        EXPECT(pqos_alloc_reset_config(&cfg), PQOS_RETVAL_OK);
        EXPECT(pqos_alloc_assoc_get(1, &cls), PQOS_RETVAL_OK);
        printf("core=1 class=%u\n", cls);
        EXPECT(pqos_mon_reset(), PQOS_RETVAL_OK);
        return 0;
}

static enum pqos_mon_event supported_events(void)
{
        const struct pqos_capability *item;
        unsigned e = 0;

        if (pqos_cap_get_type(cap, PQOS_CAP_TYPE_MON, &item) != PQOS_RETVAL_OK)
                return 0;
        for (unsigned i = 0; i < item->u.mon->num_events; i++)
                e |= item->u.mon->events[i].type;
        return (enum pqos_mon_event)(e & (PQOS_MON_EVENT_L3_OCCUP | PQOS_MON_EVENT_LMEM_BW |
                                          PQOS_MON_EVENT_TMEM_BW | PQOS_MON_EVENT_RMEM_BW |
                                          PQOS_PERF_EVENT_IPC | PQOS_PERF_EVENT_LLC_MISS));
}

static int mon(void)
{
        unsigned cores[4] = {0, 1, 2, 3};
        struct pqos_mon_data *g = NULL;
        enum pqos_mon_event ev = supported_events();
        uint64_t value, delta;
        double ipc;

        printf("events=0x%x\n", (unsigned)ev);
        EXPECT(pqos_mon_start_cores(4, cores, ev, (void *)0x1234, NULL, &g), PQOS_RETVAL_OK);
        if (g == NULL)
                return 1;
        if (g->context != (void *)0x1234 || g->num_cores != 4 || g->cores[3] != 3)
                printf("FAIL group fields\n"), failures++;
        for (int i = 0; i < 3; i++) {
                usleep(200000);
                EXPECT(pqos_mon_poll(&g, 1), PQOS_RETVAL_OK);
                printf("poll=%d llc=%llu local_delta=%llu total_delta=%llu remote_delta=%llu "
                       "ipc=%.3f misses_delta=%llu\n",
                       i, (unsigned long long)g->values.llc,
                       (unsigned long long)g->values.mbm_local_delta,
                       (unsigned long long)g->values.mbm_total_delta,
                       (unsigned long long)g->values.mbm_remote_delta, g->values.ipc,
                       (unsigned long long)g->values.llc_misses_delta);
        }
        if (ev & PQOS_MON_EVENT_LMEM_BW) {
                EXPECT(pqos_mon_get_value(g, PQOS_MON_EVENT_LMEM_BW, &value, &delta),
                       PQOS_RETVAL_OK);
                if (delta != g->values.mbm_local_delta)
                        printf("FAIL get_value\n"), failures++;
        }
        EXPECT(pqos_mon_get_value(g, PQOS_PERF_EVENT_LLC_REF, &value, &delta),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_get_ipc(g, &ipc), (ev & PQOS_PERF_EVENT_IPC) ? PQOS_RETVAL_OK
                                                                     : PQOS_RETVAL_PARAM);
        {
                /* regions are the MMIO interface's; a group started without any has none */
                enum pqos_interface iface;
                EXPECT(pqos_inter_get(&iface), PQOS_RETVAL_OK);
                EXPECT(pqos_mon_get_region_value(g, PQOS_MON_EVENT_TMEM_BW, 0, &value, &delta),
                       iface == PQOS_INTER_MMIO ? PQOS_RETVAL_PARAM : PQOS_RETVAL_RESOURCE);
        }
        /* a core already monitored */
        {
                struct pqos_mon_data *g2 = NULL;
                int ret = pqos_mon_start_cores(1, cores, ev, NULL, NULL, &g2);
                if (ret == PQOS_RETVAL_OK)
                        printf("FAIL a core monitored twice\n"), failures++;
        }
        EXPECT(pqos_mon_stop(g), PQOS_RETVAL_OK);
        /* deprecated: the program's own structure */
        {
                struct pqos_mon_data own;
                EXPECT(pqos_mon_start(2, cores, ev, NULL, &own), PQOS_RETVAL_OK);
                struct pqos_mon_data *p = &own;
                EXPECT(pqos_mon_poll(&p, 1), PQOS_RETVAL_OK);
                EXPECT(pqos_mon_stop(&own), PQOS_RETVAL_OK);
        }
        return 0;
}

static int errors(void)
{
        struct pqos_l3ca l3;
        struct pqos_mba mba;
        struct pqos_mon_data *g = NULL, fake;
        unsigned n, cores[1] = {0}, bad_core[1] = {100000};
        pqos_rmid_t rmid;

        EXPECT(pqos_init(NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_cap_get(NULL, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_inter_get(NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_sysconfig_get(NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_cap_get_type(NULL, PQOS_CAP_TYPE_L3CA, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_cap_get_type(cap, (enum pqos_cap_type)99, (const struct pqos_capability **)&g),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_l3ca_get_cos_num(NULL, &n), PQOS_RETVAL_PARAM);
        EXPECT(pqos_l3ca_get_clos_num(NULL, &n), PQOS_RETVAL_PARAM);
        EXPECT(pqos_l2ca_get_clos_num(cap, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_l3ca_cdp_enabled(cap, NULL, NULL), PQOS_RETVAL_PARAM);
        if (pqos_cpu_get_sockets(NULL, &n) != NULL)
                printf("FAIL sockets of NULL\n"), failures++;
        EXPECT(pqos_cpu_get_one_core(NULL, 0, &n), PQOS_RETVAL_PARAM);
        EXPECT((int)pqos_get_vendor(NULL), PQOS_VENDOR_UNKNOWN);
        /* bad core, bad class, bad mask, bad domain */
        EXPECT(pqos_alloc_assoc_set(100000, 0), PQOS_RETVAL_PARAM);
        EXPECT(pqos_alloc_assoc_set(0, 1000), PQOS_RETVAL_PARAM);
        EXPECT(pqos_alloc_assoc_get(100000, &n), PQOS_RETVAL_PARAM);
        EXPECT(pqos_alloc_assoc_get(0, NULL), PQOS_RETVAL_PARAM);
        memset(&l3, 0, sizeof(l3));
        l3.class_id = 1000;
        l3.u.ways_mask = 0x3;
        EXPECT(pqos_l3ca_set(cpu->cores[0].l3cat_id, 1, &l3), PQOS_RETVAL_PARAM);
        l3.class_id = 1;
        l3.u.ways_mask = 0;
        EXPECT(pqos_l3ca_set(cpu->cores[0].l3cat_id, 1, &l3), PQOS_RETVAL_PARAM);
        l3.u.ways_mask = 0x3;
        EXPECT(pqos_l3ca_set(99999, 1, &l3), PQOS_RETVAL_PARAM);
        l3.cdp = 1; /* CDP masks while CDP is off */
        EXPECT(pqos_l3ca_set(cpu->cores[0].l3cat_id, 1, &l3), PQOS_RETVAL_PARAM);
        EXPECT(pqos_l3ca_set(cpu->cores[0].l3cat_id, 1, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_l3ca_set(cpu->cores[0].l3cat_id, 0, &l3), PQOS_RETVAL_PARAM);
        EXPECT(pqos_l3ca_get(cpu->cores[0].l3cat_id, 16, NULL, &l3), PQOS_RETVAL_PARAM);
        EXPECT(pqos_l3ca_get(cpu->cores[0].l3cat_id, 1, &n, &l3), PQOS_RETVAL_PARAM);
        memset(&mba, 0, sizeof(mba));
        mba.class_id = 1;
        mba.mb_max = 0;
        {
                /* (on MMIO an entry names regions: one naming none changes nothing) */
                enum pqos_interface iface;
                pqos_inter_get(&iface);
                if (pqos_mba_get_cos_num(cap, &n) == PQOS_RETVAL_OK && iface != PQOS_INTER_MMIO)
                        EXPECT(pqos_mba_set(cpu->cores[0].mba_id, 1, &mba, NULL),
                               PQOS_RETVAL_PARAM);
        }
        EXPECT(pqos_mba_set(0, 1, NULL, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mba_get(0, 16, NULL, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_alloc_assign(0, cores, 1, &n), PQOS_RETVAL_PARAM);
        EXPECT(pqos_alloc_assign(1 << PQOS_CAP_TYPE_L3CA, NULL, 1, &n), PQOS_RETVAL_PARAM);
        EXPECT(pqos_alloc_release(NULL, 1), PQOS_RETVAL_PARAM);
        EXPECT(pqos_alloc_reset((enum pqos_cdp_config)7, PQOS_REQUIRE_CDP_ANY, PQOS_MBA_ANY),
               PQOS_RETVAL_PARAM);
        /* monitoring */
        EXPECT(pqos_mon_start_cores(1, bad_core, PQOS_MON_EVENT_L3_OCCUP, NULL, NULL, &g),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_cores(1, cores, (enum pqos_mon_event)0, NULL, NULL, &g),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_cores(1, cores, PQOS_MON_EVENT_IO_L3_OCCUP, NULL, NULL, &g),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_cores(0, cores, PQOS_MON_EVENT_L3_OCCUP, NULL, NULL, &g),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_cores(1, NULL, PQOS_MON_EVENT_L3_OCCUP, NULL, NULL, &g),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_cores(1, cores, PQOS_MON_EVENT_L3_OCCUP, NULL, NULL, NULL),
               PQOS_RETVAL_PARAM);
        memset(&fake, 0, sizeof(fake));
        g = &fake;
        EXPECT(pqos_mon_poll(&g, 1), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_poll(NULL, 1), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_stop(&fake), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_stop(NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_get_value(NULL, PQOS_MON_EVENT_L3_OCCUP, NULL, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_get_ipc(NULL, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_assoc_get(0, NULL), PQOS_RETVAL_PARAM);
        /* not built: absent hardware */
        EXPECT(pqos_mon_start_channels(1, (pqos_channel_t *)cores, PQOS_MON_EVENT_L3_OCCUP,
                                       NULL, &g),
               PQOS_RETVAL_RESOURCE);
        EXPECT(pqos_mon_start_dev(0, 0, 0, PQOS_MON_EVENT_L3_OCCUP, NULL, &g),
               PQOS_RETVAL_RESOURCE);
        EXPECT(pqos_mon_assoc_get_channel(1, &rmid), PQOS_RETVAL_RESOURCE);
        EXPECT(pqos_mon_assoc_get_dev(0, 0, 0, &rmid), PQOS_RETVAL_RESOURCE);
        EXPECT(pqos_alloc_assoc_set_channel(1, 0), PQOS_RETVAL_RESOURCE);
        EXPECT(pqos_alloc_assoc_get_channel(1, &n), PQOS_RETVAL_RESOURCE);
        EXPECT(pqos_alloc_assoc_set_dev(0, 0, 0, 0), PQOS_RETVAL_RESOURCE);
        EXPECT(pqos_alloc_assoc_get_dev(0, 0, 0, &n), PQOS_RETVAL_RESOURCE);
        EXPECT(pqos_dump(NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_io_devs_get(NULL, 0, 0), PQOS_RETVAL_PARAM);
        {
                /* the CHA's events are the MSR side's: xeon-rdt13 has skylake-sp's CPUID */
                enum pqos_interface iface;
                pqos_inter_get(&iface);
                if (iface != PQOS_INTER_MMIO)
                        EXPECT(pqos_mon_start_uncore(1, cores, PQOS_PERF_EVENT_LLC_MISS_PCIE_READ,
                                                     NULL, &g),
                               PQOS_RETVAL_RESOURCE);
        }
        if (pqos_devinfo_get_channel(NULL, 1) != NULL ||
            pqos_devinfo_get_channel_ids(NULL, 0, 0, &n) != NULL ||
            pqos_devinfo_get_channel_id(NULL, 0, 0, 0) != 0)
                printf("FAIL devinfo\n"), failures++;
        EXPECT(pqos_mon_reset_config(NULL), PQOS_RETVAL_OK);
        {
                /* no model run here has Sub-NUMA Clustering: refused; out of the enum: PARAM */
                struct pqos_mon_config mc = {PQOS_REQUIRE_IORDT_ANY, PQOS_REQUIRE_SNC_LOCAL};
                EXPECT(pqos_mon_reset_config(&mc), PQOS_RETVAL_RESOURCE);
                mc.snc = PQOS_REQUIRE_SNC_ANY;
                mc.l3_iordt = (enum pqos_iordt_config)7;
                EXPECT(pqos_mon_reset_config(&mc), PQOS_RETVAL_PARAM);
        }
        if (strcmp(pqos_retval_to_string(PQOS_RETVAL_PARAM), "invalid parameter") != 0)
                printf("FAIL retval_to_string\n"), failures++;
        /* tasks: the OS interface only */
        {
                enum pqos_interface iface;
                pid_t self = getpid();
                pqos_inter_get(&iface);
                if (iface == PQOS_INTER_MSR || iface == PQOS_INTER_MMIO) {
                        EXPECT(pqos_alloc_assoc_set_pid(self, 1), PQOS_RETVAL_INTER);
                        EXPECT(pqos_mon_start_pids2(1, &self, PQOS_MON_EVENT_L3_OCCUP, NULL, &g),
                               PQOS_RETVAL_INTER);
                } else {
                        EXPECT(pqos_alloc_assoc_set_pid(self, 1), PQOS_RETVAL_OK);
                        EXPECT(pqos_alloc_assoc_get_pid(self, &n), PQOS_RETVAL_OK);
                        EXPECT((int)n, 1);
                        unsigned *tasks = pqos_pid_get_pid_assoc(1, &n);
                        if (tasks == NULL || n < 1)
                                printf("FAIL tasks of COS1\n"), failures++;
                        free(tasks);
                        EXPECT(pqos_alloc_release_pid(&self, 1), PQOS_RETVAL_OK);
                        EXPECT(pqos_alloc_assoc_set_pid(-5, 1), PQOS_RETVAL_PARAM);
                        g = NULL;
                        EXPECT(pqos_mon_start_pids2(1, &self, PQOS_MON_EVENT_L3_OCCUP, NULL, &g),
                               PQOS_RETVAL_OK);
                        if (g != NULL) {
                                EXPECT(pqos_mon_poll(&g, 1), PQOS_RETVAL_OK);
                                pid_t other = getppid();
                                EXPECT(pqos_mon_add_pids(1, &other, g), PQOS_RETVAL_OK);
                                EXPECT((int)g->num_pids, 2);
                                EXPECT(pqos_mon_remove_pids(1, &other, g), PQOS_RETVAL_OK);
                                EXPECT(pqos_mon_remove_pids(1, &self, g), PQOS_RETVAL_PARAM);
                                EXPECT(pqos_mon_stop(g), PQOS_RETVAL_OK);
                        }
                }
        }
        return 0;
}

#define PCIE_EVENTS                                                                     \
        (PQOS_PERF_EVENT_LLC_MISS_PCIE_READ | PQOS_PERF_EVENT_LLC_MISS_PCIE_WRITE |       \
         PQOS_PERF_EVENT_LLC_REF_PCIE_READ | PQOS_PERF_EVENT_LLC_REF_PCIE_WRITE)

/* Uncore (socket) monitoring: the MSR interface of a platform with the CHA's PCIe events
 * (skylake-sp); every poll's reading is the previous one plus its delta, and the traffic
 * of the cores' workloads shows in every event. */
static int uncore(void)
{
        static const enum pqos_mon_event each[4] = {
            PQOS_PERF_EVENT_LLC_MISS_PCIE_READ, PQOS_PERF_EVENT_LLC_MISS_PCIE_WRITE,
            PQOS_PERF_EVENT_LLC_REF_PCIE_READ, PQOS_PERF_EVENT_LLC_REF_PCIE_WRITE};
        unsigned sockets[2] = {0, 99};
        struct pqos_mon_data *g = NULL, *g2 = NULL;
        enum pqos_interface iface;
        uint64_t last[4] = {0, 0, 0, 0};

        EXPECT(pqos_mon_start_uncore(0, sockets, PCIE_EVENTS, NULL, &g), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_uncore(1, NULL, PCIE_EVENTS, NULL, &g), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_uncore(1, sockets, PCIE_EVENTS, NULL, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_uncore(1, sockets, PQOS_MON_EVENT_L3_OCCUP, NULL, &g),
               PQOS_RETVAL_PARAM);
        pqos_inter_get(&iface);
        if (iface != PQOS_INTER_MSR) { /* the CHA counters are MSRs: absent here */
                EXPECT(pqos_mon_start_uncore(1, sockets, PCIE_EVENTS, NULL, &g),
                       PQOS_RETVAL_RESOURCE);
                return 0;
        }
        EXPECT(pqos_mon_start_uncore(1, &sockets[1], PCIE_EVENTS, NULL, &g), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_start_uncore(1, sockets, PCIE_EVENTS, (void *)0x55, &g), PQOS_RETVAL_OK);
        if (g == NULL)
                return 1;
        if (g->context != (void *)0x55 || g->event != PCIE_EVENTS)
                printf("FAIL uncore group fields\n"), failures++;
        /* one group per socket (they share the CHA counters) */
        EXPECT(pqos_mon_start_uncore(1, sockets, PCIE_EVENTS, NULL, &g2), PQOS_RETVAL_RESOURCE);
        for (int i = 0; i < 3; i++) {
                usleep(200000);
                EXPECT(pqos_mon_poll(&g, 1), PQOS_RETVAL_OK);
                printf("uncore_poll=%d", i);
                for (int e = 0; e < 4; e++) {
                        uint64_t value = 0, delta = 0;
                        EXPECT(pqos_mon_get_value(g, each[e], &value, &delta), PQOS_RETVAL_OK);
                        printf(" value%d=%llu delta%d=%llu", e, (unsigned long long)value, e,
                               (unsigned long long)delta);
                        if (value != last[e] + delta || delta == 0)
                                printf(" FAIL"), failures++;
                        last[e] = value;
                }
                printf("\n");
        }
        EXPECT(pqos_mon_get_value(g, PQOS_MON_EVENT_L3_OCCUP, NULL, NULL), PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_stop(g), PQOS_RETVAL_OK);
        /* the socket is free again */
        EXPECT(pqos_mon_start_uncore(1, sockets, PQOS_PERF_EVENT_LLC_REF_PCIE_READ, NULL, &g2),
               PQOS_RETVAL_OK);
        if (g2 != NULL)
                EXPECT(pqos_mon_stop(g2), PQOS_RETVAL_OK);
        return 0;
}

/* Keeps this thread on the CPU for `ms` milliseconds (the simulated resctrl charges a
 * task's real CPU time to its group). */
static void busy(long ms)
{
        struct timespec t0, t;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
                clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* A task group's values go on across pqos_mon_add_pids / pqos_mon_remove_pids as in
 * libpqos (the tasks change, the group's counts do not restart): after the first poll
 * (whose bandwidth delta is 0, valid_mbm_read), each poll's reading is the previous one
 * plus its delta, and the delta after a change is not a first read's 0. */
static int pids(void)
{
        pid_t self = getpid(), parent = getppid();
        struct pqos_mon_data *g = NULL;
        enum pqos_mon_event ev = supported_events() & PQOS_MON_EVENT_TMEM_BW;
        uint64_t total = 0;

        if (ev == 0)
                return printf("FAIL no total bandwidth event\n"), 1;
        EXPECT(pqos_mon_start_pids2(1, &self, ev, NULL, &g), PQOS_RETVAL_OK);
        if (g == NULL)
                return 1;
        for (int i = 0; i < 4; i++) {
                busy(300);
                if (i == 2)
                        EXPECT(pqos_mon_add_pids(1, &parent, g), PQOS_RETVAL_OK);
                if (i == 3)
                        EXPECT(pqos_mon_remove_pids(1, &parent, g), PQOS_RETVAL_OK);
                busy(300);
                EXPECT(pqos_mon_poll(&g, 1), PQOS_RETVAL_OK);
                printf("pids_poll=%d num_pids=%u total=%llu total_delta=%llu\n", i, g->num_pids,
                       (unsigned long long)g->values.mbm_total,
                       (unsigned long long)g->values.mbm_total_delta);
                if (i > 0 && g->values.mbm_total != total + g->values.mbm_total_delta)
                        printf("FAIL reading %d is not the previous one plus its delta\n", i),
                            failures++;
                if (i > 0 && g->values.mbm_total_delta == 0)
                        printf("FAIL no bandwidth in interval %d\n", i), failures++;
                total = g->values.mbm_total;
        }
        EXPECT((int)g->num_pids, 1);
        EXPECT(pqos_mon_stop(g), PQOS_RETVAL_OK);
        return 0;
}

static void *spin(void *ms)
{
        busy((long)(intptr_t)ms);
        return NULL;
}

/* A pid group follows the threads its processes start later, as libpqos's OS interface
 * does (the kernel puts a new thread in its creator's resctrl group): this process's main
 * thread in the group, mostly idle, polls twice 400 ms apart without, then with a thread
 * started after pqos_mon_start_pids that keeps a CPU busy; the group's bandwidth over the
 * second pair is that thread's on top of what the first pair saw. */
static int follow(void)
{
        pid_t self = getpid();
        struct pqos_mon_data g;
        struct pqos_mon_data *gp = &g;
        enum pqos_mon_event ev = supported_events() & PQOS_MON_EVENT_TMEM_BW;
        uint64_t delta[2] = {0, 0};
        pthread_t t;

        if (ev == 0)
                return printf("FAIL no total bandwidth event\n"), 1;
        memset(&g, 0, sizeof(g));
        EXPECT(pqos_mon_start_pids(1, &self, ev, NULL, &g), PQOS_RETVAL_OK);
        EXPECT(pqos_mon_poll(&gp, 1), PQOS_RETVAL_OK);
        for (int phase = 0; phase < 2; phase++) {
                if (phase == 1)
                        pthread_create(&t, NULL, spin, (void *)(intptr_t)800);
                for (int i = 0; i < 2; i++) {
                        usleep(400000);
                        EXPECT(pqos_mon_poll(&gp, 1), PQOS_RETVAL_OK);
                        delta[phase] += g.values.mbm_total_delta;
                }
        }
        pthread_join(t, NULL);
        printf("follow_without=%llu\nfollow_with=%llu\n", (unsigned long long)delta[0],
               (unsigned long long)delta[1]);
        EXPECT(pqos_mon_stop(&g), PQOS_RETVAL_OK);
        return 0;
}

#define THREADS 8
#define ROUNDS  25

static struct pqos_mon_data *groups[THREADS];

static void *worker(void *arg)
{
        unsigned i = (unsigned)(uintptr_t)arg;
        for (int r = 0; r < ROUNDS; r++) {
                EXPECT(pqos_mon_poll(&groups[i], 1), PQOS_RETVAL_OK);
                EXPECT(pqos_alloc_assoc_set(cpu->cores[i + THREADS].lcore, (unsigned)(r % 2)),
                       PQOS_RETVAL_OK);
        }
        return NULL;
}

static int threads(void)
{
        pthread_t t[THREADS];
        enum pqos_mon_event ev = supported_events();

        if (cpu->num_cores < 2 * THREADS)
                return printf("FAIL too few cores\n"), 1;
        for (unsigned i = 0; i < THREADS; i++) {
                unsigned core = cpu->cores[i].lcore;
                EXPECT(pqos_mon_start_cores(1, &core, ev, NULL, NULL, &groups[i]),
                       PQOS_RETVAL_OK);
        }
        for (unsigned i = 0; i < THREADS; i++)
                pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
        for (unsigned i = 0; i < THREADS; i++)
                pthread_join(t[i], NULL);
        EXPECT(pqos_mon_poll(groups, THREADS), PQOS_RETVAL_OK);
        for (unsigned i = 0; i < THREADS; i++)
                EXPECT(pqos_mon_stop(groups[i]), PQOS_RETVAL_OK);
        printf("threads=%d rounds=%d\n", THREADS, ROUNDS);
        return 0;
}

/* Region-aware MBM and MBA of the MMIO interface (RDT 1.3) on the simulated xeon-rdt13,
 * whose workload on CPUs 2-10 sends 70 % of its memory traffic to DDR (region 0) and 30 % to
 * CXL (region 1): the C API must show that split, a maximum-bandwidth limit on the CXL
 * region must lower only that region's traffic, and pqos_alloc_reset must restore it. */
#define MAX_REGION_COS 64
#define MAX_DOMAINS 8

/* The slot of `region` in the group's region_values. */
static int slot_of(const struct pqos_mon_data *g, int region)
{
        for (int j = 0; j < g->regions.num_mem_regions; j++)
                if (g->regions.region_num[j] == region)
                        return j;
        printf("FAIL region %d not in the group\n", region), failures++;
        return 0;
}

/* Bytes to DDR (region 0) and CXL (region 1) over the last of three polls (the first
 * poll's deltas are 0), as pqos_mon_get_region_value gives them and region_values has them. */
static void region_traffic(struct pqos_mon_data *g, double *ddr, double *cxl)
{
        uint64_t value = 0, delta = 0;
        int s0 = slot_of(g, 0), s1 = slot_of(g, 1);

        for (int i = 0; i < 3; i++) {
                usleep(300000);
                EXPECT(pqos_mon_poll(&g, 1), PQOS_RETVAL_OK);
        }
        EXPECT(pqos_mon_get_region_value(g, PQOS_MON_EVENT_TMEM_BW, 0, &value, &delta),
               PQOS_RETVAL_OK);
        if (delta != g->region_values.mbm_total_delta[s0] ||
            value != g->region_values.mbm_total[s0])
                printf("FAIL region 0 value\n"), failures++;
        *ddr = (double)delta;
        EXPECT(pqos_mon_get_region_value(g, PQOS_MON_EVENT_TMEM_BW, 1, NULL, &delta),
               PQOS_RETVAL_OK);
        if (delta != g->region_values.mbm_total_delta[s1])
                printf("FAIL region 1 value\n"), failures++;
        *cxl = (double)delta;
}

/* COS1's three controls of `region` in domain `id` (pqos_mba_get); -1s when unreadable. */
static void region_controls(uint16_t id, int region, int out[PQOS_BW_CTRL_TYPE_COUNT])
{
        static struct pqos_mba tab[MAX_REGION_COS];
        unsigned n = 0;

        memset(tab, 0, sizeof(tab));
        for (int t = 0; t < PQOS_BW_CTRL_TYPE_COUNT; t++)
                out[t] = -1;
        tab[0].domain_id = id;
        EXPECT(pqos_mba_get(0, MAX_REGION_COS, &n, tab), PQOS_RETVAL_OK);
        if (n < 2)
                return;
        for (int j = 0; j < tab[1].num_mem_regions; j++)
                if (tab[1].mem_regions[j].region_num == region)
                        for (int t = 0; t < PQOS_BW_CTRL_TYPE_COUNT; t++)
                                out[t] = tab[1].mem_regions[j].bw_ctrl_val[t];
}

static int regions(void)
{
        unsigned cores[9] = {2, 3, 4, 5, 6, 7, 8, 9, 10};
        struct pqos_mon_mem_region both = {{0, 1, 0, 0}, 2};
        struct pqos_mon_mem_region bad;
        struct pqos_mon_data *g = NULL, *g2 = NULL;
        static struct pqos_mba tab[MAX_REGION_COS];
        struct pqos_mba req[2], act[2];
        enum pqos_interface iface;
        uint16_t ids[MAX_DOMAINS];
        unsigned nids = 0, n = 0;
        double ddr, cxl, ddr2, cxl2, ddr3, cxl3;
        int c[PQOS_BW_CTRL_TYPE_COUNT], window;
        uint64_t value;

        EXPECT(pqos_inter_get(&iface), PQOS_RETVAL_OK);
        EXPECT((int)iface, PQOS_INTER_MMIO);

        /* the CPU domains: the ids pqos_mba_get answers for (others are PARAM) */
        for (unsigned id = 0; id < 64 && nids < MAX_DOMAINS; id++) {
                memset(tab, 0, sizeof(tab));
                tab[0].domain_id = (uint16_t)id;
                int ret = pqos_mba_get(0, MAX_REGION_COS, &n, tab);
                if (ret == PQOS_RETVAL_OK)
                        ids[nids++] = (uint16_t)id;
                else
                        EXPECT(ret, PQOS_RETVAL_PARAM);
        }
        printf("domains n=%u", nids);
        for (unsigned i = 0; i < nids; i++)
                printf("%s%u", i ? "," : " ids=", ids[i]);
        printf("\n");
        if (nids == 0)
                return printf("FAIL no region MBA domain\n"), 1;
        memset(tab, 0, sizeof(tab));
        tab[0].domain_id = ids[0];
        EXPECT(pqos_mba_get(0, MAX_REGION_COS, &n, tab), PQOS_RETVAL_OK);
        EXPECT(pqos_mba_get(0, 1, &n, tab), PQOS_RETVAL_ERROR); /* too small a table */
        tab[0].num_mem_regions = 5;
        EXPECT(pqos_mba_get(0, MAX_REGION_COS, &n, tab), PQOS_RETVAL_PARAM);
        tab[0].num_mem_regions = 0;
        EXPECT(pqos_mba_get(0, MAX_REGION_COS, &n, tab), PQOS_RETVAL_OK);
        window = tab[1].mem_regions[1].bw_ctrl_val[PQOS_BW_CTRL_TYPE_MAX_IDX];
        printf("region_classes=%u num_mem_regions=%d region1=%d window=0x%x min=0x%x\n", n,
               tab[1].num_mem_regions, tab[1].mem_regions[1].region_num, window,
               tab[1].mem_regions[1].bw_ctrl_val[PQOS_BW_CTRL_TYPE_MIN_IDX]);
        EXPECT(tab[1].num_mem_regions, 2);
        EXPECT(tab[1].mem_regions[1].region_num, 1);
        EXPECT(tab[1].mem_regions[2].region_num, -1);
        EXPECT((int)tab[1].class_id, 1);
        EXPECT(tab[1].domain_id, ids[0]);

        /* bad region lists */
        bad = both;
        bad.region_num[1] = 7;
        EXPECT(pqos_mon_start_cores(9, cores, PQOS_MON_EVENT_TMEM_BW, NULL, &bad, &g2),
               PQOS_RETVAL_PARAM);
        bad.region_num[1] = 0;
        EXPECT(pqos_mon_start_cores(9, cores, PQOS_MON_EVENT_TMEM_BW, NULL, &bad, &g2),
               PQOS_RETVAL_PARAM);
        bad.num_mem_regions = 5;
        EXPECT(pqos_mon_start_cores(9, cores, PQOS_MON_EVENT_TMEM_BW, NULL, &bad, &g2),
               PQOS_RETVAL_PARAM);

        EXPECT(pqos_mon_start_cores(9, cores, PQOS_MON_EVENT_TMEM_BW | PQOS_MON_EVENT_L3_OCCUP,
                                    NULL, &both, &g),
               PQOS_RETVAL_OK);
        if (g == NULL)
                return 1;
        EXPECT(g->regions.num_mem_regions, 2);
        EXPECT(g->regions.region_num[1], 1);
        region_traffic(g, &ddr, &cxl);
        printf("split ddr=%.0f cxl=%.0f share=%.4f\n", ddr, cxl, ddr / (ddr + cxl));
        if (ddr <= 0 || cxl <= 0 || ddr / (ddr + cxl) < 0.68 || ddr / (ddr + cxl) > 0.72)
                printf("FAIL the 70/30 DDR/CXL split\n"), failures++;
        EXPECT(pqos_mon_get_region_value(g, PQOS_MON_EVENT_TMEM_BW, 2, &value, NULL),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_get_region_value(g, PQOS_MON_EVENT_LMEM_BW, 0, &value, NULL),
               PQOS_RETVAL_PARAM);
        EXPECT(pqos_mon_get_region_value(g, PQOS_MON_EVENT_L3_OCCUP, 1, &value, NULL),
               PQOS_RETVAL_OK);
        if (value != g->values.llc)
                printf("FAIL occupancy through get_region_value\n"), failures++;

        /* bad requests change nothing: a good entry with a bad one is not applied */
        memset(req, 0, sizeof(req));
        for (int i = 0; i < 2; i++) {
                req[i].class_id = 1;
                req[i].domain_id = ids[0];
                req[i].num_mem_regions = 1;
                req[i].mem_regions[0].region_num = 1;
                for (int t = 0; t < PQOS_BW_CTRL_TYPE_COUNT; t++)
                        req[i].mem_regions[0].bw_ctrl_val[t] = -1;
                req[i].mem_regions[0].bw_ctrl_val[PQOS_BW_CTRL_TYPE_MAX_IDX] = 0x10;
        }
        req[1].mem_regions[0].bw_ctrl_val[PQOS_BW_CTRL_TYPE_MAX_IDX] = window + 1;
        EXPECT(pqos_mba_set(0, 2, req, act), PQOS_RETVAL_PARAM);
        req[1].mem_regions[0].bw_ctrl_val[PQOS_BW_CTRL_TYPE_MAX_IDX] = 0x10;
        req[1].mem_regions[0].region_num = 5;
        EXPECT(pqos_mba_set(0, 2, req, act), PQOS_RETVAL_PARAM);
        req[1].mem_regions[0].region_num = 1;
        req[1].domain_id = 999;
        EXPECT(pqos_mba_set(0, 2, req, act), PQOS_RETVAL_PARAM);
        req[1].domain_id = ids[0];
        req[1].class_id = 1000;
        EXPECT(pqos_mba_set(0, 2, req, act), PQOS_RETVAL_PARAM);
        req[1].class_id = 1;
        req[1].num_mem_regions = 3;
        EXPECT(pqos_mba_set(0, 2, req, act), PQOS_RETVAL_PARAM);
        region_controls(ids[0], 1, c);
        EXPECT(c[PQOS_BW_CTRL_TYPE_MAX_IDX], window);

        /* the workload's cores in COS1, whose CXL maximum is a quarter of the window
         * (0x7f of 0x1ff) in every CPU domain */
        for (unsigned i = 0; i < 9; i++)
                EXPECT(pqos_alloc_assoc_set(cores[i], 1), PQOS_RETVAL_OK);
        for (unsigned d = 0; d < nids; d++) {
                req[0].domain_id = ids[d];
                req[0].mem_regions[0].bw_ctrl_val[PQOS_BW_CTRL_TYPE_MAX_IDX] = 0x7f;
                memset(act, 0, sizeof(act));
                EXPECT(pqos_mba_set(0, 1, req, act), PQOS_RETVAL_OK);
                EXPECT(act[0].mem_regions[0].bw_ctrl_val[PQOS_BW_CTRL_TYPE_MAX_IDX], 0x7f);
                EXPECT(act[0].mem_regions[0].bw_ctrl_val[PQOS_BW_CTRL_TYPE_OPT_IDX], window);
                EXPECT(act[0].domain_id, ids[d]);
        }
        region_controls(ids[0], 1, c);
        EXPECT(c[PQOS_BW_CTRL_TYPE_MAX_IDX], 0x7f);
        region_controls(ids[0], 0, c);
        EXPECT(c[PQOS_BW_CTRL_TYPE_MAX_IDX], window);
        region_traffic(g, &ddr2, &cxl2);
        /* Deltas are over wall-clock poll intervals (usleep), whose length a loaded machine
         * stretches: CXL is judged against DDR of the same interval (the split moves by the
         * limit alone), DDR against the first interval only loosely (not limited with it). */
        double cxl_of_ddr = (cxl2 / ddr2) / (cxl / ddr);
        printf("limited ddr=%.0f cxl=%.0f ddr_ratio=%.4f cxl_ratio=%.4f cxl_of_ddr=%.4f "
               "quarter=%.4f\n",
               ddr2, cxl2, ddr2 / ddr, cxl2 / cxl, cxl_of_ddr, (double)0x7f / window);
        if (ddr2 / ddr < 0.9 || ddr2 / ddr > 1.1)
                printf("FAIL DDR traffic changed\n"), failures++;
        if (cxl_of_ddr - (double)0x7f / window < -0.02 ||
            cxl_of_ddr - (double)0x7f / window > 0.02)
                printf("FAIL CXL traffic not limited to a quarter\n"), failures++;

        /* reset: every region control back to the window, the cores to COS0 */
        EXPECT(pqos_alloc_reset(PQOS_REQUIRE_CDP_ANY, PQOS_REQUIRE_CDP_ANY, PQOS_MBA_ANY),
               PQOS_RETVAL_OK);
        region_controls(ids[0], 1, c);
        EXPECT(c[PQOS_BW_CTRL_TYPE_MAX_IDX], window);
        EXPECT(pqos_alloc_assoc_get(2, &n), PQOS_RETVAL_OK);
        EXPECT((int)n, 0);
        region_traffic(g, &ddr3, &cxl3);
        printf("reset ddr=%.0f cxl=%.0f cxl_ratio=%.4f cxl_of_ddr=%.4f\n", ddr3, cxl3,
               cxl3 / cxl, (cxl3 / ddr3) / (cxl / ddr));
        if ((cxl3 / ddr3) / (cxl / ddr) < 0.98 || (cxl3 / ddr3) / (cxl / ddr) > 1.02)
                printf("FAIL CXL traffic not restored\n"), failures++;
        EXPECT(pqos_mon_stop(g), PQOS_RETVAL_OK);

        /* slots follow the order given: CXL first, then DDR */
        {
                struct pqos_mon_mem_region swapped = {{1, 0, 0, 0}, 2};
                double r1, r0;
                g = NULL;
                EXPECT(pqos_mon_start_cores(9, cores, PQOS_MON_EVENT_TMEM_BW, NULL, &swapped,
                                            &g),
                       PQOS_RETVAL_OK);
                if (g == NULL)
                        return 1;
                region_traffic(g, &r0, &r1);
                printf("swapped slot0=%llu slot1=%llu\n",
                       (unsigned long long)g->region_values.mbm_total_delta[0],
                       (unsigned long long)g->region_values.mbm_total_delta[1]);
                if ((double)g->region_values.mbm_total_delta[0] != r1 ||
                    (double)g->region_values.mbm_total_delta[1] != r0 || r1 / (r0 + r1) < 0.28 ||
                    r1 / (r0 + r1) > 0.32)
                        printf("FAIL region slots in the order given\n"), failures++;
                EXPECT(pqos_mon_stop(g), PQOS_RETVAL_OK);
        }
        return 0;
}

/* pqos_get_available_interfaces, in priority order; a capacity of 1 gives the first. */
static int ifaces(void)
{
        enum pqos_interface list[8];
        unsigned n = 8;

        EXPECT(pqos_get_available_interfaces(list, &n), PQOS_RETVAL_OK);
        printf("interfaces=");
        for (unsigned i = 0; i < n; i++)
                printf("%s%d", i ? "," : "", (int)list[i]);
        printf("\n");
        n = 1;
        EXPECT(pqos_get_available_interfaces(list, &n), PQOS_RETVAL_OK);
        EXPECT((int)n, 1);
        n = 0;
        EXPECT(pqos_get_available_interfaces(list, &n), PQOS_RETVAL_PARAM);
        EXPECT(pqos_get_available_interfaces(NULL, &n), PQOS_RETVAL_PARAM);
        return 0;
}

int main(int argc, char **argv)
{
        int ret;

        if (argc != 3)
                return fprintf(stderr,
                               "usage: %s msr|os|mmio caps|alloc|reset|mon|errors|threads|uncore|"
                               "pids|follow|regions|ifaces\n",
                               argv[0]),
                       2;
        /* before init */
        EXPECT(pqos_cap_get(&cap, &cpu), PQOS_RETVAL_INIT);
        EXPECT(pqos_fini(), PQOS_RETVAL_INIT);
        init(argv[1]);
        if (strcmp(argv[2], "caps") == 0)
                ret = caps();
        else if (strcmp(argv[2], "alloc") == 0)
                ret = alloc();
        else if (strcmp(argv[2], "reset") == 0)
                ret = reset();
        else if (strcmp(argv[2], "mon") == 0)
                ret = mon();
        else if (strcmp(argv[2], "errors") == 0)
                ret = errors();
        else if (strcmp(argv[2], "threads") == 0)
                ret = threads();
        else if (strcmp(argv[2], "uncore") == 0)
                ret = uncore();
        else if (strcmp(argv[2], "pids") == 0)
                ret = pids();
        else if (strcmp(argv[2], "follow") == 0)
                ret = follow();
        else if (strcmp(argv[2], "regions") == 0)
                ret = regions();
        else if (strcmp(argv[2], "ifaces") == 0)
                ret = ifaces();
        else
                ret = 2;
        EXPECT(pqos_fini(), PQOS_RETVAL_OK);
        printf("failures=%d\n", failures);
        return ret != 0 || failures != 0;
}
