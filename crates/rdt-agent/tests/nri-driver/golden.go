package main

import (
	"os"
	"path/filepath"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
)

// golden writes NRI's and ttrpc's own encodings (Go, deterministic: map keys sorted) of
// messages the plugin decodes or sends, for crates/rdt-nri/tests/wire.rs.
func golden(dir string) {
	write := func(name string, m proto.Message) {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			fail("%s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".bin"), b, 0o644); err != nil {
			fail("%s: %v", name, err)
		}
	}
	// what the runtime sends: many fields the plugin does not model (skipped on decoding)
	write("create_request", &api.CreateContainerRequest{
		Pod: &api.PodSandbox{
			Id: "sandbox-1", Name: "web-0", Uid: "0a1b-2c3d", Namespace: "shop",
			Labels:         map[string]string{"app": "web"},
			Annotations:    map[string]string{"rdt.resources.beta.kubernetes.io/pod": "gold", "z": "last"},
			RuntimeHandler: "runc",
			Linux: &api.LinuxPodSandbox{
				CgroupParent: "/kubepods/burstable/pod0a1b-2c3d",
				CgroupsPath:  "/kubepods/burstable/pod0a1b-2c3d/sandbox-1",
				PodResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-3"}},
			},
			Pid: 4242,
			Ips: []string{"10.0.0.7"},
		},
		Container: &api.Container{
			Id: "ctr-1", PodSandboxId: "sandbox-1", Name: "app",
			State:       api.ContainerState_CONTAINER_CREATED,
			Annotations: map[string]string{"io.kubernetes.cri.rdt-class": "silver"},
			Args:        []string{"/bin/app", "--serve"},
			Env:         []string{"A=1"},
			Linux: &api.LinuxContainer{
				Resources: &api.LinuxResources{
					Memory:   &api.LinuxMemory{Limit: api.Int64(1 << 30)},
					RdtClass: api.String("bronze"),
				},
				CgroupsPath: "kubepods-burstable.slice:cri:ctr-1",
				Rdt:         &api.LinuxRdt{ClosId: api.String("cri-bronze"), EnableMonitoring: api.Bool(true)},
			},
			CreatedAt: 1_700_000_000,
		},
	})
	// what the plugin sends: exactly the fields it models
	write("create_response", &api.CreateContainerResponse{
		Adjust: &api.ContainerAdjustment{Linux: &api.LinuxContainerAdjustment{
			Rdt: &api.LinuxRdt{ClosId: api.String("cri-gold"), EnableMonitoring: api.Bool(true)},
		}},
	})
	write("synchronize_response", &api.SynchronizeResponse{
		Update: []*api.ContainerUpdate{{
			ContainerId:   "ctr-2",
			Linux:         &api.LinuxContainerUpdate{Resources: &api.LinuxResources{RdtClass: api.String("silver")}},
			IgnoreFailure: true,
		}},
	})
	var mask api.EventMask
	mask.Set(api.Event_CREATE_CONTAINER, api.Event_STOP_CONTAINER, api.Event_REMOVE_CONTAINER)
	write("configure_response", &api.ConfigureResponse{Events: int32(mask)})
	write("register_request", &api.RegisterPluginRequest{PluginName: "rdt", PluginIdx: "10", NRIVersion: "v0.12.5"})
	write("ttrpc_request", &ttrpc.Request{
		Service: "nri.pkg.api.v1alpha1.Runtime", Method: "RegisterPlugin",
		Payload: []byte{1, 2, 3}, TimeoutNano: 5_000_000_000,
	})
}
