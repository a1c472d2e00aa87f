// runc-wrapper: the runtime binary of the test's containerd (its runc shim's BinaryName,
// through a script that adds the flags below). It records the OCI spec each container is
// created with and does, against the simulated resctrl mount, what runc's intelRdt code
// does against /sys/fs/resctrl, which does not exist on the test machine:
//
//   - create/run: copies the bundle's config.json to RECORD/ID.json (the spec runc
//     receives, with the class the NRI plugin chose in linux.intelRdt.closID); when the
//     spec names a closID whose group is missing under RESCTRL, fails as runc does (a
//     closID without schemata must name an existing group); then removes linux.intelRdt
//     from the bundle (runc would refuse it: no resctrl mount) and remembers the closID
//     in RECORD/ID.closid;
//   - start: writes the container's init pid into RESCTRL/CLOSID/tasks before the
//     container runs its program (runc writes it while the init waits on its exec fifo:
//     the same point in the container's life), then runs runc start.
//
// Every other command goes to runc unchanged. Usage:
//
//	runc-wrapper -runc PATH -record DIR -resctrl DIR -- RUNC-ARGS...
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

var (
	runcPath = flag.String("runc", "/usr/sbin/runc", "the real runc")
	record   = flag.String("record", "", "directory for each container's spec and closID")
	resctrl  = flag.String("resctrl", "", "the simulated resctrl root (…/sys/fs/resctrl)")
)

func fail(format string, args ...any) {
	msg := fmt.Sprintf("runc-wrapper: "+format, args...)
	fmt.Fprintln(os.Stderr, msg)
	// runc's log (--log) is read by the shim on failure: leave the reason there too
	os.Exit(1)
}

// runc's global flags that take a value (runc --help, go-runc's args).
var valued = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}

// command returns the index of the subcommand in args, or -1.
func command(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return i
		}
		if valued[a] {
			i++
		}
	}
	return -1
}

// option returns the value of a subcommand flag (`--x v` or `--x=v`).
func option(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if strings.HasPrefix(a, n+"=") {
				return a[len(n)+1:]
			}
		}
	}
	return ""
}

func execRunc(args []string) {
	err := syscall.Exec(*runcPath, append([]string{"runc"}, args...), os.Environ())
	fail("exec %s: %v", *runcPath, err)
}

func create(args []string, sub int) {
	id := args[len(args)-1]
	bundle := option(args[sub+1:], "--bundle", "-b")
	if bundle == "" {
		bundle = "."
	}
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	if err := os.WriteFile(filepath.Join(*record, id+".json"), raw, 0o644); err != nil {
		fail("%v", err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		fail("%s: %v", path, err)
	}
	linux, _ := spec["linux"].(map[string]any)
	rdt, ok := linux["intelRdt"].(map[string]any)
	if !ok {
		execRunc(args)
	}
	closID, _ := rdt["closID"].(string)
	if closID == "" || strings.ContainsAny(closID, "/\x00") || closID == "." || closID == ".." {
		fail("linux.intelRdt.closID %q: this wrapper places containers in named groups only", closID)
	}
	if _, err := os.Stat(filepath.Join(*resctrl, closID)); err != nil {
		fail("intelRdt closID %q: the group does not exist (%v)", closID, err)
	}
	if err := os.WriteFile(filepath.Join(*record, id+".closid"), []byte(closID), 0o644); err != nil {
		fail("%v", err)
	}
	delete(linux, "intelRdt")
	out, err := json.Marshal(spec)
	if err != nil {
		fail("%v", err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		fail("%v", err)
	}
	execRunc(args)
}

func start(args []string, sub int) {
	id := args[len(args)-1]
	closID, err := os.ReadFile(filepath.Join(*record, id+".closid"))
	if os.IsNotExist(err) {
		execRunc(args)
	} else if err != nil {
		fail("%v", err)
	}
	state := append(append([]string{}, args[:sub]...), "state", id)
	out, err := exec.Command(*runcPath, state...).Output()
	if err != nil {
		fail("runc state %s: %v", id, err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid <= 0 {
		fail("runc state %s: no pid in %q", id, out)
	}
	tasks := filepath.Join(*resctrl, string(closID), "tasks")
	if err := os.WriteFile(tasks, []byte(strconv.Itoa(st.Pid)), 0o644); err != nil {
		fail("writing pid %d to %s: %v", st.Pid, tasks, err)
	}
	execRunc(args)
}

func main() {
	flag.Parse()
	args := flag.Args()
	if *record == "" || *resctrl == "" {
		fail("-record and -resctrl are required")
	}
	sub := command(args)
	if sub >= 0 && sub+1 < len(args) {
		switch args[sub] {
		case "create":
			create(args, sub)
		case "start":
			start(args, sub)
		}
	}
	execRunc(args)
}
