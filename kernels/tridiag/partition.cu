// Austin-Berndt-Moulton partition method, FP64: one thread per sub-system of M rows (M is a compile-time
// constant, so the stage-3 work arrays unroll into registers). The math is the same as kernels/tridiag/partition.py.
//
// abcd: (4, n) row-major (a, b, c, d); a[0] and c[n-1] are ignored; rows >= n are identity rows (x = 0).
// Grid-stride over the sub-systems [k0, k1) of one stream's chunk, so any block count is valid.

#ifndef M
#define M 10
#endif
#define J (M - 2)

struct Row { double a, b, c, d; };

__device__ __forceinline__ Row load_row(const double* __restrict__ abcd, long long n, long long r) {
    Row w;
    if (r >= n) { w.a = 0.0; w.b = 1.0; w.c = 0.0; w.d = 0.0; return w; }
    w.a = (r == 0) ? 0.0 : abcd[r];
    w.b = abcd[n + r];
    w.c = (r == n - 1) ? 0.0 : abcd[2 * n + r];
    w.d = abcd[3 * n + r];
    return w;
}

// Stage 1: the two interface-system rows of every sub-system, written to iface (4, ld): columns 2k and 2k+1.
extern "C" __global__ void stage1(const double* __restrict__ abcd, long long n, long long k0, long long k1,
                                  double* __restrict__ iface, long long ld, int* __restrict__ flag) {
    for (long long k = k0 + blockIdx.x * (long long)blockDim.x + threadIdx.x; k < k1;
         k += (long long)gridDim.x * blockDim.x) {
        const long long r0 = k * M, r1 = r0 + M - 1;
        const Row first = load_row(abcd, n, r0), last = load_row(abcd, n, r1);
        const double a_in = load_row(abcd, n, r0 + 1).a;  // couples x[r0] into the first interior row
        const double c_in = load_row(abcd, n, r1 - 1).c;  // couples x[r1] into the last interior row
        bool bad = false;
        // top-down elimination over the interior: ends on the last entries of y, u, v
        double cp = 0.0, y = 0.0, u = 0.0, v = 0.0;
        #pragma unroll
        for (int j = 0; j < J; ++j) {
            const Row w = load_row(abcd, n, r0 + 1 + j);
            const double ru = (j == 0) ? a_in : 0.0, rv = (j == J - 1) ? c_in : 0.0;
            const double den = w.b - w.a * cp;
            bad |= (den == 0.0);
            const double inv = 1.0 / den;
            cp = w.c * inv;
            y = (w.d - w.a * y) * inv;
            u = (ru - w.a * u) * inv;
            v = (rv - w.a * v) * inv;
        }
        const double y_last = y, u_last = u, v_last = v;
        // bottom-up elimination: ends on the first entries
        double cq = 0.0;
        y = 0.0; u = 0.0; v = 0.0;
        #pragma unroll
        for (int j = J - 1; j >= 0; --j) {
            const Row w = load_row(abcd, n, r0 + 1 + j);
            const double ru = (j == 0) ? a_in : 0.0, rv = (j == J - 1) ? c_in : 0.0;
            const double den = w.b - w.c * cq;
            bad |= (den == 0.0);
            const double inv = 1.0 / den;
            cq = w.a * inv;
            y = (w.d - w.c * y) * inv;
            u = (ru - w.c * u) * inv;
            v = (rv - w.c * v) * inv;
        }
        if (bad) atomicMax(flag, 1);
        const long long q = 2 * k;
        iface[q] = first.a;
        iface[ld + q] = first.b - first.c * u;
        iface[2 * ld + q] = -first.c * v;
        iface[3 * ld + q] = first.d - first.c * y;
        iface[q + 1] = -last.a * u_last;
        iface[ld + q + 1] = last.b - last.a * v_last;
        iface[2 * ld + q + 1] = last.c;
        iface[3 * ld + q + 1] = last.d - last.a * y_last;
    }
}

// Stage 3: every unknown of every sub-system, given the interface solution z (2 per sub-system, chunk-local:
// z[2(k - k0)] is x[r0] of sub-system k). Writes x rows < n only.
extern "C" __global__ void stage3(const double* __restrict__ abcd, long long n, long long k0, long long k1,
                                  const double* __restrict__ z, double* __restrict__ x) {
    for (long long k = k0 + blockIdx.x * (long long)blockDim.x + threadIdx.x; k < k1;
         k += (long long)gridDim.x * blockDim.x) {
        const long long r0 = k * M, r1 = r0 + M - 1;
        const double x0 = z[2 * (k - k0)], x1 = z[2 * (k - k0) + 1];
        double cp[J], dp[J];
        double prev_c = 0.0, prev_d = 0.0;
        #pragma unroll
        for (int j = 0; j < J; ++j) {
            const Row w = load_row(abcd, n, r0 + 1 + j);
            double rhs = w.d;
            if (j == 0) rhs -= w.a * x0;
            if (j == J - 1) rhs -= w.c * x1;
            const double inv = 1.0 / (w.b - w.a * prev_c);
            prev_c = cp[j] = w.c * inv;
            prev_d = dp[j] = (rhs - w.a * prev_d) * inv;
        }
        if (r0 < n) x[r0] = x0;
        if (r1 < n) x[r1] = x1;
        double xi = dp[J - 1];
        if (r0 + J < n) x[r0 + J] = xi;
        #pragma unroll
        for (int j = J - 2; j >= 0; --j) {
            xi = dp[j] - cp[j] * xi;
            if (r0 + 1 + j < n) x[r0 + 1 + j] = xi;
        }
    }
}
