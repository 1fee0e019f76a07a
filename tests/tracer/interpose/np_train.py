"""An unmodified numpy program for the CBLAS interposer test: MATMULS
float32 matmuls (np.dot); --plant N adds 1 to x[0, 0] before matmul N;
then one symmetric product (syrk) and one matrix-vector product (gemv),
and the three again in float64 (dgemm, dsyrk, dgemv)."""
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
# numpy computes x @ x.T with cblas_ssyrk (one triangle), a matrix times a
# vector with cblas_sgemv
g = np.dot(x, x.T)
print("syrk_triangle_sum %.6g" % float(np.triu(g).sum(dtype=np.float64)))
v = np.dot(w, x[0])
print("gemv_sum %.6g" % float(v.sum(dtype=np.float64)))
# the same three in float64: cblas_dgemm, cblas_dsyrk, cblas_dgemv
xd = x.astype(np.float64)
print("dgemm_sum %.6g" % float(np.dot(xd, w.astype(np.float64)).sum()))
print("dsyrk_triangle_sum %.6g" % float(np.triu(np.dot(xd, xd.T)).sum()))
print("dgemv_sum %.6g" % float(np.dot(w.astype(np.float64), xd[0]).sum()))
