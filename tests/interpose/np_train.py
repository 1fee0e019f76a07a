"""An unmodified numpy program for the CBLAS interposer test: MATMULS
float32 matmuls (np.dot); --plant N adds 1 to x[0, 0] before matmul N."""
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed for", sys.executable)
    sys.exit(0)

MATMULS = 6
plant = int(sys.argv[2]) if len(sys.argv) == 3 and sys.argv[1] == "--plant" else -1
rng = np.random.default_rng(0)
w = rng.standard_normal((32, 32)).astype(np.float32)
x = rng.standard_normal((16, 32)).astype(np.float32)
for i in range(MATMULS):
    if i == plant:
        x = x.copy()
        x[0, 0] += 1.0
    x = np.tanh(np.dot(x, w))
print("checksum", float(x.sum()))
