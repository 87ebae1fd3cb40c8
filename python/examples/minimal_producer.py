"""minimal_producer.py — the shortest complete Python producer: one field written in place."""
import sys

import numpy as np

from fzsidecar.producer import Producer

url = sys.argv[1] if len(sys.argv) > 1 else None          # default nats://127.0.0.1:4222
shm = sys.argv[2] if len(sys.argv) > 2 else None          # default /dev/shm/fzsidecar
with Producer(url, shm_dir=shm) as p:
    snap = p.begin("minimal-py", "field", 0, (100, 200), "f4", mode="rel", bound=1e-3)
    j, i = np.indices((100, 200))
    snap.array[...] = i * j                                # the shared-memory segment
    snap.publish()
    r = snap.wait(timeout=60)
    print(f"stored {r.key}: ratio {r.ratio:.1f}, max error {r.max_abs_err:g} (bound {r.abs_eb:g})")
