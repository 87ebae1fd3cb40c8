package ingest

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// FeatureCUDAIPC is advertised in the status reply's "features" by a
// sidecar that accepts notifications naming GPU memory (docs/PROTOCOL.md
// §4.1): only then may a producer send them.
const FeatureCUDAIPC = "cuda_ipc"

// IPCHandleBytes is the size of a CUDA IPC memory or event handle
// (cudaIpcMemHandle_t, cudaIpcEventHandle_t, CUipcMemHandle).
const IPCHandleBytes = 64

// Error codes of device notifications (docs/PROTOCOL.md §6).
const (
	// CodeDeviceUnsupported: the sidecar does not take device memory (no
	// GPU backend, or it did not advertise cuda_ipc).
	CodeDeviceUnsupported Code = "device_unsupported"
	// CodeWrongDevice: the GPU named (or the one the handle maps) is not a
	// GPU this sidecar compresses on.
	CodeWrongDevice Code = "wrong_device"
	// CodeStaleHandle: the IPC memory or event handle cannot be opened (the
	// producer exited or freed the memory, or the handle is not from this
	// node), or the producer's event never completed.
	CodeStaleHandle Code = "stale_handle"
)

// DeviceRef names a snapshot in a producer's GPU memory instead of a
// shared-memory segment. The notification's offset and length then locate
// the bytes inside the allocation the memory handle exports.
type DeviceRef struct {
	// GPU is the device's UUID as nvidia-smi -L prints it:
	// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
	GPU string `json:"gpu"`
	// MemHandle is the standard base64 of the 64-byte IPC memory handle of
	// the allocation (cudaIpcGetMemHandle / cuIpcGetMemHandle).
	MemHandle string `json:"mem_handle"`
	// AllocSize is the allocation's size in bytes, as the producer's
	// cuMemGetAddressRange reports it; the sidecar checks it against the
	// mapping it opens.
	AllocSize int64 `json:"alloc_size"`
	// EventHandle is the base64 of the 64-byte IPC event handle (an event
	// created with cudaEventInterprocess|cudaEventDisableTiming) that the
	// producer recorded after its last write of the snapshot; the sidecar
	// reads nothing before it has completed.
	EventHandle string `json:"event_handle"`
}

var gpuUUIDRe = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// FormatGPUUUID writes a 16-byte device UUID as nvidia-smi does.
func FormatGPUUUID(u [16]byte) string {
	const hx = "0123456789abcdef"
	var b strings.Builder
	b.WriteString("GPU-")
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b.WriteByte('-')
		}
		b.WriteByte(hx[c>>4])
		b.WriteByte(hx[c&15])
	}
	return b.String()
}

// Handles decodes the memory and event handles; Validate has checked them.
func (d *DeviceRef) Handles() (mem, event [IPCHandleBytes]byte) {
	m, _ := base64.StdEncoding.DecodeString(d.MemHandle)
	e, _ := base64.StdEncoding.DecodeString(d.EventHandle)
	copy(mem[:], m)
	copy(event[:], e)
	return mem, event
}

// validate checks the device reference of a notification whose offset and
// length are already known to be non-negative and not to overflow. The
// GPU UUID is normalised to lower case.
func (d *DeviceRef) validate(offset, length int64) error {
	if len(d.GPU) > 4 && strings.EqualFold(d.GPU[:4], "GPU-") {
		d.GPU = "GPU-" + strings.ToLower(d.GPU[4:])
	}
	if !gpuUUIDRe.MatchString(d.GPU) {
		return errorf(CodeInvalid, "device.gpu %q: expected the GPU's UUID as nvidia-smi -L prints it, GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", d.GPU)
	}
	for _, h := range []struct{ name, v string }{{"mem_handle", d.MemHandle}, {"event_handle", d.EventHandle}} {
		if h.v == "" {
			return errorf(CodeInvalid, "missing field \"device.%s\": expected the base64 of a %d-byte CUDA IPC handle", h.name, IPCHandleBytes)
		}
		b, err := base64.StdEncoding.DecodeString(h.v)
		if err != nil || len(b) != IPCHandleBytes {
			n := len(b)
			if err != nil {
				n = -1
			}
			return errorf(CodeInvalid, "device.%s: expected the standard base64 of a %d-byte CUDA IPC handle, got %s", h.name, IPCHandleBytes, describeHandle(n, err))
		}
	}
	if d.AllocSize <= 0 {
		return errorf(CodeInvalid, "device.alloc_size %d: expected the allocation's size in bytes (> 0)", d.AllocSize)
	}
	if offset+length > d.AllocSize {
		return errorf(CodeSizeMismatch, "offset %d + length %d is beyond the device allocation of %d bytes (device.alloc_size)", offset, length, d.AllocSize)
	}
	return nil
}

func describeHandle(n int, err error) string {
	if err != nil {
		return "text that is not base64 (" + err.Error() + ")"
	}
	return strconv.Itoa(n) + " bytes"
}

// HostBytes is what a notification holds of host shared memory, the
// budget's currency: its length for a segment, 0 for device memory (the
// producer's GPU memory is not the node's shared memory).
func (n *Notification) HostBytes() int64 {
	if n.Device != nil {
		return 0
	}
	return n.Length
}

// HasFeature reports whether a status reply advertises a feature.
func (s *Status) HasFeature(f string) bool { return slices.Contains(s.Features, f) }
