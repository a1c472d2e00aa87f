// mkimage: writes an OCI image archive (oci-layout, index.json, blobs) that `ctr images
// import` reads: one uncompressed layer holding a static binary as /pause, the entrypoint,
// named by the index's io.containerd.image.name annotation. No registry is reachable from
// the test machines, so the test's sandbox and container image is made here.
//
// Usage: mkimage BINARY NAME OUT.tar
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    map[string]string `json:"platform,omitempty"`
}

func digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func tarOf(files map[string][]byte, order []string, mode int64) []byte {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, name := range order {
		must(w.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(files[name])), ModTime: epoch, Typeflag: tar.TypeReg}))
		_, err := w.Write(files[name])
		must(err)
	}
	must(w.Close())
	return buf.Bytes()
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: mkimage BINARY NAME OUT.tar")
		os.Exit(2)
	}
	bin, err := os.ReadFile(os.Args[1])
	must(err)
	layer := tarOf(map[string][]byte{"pause": bin}, []string{"pause"}, 0o755)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/pause"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digest(layer)}},
	})
	must(err)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digest(config), Size: len(config)},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: digest(layer), Size: len(layer)}},
	})
	must(err)
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []descriptor{{
			MediaType:   "application/vnd.oci.image.manifest.v1+json",
			Digest:      digest(manifest),
			Size:        len(manifest),
			Annotations: map[string]string{"io.containerd.image.name": os.Args[2]},
			Platform:    map[string]string{"architecture": "amd64", "os": "linux"},
		}},
	})
	must(err)
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": index,
	}
	order := []string{"oci-layout", "index.json"}
	for _, b := range [][]byte{layer, config, manifest} {
		name := "blobs/sha256/" + digest(b)[len("sha256:"):]
		files[name] = b
		order = append(order, name)
	}
	must(os.WriteFile(os.Args[3], tarOf(files, order, 0o644), 0o644))
}
