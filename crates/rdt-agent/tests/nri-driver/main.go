// nri-driver: the runtime side of NRI, as containerd and CRI-O embed it
// (github.com/containerd/nri/pkg/adaptation), driving `rdt-agent nri` through the
// scenario of crates/rdt-agent/tests/nri.rs. It keeps the containers as a runtime
// would (the adjustments and updates the plugin returns are applied to them) and
// checks every answer of the plugin; it exits 1 with the first mismatch.
//
//	nri-driver [-kill-trials N] [-measure N] -- AGENT ARGS...   (AGENT gets --socket SOCK)
//	nri-driver golden DIR                                      (wire-compatibility bytes)
//
// The class rules checked here are the plugin's contract, written down again from
// goresctrl (pkg/kubernetes/annotations.go) and kubelet's cgroup layout, not read from
// the plugin's code.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

const (
	containerKey = "io.kubernetes.cri.rdt-class"
	podKey       = "rdt.resources.beta.kubernetes.io/pod"
	perCtrPrefix = "rdt.resources.beta.kubernetes.io/container."
	groupPrefix  = "cri-"
)

// The QoS mapping the test gives the agent (--qos-class).
var qosClass = map[string]string{"guaranteed": "gold", "burstable": "silver", "besteffort": "bronze"}

var qosList = []string{"guaranteed", "burstable", "besteffort"}

type runtime struct {
	mu    sync.Mutex
	pods  map[string]*api.PodSandbox
	ctrs  map[string]*api.Container
	want  map[string]string // container id -> class it must end in ("" = no class)
	syncs chan []*api.ContainerUpdate
}

func (r *runtime) snapshot() ([]*api.PodSandbox, []*api.Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, p := range r.pods {
		pods = append(pods, p)
	}
	for _, c := range r.ctrs {
		ctrs = append(ctrs, c)
	}
	sort.Slice(ctrs, func(i, j int) bool { return ctrs[i].Id < ctrs[j].Id })
	return pods, ctrs
}

// apply makes the updates as a runtime would: the container's RDT class.
func (r *runtime) apply(updates []*api.ContainerUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range updates {
		c := r.ctrs[u.ContainerId]
		if c == nil || u.GetLinux().GetResources().GetRdtClass() == nil {
			continue
		}
		if c.Linux == nil {
			c.Linux = &api.LinuxContainer{}
		}
		if c.Linux.Resources == nil {
			c.Linux.Resources = &api.LinuxResources{}
		}
		c.Linux.Resources.RdtClass = api.String(u.Linux.Resources.RdtClass.GetValue())
		// the class now comes from the RDT class: the old closID is gone
		c.Linux.Rdt = nil
	}
}

// sleepers are the processes standing for containers' tasks (killed at the end).
var sleepers []*exec.Cmd

// spawn starts a process standing for a container's task: its pid.
func spawn() uint32 {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		fail("starting a task: %v", err)
	}
	sleepers = append(sleepers, cmd)
	return uint32(cmd.Process.Pid)
}

func reapSleepers() {
	for _, c := range sleepers {
		_ = c.Process.Kill()
		_, _ = c.Process.Wait()
	}
}

// resctrlRoot is the tree the agent writes (-resctrl).
var resctrlRoot string

// groupOfPid is the class whose group's tasks hold pid ("" for the root group, "?" when
// none does).
func groupOfPid(pid uint32) string {
	want := fmt.Sprint(pid)
	for _, g := range append([]string{""}, groupNames()...) {
		b, err := os.ReadFile(filepath.Join(resctrlRoot, g, "tasks"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(l) == want {
				return strings.TrimPrefix(g, groupPrefix)
			}
		}
	}
	return "?"
}

func groupNames() []string {
	entries, err := os.ReadDir(resctrlRoot)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "info" && e.Name() != "mon_groups" && e.Name() != "mon_data" {
			out = append(out, e.Name())
		}
	}
	return out
}

// classOf is the class a container is in: its closID's class, else its RDT class, else
// (a container created while the plugin was away, repaired by it) the group whose tasks
// hold its process.
func classOf(c *api.Container) string {
	if id := c.GetLinux().GetRdt().GetClosId(); id != nil {
		return strings.TrimPrefix(id.GetValue(), groupPrefix)
	}
	if rc := c.GetLinux().GetResources().GetRdtClass(); rc != nil {
		return rc.GetValue()
	}
	if c.Pid != 0 && resctrlRoot != "" {
		return groupOfPid(c.Pid)
	}
	return ""
}

// waitPlaced waits (10 s at most) until every container is in its class.
func waitPlaced(r *runtime, what string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		bad := ""
		r.mu.Lock()
		for id, want := range r.want {
			if c := r.ctrs[id]; c != nil && classOf(c) != want {
				bad = fmt.Sprintf("container %s (%s) in class %q, want %q", id, c.Name, classOf(c), want)
				break
			}
		}
		r.mu.Unlock()
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			fail("%s: %s after 10 s", what, bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "nri-driver: FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func note(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "nri-driver: "+format+"\n", args...)
}

var seq int

func newPod(qos string, annotations map[string]string) *api.PodSandbox {
	seq++
	uid := fmt.Sprintf("%08d-0000-4000-8000-000000000000", seq)
	var parent string
	switch {
	case qos == "guaranteed" && seq%2 == 0:
		parent = "/kubepods/pod" + uid
	case qos == "guaranteed":
		parent = "kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	case seq%2 == 0:
		parent = "/kubepods/" + qos + "/pod" + uid
	default:
		parent = "kubepods-" + qos + "-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	}
	return &api.PodSandbox{
		Id:          fmt.Sprintf("pod-%d", seq),
		Name:        fmt.Sprintf("%s-%d", qos, seq),
		Uid:         uid,
		Namespace:   "default",
		Annotations: annotations,
		Linux:       &api.LinuxPodSandbox{CgroupParent: parent},
	}
}

func newContainer(pod *api.PodSandbox, name string, annotations map[string]string) *api.Container {
	seq++
	return &api.Container{
		Id:           fmt.Sprintf("ctr-%04d", seq),
		PodSandboxId: pod.Id,
		Name:         name,
		State:        api.ContainerState_CONTAINER_RUNNING,
		Annotations:  annotations,
	}
}

type agent struct {
	cmd  *exec.Cmd
	done chan error
}

func startAgent(argv []string, sock string) *agent {
	args := append(append([]string{}, argv[1:]...), "--socket", sock)
	cmd := exec.Command(argv[0], args...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fail("starting the agent: %v", err)
	}
	a := &agent{cmd: cmd, done: make(chan error, 1)}
	go func() { a.done <- cmd.Wait() }()
	return a
}

func (a *agent) kill() {
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
}

func waitSync(r *runtime, a *agent, what string) []*api.ContainerUpdate {
	select {
	case u := <-r.syncs:
		return u
	case err := <-a.done:
		fail("%s: the agent ended before synchronizing: %v", what, err)
	case <-time.After(60 * time.Second):
		fail("%s: no synchronization in 60 s", what)
	}
	return nil
}

// checkAll: every container is in the class it must be in.
func checkAll(r *runtime, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, want := range r.want {
		c := r.ctrs[id]
		if c == nil {
			continue
		}
		if got := classOf(c); got != want {
			fail("%s: container %s (%s) in class %q, want %q", what, id, c.Name, got, want)
		}
	}
}

// create asks the runtime side to create c in pod; the adjustment is applied to c.
func create(ctx context.Context, nri *adaptation.Adaptation, r *runtime, pod *api.PodSandbox, c *api.Container) (*api.CreateContainerResponse, error) {
	r.mu.Lock()
	r.pods[pod.Id] = pod
	r.mu.Unlock()
	rpl, err := nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
	if err != nil {
		return nil, err
	}
	if rdt := rpl.GetAdjust().GetLinux().GetRdt(); rdt != nil {
		c.Linux = &api.LinuxContainer{Rdt: rdt}
	}
	r.mu.Lock()
	r.ctrs[c.Id] = c
	r.mu.Unlock()
	return rpl, nil
}

func remove(ctx context.Context, nri *adaptation.Adaptation, r *runtime, id string) {
	r.mu.Lock()
	c := r.ctrs[id]
	pod := r.pods[c.PodSandboxId]
	r.mu.Unlock()
	if _, err := nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: c}); err != nil {
		fail("stopping %s: %v", id, err)
	}
	if err := nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: c}); err != nil {
		fail("removing %s: %v", id, err)
	}
	r.mu.Lock()
	delete(r.ctrs, id)
	delete(r.want, id)
	r.mu.Unlock()
}

// tree reads the control groups of a resctrl tree: name -> schemata ("" is the root).
func tree(root string) map[string]string {
	groups := map[string]string{}
	if root == "" {
		return groups
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		fail("reading %s: %v", root, err)
	}
	for _, name := range append([]string{""}, names(entries)...) {
		b, err := os.ReadFile(filepath.Join(root, name, "schemata"))
		if err == nil {
			groups[name] = string(b)
		}
	}
	return groups
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// same: the tree is still as the classes made it (no group added, removed or rewritten).
func same(root string, want map[string]string, what string) {
	got := tree(root)
	for g, sch := range want {
		if got[g] != sch {
			fail("%s: group %q has schemata %q, want %q", what, g, got[g], sch)
		}
	}
	for g := range got {
		if _, ok := want[g]; !ok {
			fail("%s: group %q appeared", what, g)
		}
	}
	steps++
}

var steps int

type summary struct {
	Existing         int     `json:"existing"`
	FirstSyncUpdates int     `json:"first_sync_updates"`
	FirstSyncPlaced  int     `json:"first_sync_placed"`
	Created          int     `json:"created"`
	Refused          string  `json:"refused"`
	RestartSynced    int     `json:"restart_synced"`
	RestartUpdates   int     `json:"restart_updates"`
	KillTrials       int     `json:"kill_trials"`
	KillCreated      int     `json:"kill_created"`
	KillMoved        int     `json:"kill_moved"`
	Measured         int     `json:"measured"`
	P50us            float64 `json:"create_p50_us"`
	P99us            float64 `json:"create_p99_us"`
	AgentExit        string  `json:"agent_exit"`
	TreeChecks       int     `json:"tree_checks"`
	Reloaded         bool    `json:"reloaded"`
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "golden" {
		golden(os.Args[2])
		return
	}
	killTrials := flag.Int("kill-trials", 0, "SIGKILL the agent during creations this many times")
	measure := flag.Int("measure", 0, "time this many creations")
	resctrl := flag.String("resctrl", "", "the resctrl tree to check after each step")
	reloadFrom := flag.String("reload-from", "", "after the restart: copy this configuration ...")
	reloadTo := flag.String("reload-to", "", "... over the agent's, SIGHUP it, expect class platinum")
	monitorPods := flag.Int("monitor-pods", 0, "run the per-pod monitor groups scenario with this many pods instead (monitor.go)")
	runDir := flag.String("run", "", "the agent's run directory (-monitor-pods: its nri-pods.json)")
	flag.Parse()
	resctrlRoot = *resctrl
	defer reapSleepers()
	argv := flag.Args()
	if len(argv) == 0 {
		fail("usage: nri-driver [-kill-trials N] [-measure N] -- AGENT ARGS...")
	}
	dir, err := os.MkdirTemp("", "nri-driver")
	if err != nil {
		fail("tempdir: %v", err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "nri.sock")
	r := &runtime{
		pods:  map[string]*api.PodSandbox{},
		ctrs:  map[string]*api.Container{},
		want:  map[string]string{},
		syncs: make(chan []*api.ContainerUpdate, 4),
	}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		pods, ctrs := r.snapshot()
		updates, err := cb(ctx, pods, ctrs)
		if err != nil {
			return err
		}
		r.apply(updates)
		r.syncs <- updates
		return nil
	}
	updateFn := func(_ context.Context, u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		r.apply(u)
		return nil, nil
	}
	nri, err := adaptation.New("nri-driver", "v0.12.5", syncFn, updateFn,
		adaptation.WithSocketPath(sock),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")))
	if err != nil {
		fail("adaptation: %v", err)
	}
	if err := nri.Start(); err != nil {
		fail("starting the adaptation: %v", err)
	}
	// Start synchronizes the pre-installed plugins (none here): not the agent's
	<-r.syncs
	ctx := context.Background()
	if *monitorPods > 0 {
		monitorScenario(ctx, nri, r, argv, sock, *monitorPods, *runDir)
		nri.Stop()
		return
	}
	var sum summary

	// 20 containers that ran before the plugin: each QoS class, each annotation form.
	for i := 0; i < 20; i++ {
		qos := qosList[i%3]
		podAnn := map[string]string{}
		ctrAnn := map[string]string{}
		want := qosClass[qos]
		other := qosClass[qosList[(i+1)%3]]
		switch i % 4 {
		case 1:
			ctrAnn[containerKey] = other
			want = other
		case 2:
			podAnn[perCtrPrefix+"app"] = other
			want = other
		case 3:
			podAnn[podKey] = other
			want = other
		}
		pod := newPod(qos, podAnn)
		c := newContainer(pod, "app", ctrAnn)
		if *resctrl != "" {
			c.Pid = spawn()
		}
		r.pods[pod.Id] = pod
		r.ctrs[c.Id] = c
		r.want[c.Id] = want
	}
	sum.Existing = 20

	first := startAgent(argv, sock)
	updates := waitSync(r, first, "first start")
	sum.FirstSyncUpdates = len(updates)
	if len(updates) != 0 {
		fail("first synchronization: %d updates, which containerd would drop: the plugin places containers itself", len(updates))
	}
	if *resctrl != "" {
		waitPlaced(r, "after the first synchronization")
		sum.FirstSyncPlaced = 20
	}
	checkAll(r, "after the first synchronization")
	classes := tree(*resctrl)
	note("first start: 20 existing containers synchronized, their tasks moved to their classes by the plugin")

	// creations: 3 QoS classes x (3 annotation forms + none)
	for qi, qos := range qosList {
		for form := 0; form < 4; form++ {
			// never the QoS class's own: the annotation must be what decides
			other := qosClass[qosList[(qi+1+form%2)%3]]
			podAnn := map[string]string{}
			ctrAnn := map[string]string{}
			want := other
			name := fmt.Sprintf("c%d", form)
			switch form {
			case 0:
				ctrAnn[containerKey] = other
				// a weaker form naming another class must lose
				podAnn[podKey] = "gold"
				podAnn[perCtrPrefix+name] = "silver"
			case 1:
				podAnn[perCtrPrefix+name] = other
				podAnn[perCtrPrefix+"someone-else"] = "gold"
				podAnn[podKey] = "bronze"
			case 2:
				podAnn[podKey] = other
			case 3:
				want = qosClass[qos]
			}
			pod := newPod(qos, podAnn)
			c := newContainer(pod, name, ctrAnn)
			rpl, err := create(ctx, nri, r, pod, c)
			if err != nil {
				fail("creating %s of a %s pod (form %d): %v", name, qos, form, err)
			}
			got := rpl.GetAdjust().GetLinux().GetRdt()
			if got.GetClosId().GetValue() != groupPrefix+want || got.GetSchemata() != nil {
				fail("%s of a %s pod (form %d): linux.rdt %v, want closID %s%s and no schemata", name, qos, form, got, groupPrefix, want)
			}
			r.mu.Lock()
			r.want[c.Id] = want
			r.mu.Unlock()
			sum.Created++
		}
	}
	note("created %d containers: 3 QoS classes x 3 annotation forms and none, each in its class", sum.Created)

	// the root class: no linux.rdt at all
	pod := newPod("burstable", map[string]string{podKey: "system/default"})
	c := newContainer(pod, "root", nil)
	rpl, err := create(ctx, nri, r, pod, c)
	if err != nil || rpl.GetAdjust().GetLinux().GetRdt() != nil {
		fail("root class: %v, %v", rpl, err)
	}
	r.mu.Lock()
	r.want[c.Id] = ""
	r.mu.Unlock()

	// an unknown class is refused with the annotation and the classes
	pod = newPod("guaranteed", nil)
	c = newContainer(pod, "bad", map[string]string{containerKey: "platinum"})
	if _, err := create(ctx, nri, r, pod, c); err == nil {
		fail("class platinum was accepted")
	} else {
		msg := err.Error()
		for _, s := range []string{"`platinum`", containerKey, "classes: bronze, gold, silver, system/default"} {
			if !strings.Contains(msg, s) {
				fail("refusal %q lacks %q", msg, s)
			}
		}
		sum.Refused = msg
		r.mu.Lock()
		delete(r.ctrs, c.Id)
		r.mu.Unlock()
	}
	checkAll(r, "after the creations")
	same(*resctrl, classes, "after the creations")

	// restart: SIGKILL, a new agent, a synchronization that changes nothing
	first.kill()
	second := startAgent(argv, sock)
	updates = waitSync(r, second, "restart")
	_, all := r.snapshot()
	sum.RestartSynced = len(all)
	sum.RestartUpdates = len(updates)
	if len(updates) != 0 {
		fail("restart: %d updates to containers already in their classes: %v", len(updates), updates)
	}
	checkAll(r, "after the restart")
	same(*resctrl, classes, "after the restart")
	note("restart: %d containers synchronized, none moved", len(all))

	// reload: a configuration with one more class, SIGHUP, the class is there
	if *reloadFrom != "" {
		b, err := os.ReadFile(*reloadFrom)
		if err != nil {
			fail("reload: %v", err)
		}
		if err := os.WriteFile(*reloadTo, b, 0o644); err != nil {
			fail("reload: %v", err)
		}
		_ = second.cmd.Process.Signal(syscall.SIGHUP)
		deadline := time.Now().Add(20 * time.Second)
		for !sum.Reloaded {
			if time.Now().After(deadline) {
				fail("reload: class platinum still refused after 20 s")
			}
			pod := newPod("burstable", nil)
			c := newContainer(pod, "reloaded", map[string]string{containerKey: "platinum"})
			rpl, err := create(ctx, nri, r, pod, c)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if got := rpl.GetAdjust().GetLinux().GetRdt().GetClosId().GetValue(); got != groupPrefix+"platinum" {
				fail("reload: closID %q, want %splatinum", got, groupPrefix)
			}
			r.mu.Lock()
			r.want[c.Id] = "platinum"
			r.mu.Unlock()
			sum.Reloaded = true
		}
		after := tree(*resctrl)
		for g, sch := range classes {
			if after[g] != sch {
				fail("reload rewrote group %q: %q, was %q", g, after[g], sch)
			}
		}
		if _, ok := after[groupPrefix+"platinum"]; *resctrl != "" && !ok {
			fail("reload: no group %splatinum", groupPrefix)
		}
		classes = after
		note("reload: class platinum made, the other classes untouched")
	}

	// SIGKILL while containers are being created, then a restart
	rng := rand.New(rand.NewSource(26))
	cur := second
	for trial := 0; trial < *killTrials; trial++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				qos := qosList[rng.Intn(3)]
				pod := newPod(qos, nil)
				c := newContainer(pod, "k", nil)
				if *resctrl != "" {
					c.Pid = spawn()
				}
				// created with or without the plugin (a dead plugin is skipped)
				if _, err := create(ctx, nri, r, pod, c); err != nil {
					fail("trial %d: creation failed: %v", trial, err)
				}
				r.mu.Lock()
				r.want[c.Id] = qosClass[qos]
				r.mu.Unlock()
				sum.KillCreated++
			}
		}()
		time.Sleep(time.Duration(1+rng.Intn(30)) * time.Millisecond)
		cur.kill()
		close(stop)
		wg.Wait()
		cur = startAgent(argv, sock)
		updates := waitSync(r, cur, fmt.Sprintf("kill trial %d", trial))
		sum.KillMoved += len(updates)
		if *resctrl != "" {
			waitPlaced(r, fmt.Sprintf("after kill trial %d", trial))
		}
		checkAll(r, fmt.Sprintf("after kill trial %d", trial))
		same(*resctrl, classes, fmt.Sprintf("after kill trial %d", trial))
	}
	sum.KillTrials = *killTrials
	if *killTrials > 0 {
		note("%d kills during creations: %d created, %d moved by the next synchronization, all in their classes", *killTrials, sum.KillCreated, sum.KillMoved)
	}

	// creation cost
	var lat []time.Duration
	var made []string
	for i := 0; i < *measure; i++ {
		qos := qosList[i%3]
		pod := newPod(qos, nil)
		c := newContainer(pod, "m", nil)
		t0 := time.Now()
		if _, err := create(ctx, nri, r, pod, c); err != nil {
			fail("measured creation %d: %v", i, err)
		}
		lat = append(lat, time.Since(t0))
		made = append(made, c.Id)
		r.mu.Lock()
		r.want[c.Id] = qosClass[qos]
		r.mu.Unlock()
	}
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		sum.Measured = len(lat)
		sum.P50us = float64(lat[len(lat)/2].Microseconds())
		sum.P99us = float64(lat[len(lat)*99/100].Microseconds())
		checkAll(r, "after the measured creations")
		same(*resctrl, classes, "after the measured creations")
	}

	// stop and remove every container
	_, all = r.snapshot()
	for _, c := range all {
		remove(ctx, nri, r, c.Id)
	}
	note("stopped and removed %d containers", len(all))
	same(*resctrl, classes, "after the removals")

	// the runtime stops (NRI leaves external plugins connected), the agent is stopped as
	// a daemon is: SIGTERM
	nri.Stop()
	_ = cur.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-cur.done:
		sum.AgentExit = fmt.Sprint(err)
	case <-time.After(20 * time.Second):
		cur.kill()
		fail("the agent did not end on SIGTERM")
	}
	if *resctrl != "" {
		sum.TreeChecks = steps
	}
	out, _ := json.Marshal(sum)
	fmt.Println(string(out))
}
