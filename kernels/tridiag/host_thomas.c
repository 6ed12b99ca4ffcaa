/* Stage 2 of the partition method on the host: a tridiagonal solve, split over OpenMP threads.
 *
 * Why hand-written C: the Thomas recurrence is a chain of dependent divisions (~20 ns per row on one core), and
 * LAPACK's dgtsv through scipy holds the GIL and runs on one core. At 10^8 unknowns the interface system has
 * 2 * 10^7 rows, ~400 ms on one core, many times the PCIe transfers. Here the rows are cut into one part per
 * thread and the same partition method (one level) is applied on the host: each part reduces to two interface
 * rows (pass 1), the 2T-row system is solved by plain Thomas, and each part's interior is one Thomas solve with
 * its two end values known (pass 2). ctypes releases the GIL for the call.
 *
 * Row i: dl[i] x[i-1] + d[i] x[i] + du[i] x[i+1] = b[i]; dl[0] and du[n-1] are ignored. The solution overwrites
 * b; work holds n doubles. Returns 0, or 1 + a row where an exact zero pivot was met.
 */
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static long thomas(long n, const double *dl, const double *d, const double *du, double *b, double *cp) {
    for (long i = 0; i < n; ++i) {
        const double a = (i == 0) ? 0.0 : dl[i];
        const double den = d[i] - a * (i ? cp[i - 1] : 0.0);
        if (den == 0.0) return i + 1;
        const double inv = 1.0 / den;
        cp[i] = (i == n - 1) ? 0.0 : du[i] * inv;
        b[i] = (b[i] - a * (i ? b[i - 1] : 0.0)) * inv;
    }
    for (long i = n - 2; i >= 0; --i) b[i] -= cp[i] * b[i + 1];
    return 0;
}

/* Pass 1 for rows [s, e), e - s >= 3: the part's two interface rows (sub, diag, super, rhs) into r[8]. */
static long reduce_part(long n, long s, long e, const double *dl, const double *d, const double *du,
                        const double *b, double *r) {
    const long f = s, l = e - 1;
    const double af = (f == 0) ? 0.0 : dl[f], cl = (l == n - 1) ? 0.0 : du[l];
    double cp = 0.0, y = 0.0, u = 0.0, v = 0.0;
    for (long i = f + 1; i < l; ++i) { /* top-down: last interior entries */
        const double den = d[i] - dl[i] * cp;
        if (den == 0.0) return i + 1;
        const double inv = 1.0 / den;
        cp = du[i] * inv;
        y = (b[i] - dl[i] * y) * inv;
        u = ((i == f + 1 ? dl[i] : 0.0) - dl[i] * u) * inv;
        v = ((i == l - 1 ? du[i] : 0.0) - dl[i] * v) * inv;
    }
    const double yl = y, ul = u, vl = v;
    double cq = 0.0;
    y = u = v = 0.0;
    for (long i = l - 1; i > f; --i) { /* bottom-up: first interior entries */
        const double den = d[i] - du[i] * cq;
        if (den == 0.0) return i + 1;
        const double inv = 1.0 / den;
        cq = dl[i] * inv;
        y = (b[i] - du[i] * y) * inv;
        u = ((i == f + 1 ? dl[i] : 0.0) - du[i] * u) * inv;
        v = ((i == l - 1 ? du[i] : 0.0) - du[i] * v) * inv;
    }
    r[0] = af;                  r[1] = d[f] - du[f] * u;   r[2] = -du[f] * v;  r[3] = b[f] - du[f] * y;
    r[4] = -dl[l] * ul;         r[5] = d[l] - dl[l] * vl;  r[6] = cl;          r[7] = b[l] - dl[l] * yl;
    return 0;
}

long tridiag_solve(long n, const double *dl, const double *d, const double *du, double *b, double *work,
                   int threads) {
    if (threads < 1) threads = 1;
    if (threads == 1 || n < 4096L * threads) return thomas(n, dl, d, du, b, work);
    const long T = threads;
    double *red = (double *)malloc(sizeof(double) * (size_t)(8 * T + 10 * T)); /* 8 per part + 5 arrays of 2T */
    if (!red) return thomas(n, dl, d, du, b, work);
    double *sdl = red + 8 * T, *sd = sdl + 2 * T, *sdu = sd + 2 * T, *sb = sdu + 2 * T, *scp = sb + 2 * T;
    long status = 0;
#pragma omp parallel for num_threads(threads) reduction(max : status) schedule(static)
    for (long t = 0; t < T; ++t) {
        const long s = n * t / T, e = n * (t + 1) / T;
        long st = reduce_part(n, s, e, dl, d, du, b, red + 8 * t);
        if (st > status) status = st;
    }
    if (status) { free(red); return status; }
    for (long t = 0; t < T; ++t) {
        for (int k = 0; k < 2; ++k) {
            sdl[2 * t + k] = red[8 * t + 4 * k];
            sd[2 * t + k] = red[8 * t + 4 * k + 1];
            sdu[2 * t + k] = red[8 * t + 4 * k + 2];
            sb[2 * t + k] = red[8 * t + 4 * k + 3];
        }
    }
    status = thomas(2 * T, sdl, sd, sdu, sb, scp);
    if (status) { free(red); return -status; } /* negative: zero pivot in the small system */
#pragma omp parallel for num_threads(threads) reduction(max : status) schedule(static)
    for (long t = 0; t < T; ++t) {
        const long s = n * t / T, e = n * (t + 1) / T;
        const double xf = sb[2 * t], xl = sb[2 * t + 1];
        b[s + 1] -= dl[s + 1] * xf;
        b[e - 2] -= du[e - 2] * xl;
        /* interior rows s+1..e-2 as their own system: its first sub and last super are ignored by thomas() */
        long st = thomas(e - s - 2, dl + s + 1, d + s + 1, du + s + 1, b + s + 1, work + s + 1);
        if (st) st += s + 1;
        if (st > status) status = st;
        b[s] = xf;
        b[e - 1] = xl;
    }
    free(red);
    return status;
}
