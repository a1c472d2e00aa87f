module rdt.invalid/containerd-tools

go 1.24.0
