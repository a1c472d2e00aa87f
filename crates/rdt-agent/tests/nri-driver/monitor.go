package main

// The per-pod monitor groups scenario (-monitor-pods N): the agent runs with --monitoring;
// each pod's containers, once started, are in <class group>/mon_groups/<pod uid>, which the
// run directory's nri-pods.json records with the pod's namespace, name, QoS class, labels
// and containers; a group of a pod's name that another tool made is left alone; the group
// goes with the pod's last container, or with the pod (StopPodSandbox, RemovePodSandbox),
// or, for a pod removed while the agent was killed, at the next agent's synchronization.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

type monSummary struct {
	Pods        int     `json:"pods"`
	Grouped     int     `json:"grouped"`
	Recorded    int     `json:"recorded"`
	ForeignKept bool    `json:"foreign_kept"`
	Removed     int     `json:"removed"`
	PerPodMs    float64 `json:"per_pod_ms"`
	GroupedP50  float64 `json:"grouped_p50_ms"`
	GroupedMax  float64 `json:"grouped_max_ms"`
	AgentExit   string  `json:"agent_exit"`
}

type monPod struct {
	pod   *api.PodSandbox
	ctrs  []*api.Container
	group string // <class group>/mon_groups/<uid>, relative to the resctrl root
}

// tasksOf reads a group's tasks ("" when it is not there).
func tasksOf(rel string) (map[string]bool, bool) {
	b, err := os.ReadFile(filepath.Join(resctrlRoot, rel, "tasks"))
	if err != nil {
		return nil, false
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out[l] = true
		}
	}
	return out, true
}

func waitUntil(what string, ok func() bool) {
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			fail("%s: not within 15 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type record struct {
	Version int `json:"version"`
	Pods    []struct {
		UID        string            `json:"uid"`
		Namespace  string            `json:"namespace"`
		Name       string            `json:"name"`
		Qos        string            `json:"qos"`
		Labels     map[string]string `json:"labels"`
		Containers []struct {
			Name string `json:"name"`
			Pid  uint32 `json:"pid"`
		} `json:"containers"`
		MonGroups []string `json:"mon_groups"`
	} `json:"pods"`
}

func readRecord(runDir string) record {
	var r record
	b, err := os.ReadFile(filepath.Join(runDir, "nri-pods.json"))
	if err != nil {
		fail("the pod record: %v", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		fail("the pod record: %v", err)
	}
	return r
}

// startPod creates and starts pod's containers as a runtime with runc would: each
// process joins the group its closID names, then PostStartContainer.
func startPod(ctx context.Context, nri *adaptation.Adaptation, r *runtime, pod *api.PodSandbox, names ...string) monPod {
	m, _ := startPodTimed(ctx, nri, r, pod, names...)
	return m
}

// startPodTimed is startPod, with the time of its last PostStartContainer's return.
func startPodTimed(ctx context.Context, nri *adaptation.Adaptation, r *runtime, pod *api.PodSandbox, names ...string) (monPod, time.Time) {
	var started time.Time
	m := monPod{pod: pod}
	for _, name := range names {
		c := newContainer(pod, name, nil)
		rpl, err := create(ctx, nri, r, pod, c)
		if err != nil {
			fail("creating %s: %v", name, err)
		}
		closID := rpl.GetAdjust().GetLinux().GetRdt().GetClosId().GetValue()
		c.Pid = spawn()
		if err := os.WriteFile(filepath.Join(resctrlRoot, closID, "tasks"), []byte(fmt.Sprint(c.Pid)), 0o644); err != nil {
			fail("runc's join of %q: %v", closID, err)
		}
		if err := nri.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: c}); err != nil {
			fail("PostStartContainer %s: %v", name, err)
		}
		started = time.Now()
		m.ctrs = append(m.ctrs, c)
		m.group = filepath.Join(closID, "mon_groups", pod.Uid)
	}
	return m, started
}

// grouped: every container's task of m is in its group, and nothing else.
func grouped(m monPod) bool {
	tasks, ok := tasksOf(m.group)
	if !ok {
		return false
	}
	for _, c := range m.ctrs {
		if !tasks[fmt.Sprint(c.Pid)] {
			return false
		}
	}
	return len(tasks) == len(m.ctrs)
}

// endContainer: its process exits, then the runtime stops and removes it.
func endContainer(ctx context.Context, nri *adaptation.Adaptation, r *runtime, c *api.Container) {
	if p, err := os.FindProcess(int(c.Pid)); err == nil {
		_ = p.Signal(syscall.SIGKILL)
		_, _ = p.Wait()
	}
	remove(ctx, nri, r, c.Id)
}

func monitorScenario(ctx context.Context, nri *adaptation.Adaptation, r *runtime, argv []string, sock string, n int, runDir string) {
	var sum monSummary
	a := startAgent(argv, sock)
	waitSync(r, a, "monitoring start")

	// another tool's monitor group, named like the pod that comes next
	foreign := newPod("guaranteed", nil)
	foreignGroup := filepath.Join(groupPrefix+"gold", "mon_groups", foreign.Uid)
	if err := os.Mkdir(filepath.Join(resctrlRoot, foreignGroup), 0o755); err != nil {
		fail("another tool's monitor group: %v", err)
	}
	fm := startPod(ctx, nri, r, foreign, "app")

	// each pod started, then the time until its group holds both its containers' tasks
	// (from the last PostStartContainer's return; polled every 0.2 ms)
	t0 := time.Now()
	var pods []monPod
	var lat []time.Duration
	for i := 0; i < n; i++ {
		pod := newPod(qosList[i%3], nil)
		pod.Namespace = fmt.Sprintf("ns-%d", i)
		pod.Labels = map[string]string{"app": fmt.Sprintf("app-%d", i), "tier": qosList[i%3]}
		m, started := startPodTimed(ctx, nri, r, pod, "app", "sidecar")
		deadline := started.Add(15 * time.Second)
		for !grouped(m) {
			if time.Now().After(deadline) {
				fail("pod %s's monitor group: not within 15 s", m.pod.Name)
			}
			time.Sleep(200 * time.Microsecond)
		}
		lat = append(lat, time.Since(started))
		pods = append(pods, m)
		sum.Grouped++
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sum.GroupedP50 = float64(lat[len(lat)/2].Microseconds()) / 1000
	sum.GroupedMax = float64(lat[len(lat)-1].Microseconds()) / 1000
	sum.Pods = n
	sum.PerPodMs = float64(time.Since(t0).Microseconds()) / 1000 / float64(n)
	note("%d pods: each one's 2 containers in its monitor group, %.2f ms per pod", n, sum.PerPodMs)

	// the record names every pod's group, namespace, name, QoS class, labels, containers
	waitUntil("the pod record", func() bool {
		rec := readRecord(runDir)
		found := 0
		for _, m := range pods {
			for _, p := range rec.Pods {
				if p.UID == m.pod.Uid && len(p.MonGroups) == 1 && p.MonGroups[0] == m.group &&
					p.Namespace == m.pod.Namespace && p.Name == m.pod.Name &&
					p.Labels["app"] == m.pod.Labels["app"] && len(p.Containers) == 2 {
					found++
				}
			}
		}
		sum.Recorded = found
		return found == n
	})

	// the other tool's group: untouched (empty), not recorded as the plugin's
	tasks, ok := tasksOf(foreignGroup)
	sum.ForeignKept = ok && len(tasks) == 0
	for _, p := range readRecord(runDir).Pods {
		if p.UID == foreign.Uid && len(p.MonGroups) > 0 {
			fail("another tool's group recorded as the plugin's: %v", p.MonGroups)
		}
	}
	endContainer(ctx, nri, r, fm.ctrs[0])

	// pod 0: one container removed, the group stays; the last, it goes
	endContainer(ctx, nri, r, pods[0].ctrs[0])
	time.Sleep(300 * time.Millisecond)
	if _, ok := tasksOf(pods[0].group); !ok {
		fail("pod 0's group went with its first container")
	}
	endContainer(ctx, nri, r, pods[0].ctrs[1])
	waitUntil("pod 0's group removed", func() bool { _, ok := tasksOf(pods[0].group); return !ok })
	sum.Removed++

	// pod 1: its containers end, then StopPodSandbox and RemovePodSandbox
	for _, c := range pods[1].ctrs {
		if p, err := os.FindProcess(int(c.Pid)); err == nil {
			_ = p.Signal(syscall.SIGKILL)
			_, _ = p.Wait()
		}
	}
	if err := nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pods[1].pod}); err != nil {
		fail("StopPodSandbox: %v", err)
	}
	if err := nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pods[1].pod}); err != nil {
		fail("RemovePodSandbox: %v", err)
	}
	waitUntil("pod 1's group removed", func() bool { _, ok := tasksOf(pods[1].group); return !ok })
	sum.Removed++
	r.mu.Lock()
	for _, c := range pods[1].ctrs {
		delete(r.ctrs, c.Id)
		delete(r.want, c.Id)
	}
	delete(r.pods, pods[1].pod.Id)
	r.mu.Unlock()

	// the agent is killed; pod 2 ends while it is away: the next agent's synchronization
	// removes its group (recorded as the plugin's), and keeps the others with their tasks
	a.kill()
	for _, c := range pods[2].ctrs {
		if p, err := os.FindProcess(int(c.Pid)); err == nil {
			_ = p.Signal(syscall.SIGKILL)
			_, _ = p.Wait()
		}
	}
	r.mu.Lock()
	for _, c := range pods[2].ctrs {
		delete(r.ctrs, c.Id)
		delete(r.want, c.Id)
	}
	delete(r.pods, pods[2].pod.Id)
	r.mu.Unlock()
	a = startAgent(argv, sock)
	waitSync(r, a, "monitoring restart")
	waitUntil("pod 2's group removed after the restart", func() bool { _, ok := tasksOf(pods[2].group); return !ok })
	sum.Removed++
	for _, m := range pods[3:] {
		tasks, ok := tasksOf(m.group)
		if !ok || len(tasks) != len(m.ctrs) {
			fail("after the restart, pod %s's group: %v %v", m.pod.Name, ok, tasks)
		}
	}
	if tasks, ok := tasksOf(foreignGroup); !ok || len(tasks) != 0 {
		fail("another tool's group after the restart: %v %v", ok, tasks)
	}

	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.done:
		sum.AgentExit = fmt.Sprint(err)
	case <-time.After(20 * time.Second):
		a.kill()
		fail("the agent did not end on SIGTERM")
	}
	out, _ := json.Marshal(sum)
	fmt.Println(string(out))
}
