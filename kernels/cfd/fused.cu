// Fused variants of one Runge-Kutta stage (issue 16). This text is compiled APPENDED to solver.cu, so the fused
// kernels call the very same device functions (increments, hllc, put, put_reflected) as the seven kernels and,
// compiled with --fmad=false like them, produce bitwise the same state.
//
// Run-time arguments cx, cy: cells (or faces) per thread along i and j; a block's tile is (blockDim.x * cx) x
// (blockDim.y * cy). They were compile-time constants first: unrolled, a 4 x 4 variant took 31 s to compile (nvcc,
// 2 busy cores) and 216 registers, and 36 variants would have eaten a sweep's minutes; as loop bounds they cost
// nothing to compile. Compile-time constants of a variant (passed as -D by kernels/cfd/fused_kernels.py):
//   SMEM     1: the stage kernel stages the tile's state plus a two-cell halo in shared memory; 0: it reads the
//            state from global memory (through the read-only cache)
//   FACES    1: the stage kernel computes each face flux of its tile once into shared memory; 0: every cell
//            computes its own four face fluxes (each interior face twice: recompute instead of exchange);
//            2: march up columns, eta fluxes carried in registers, xi fluxes exchanged by warp shuffles
//   SOURCE   the case's source mode (0: zeros, inlet and free stream; 1: the manufactured solution's), fixed by
//            the case, so the inlet's kernels carry no sin/cos code (it cost registers even when not taken)
//   RECIP    1: HLLC without divisions or roots (hllc_recip: 9 reciprocal square roots per face instead of 15
//            divisions and 6 roots) and the update dividing once per cell instead of twice: not the seven
//            kernels' rounding, so not their bits (with FMA contraction, FusedKernels(arith=1)); 0: their very
//            arithmetic
//   LIMITER  the scheme's limiter code, when given: it replaces the kernels' run-time `limiter` argument (the
//            launch passes the same code), so only that limiter's branch is compiled. The same arithmetic, fewer
//            registers (when it came, d805f5c: ptxas -v, sm_90, minmod, RECIP 1, 28 bytes of spills instead of 44
//            under a 64-register cap, and the sweeps' best stage tile 15% faster on the H100;
//            data/cfd/h100/stage_tuning/).
// Thread (tx, ty) of a block handles tile cells (tx + a * blockDim.x, ty + b * blockDim.y), a < cx, b < cy: neighbours
// in i belong to neighbouring threads, so global accesses stay coalesced whatever cx.
// Three kernels of the `directional` level (xi_face, eta_face, cell_update) and one of the `stage` level
// (stage_fused). Each face, cell and ghost has exactly one writer.

#ifndef SMEM
#define SMEM 1
#endif
#ifndef FACES
#define FACES 1
#endif
#ifndef SOURCE
#define SOURCE 0
#endif
#ifndef RECIP
#define RECIP 0
#endif
#ifdef LIMITER
#define FIX_LIMITER limiter = LIMITER
#else
#define FIX_LIMITER (void)0
#endif

// 1 / x as the square of x's reciprocal square root, with x's sign: no IEEE division (its rounding step and
// slow-path check); within a few ulp.
__device__ __forceinline__ double rcp_rsqrt(double x) {
    double t = rsqrt(fabs(x));
    return copysign(t * t, x);
}

// hllc (solver.cu) without divisions or square roots: every one is a reciprocal square root. x / y becomes
// x * (1 / y) where y divides more than once, p / (GAMMA - 1) a product; the face normal takes one reciprocal
// square root, 1 / rho and the Roe ratio R = sqrt(rr / rl) come from rsqrt(rl) and rsqrt(rr), a sound speed
// sqrt(c2) is c2 * rsqrt(c2), and the three reciprocals left are rcp_rsqrt: 9 reciprocal square roots per face
// where hllc takes 15 divisions and 6 roots. The same formulas, candidate fluxes and selection; another
// rounding (the H100, 2026-11-25, data/cfd/h100/stage_tuning/: 0.93-0.95x the step time of the version with 5
// divisions and 5 roots, and within 6.8e-13 of the seven kernels after 100 steps on the inlet).
__device__ __forceinline__ void hllc_recip(double rl, double ul, double vl, double pl, double rr, double ur,
                                           double vr, double pr, double sx, double sy, double* f) {
    const double g1 = GAMMA - 1.0;
    const double gg = GAMMA / (GAMMA - 1.0);
    const double ig1 = 1.0 / (GAMMA - 1.0);
    double s2 = sx * sx + sy * sy;
    double ia = rsqrt(s2);  // 1 / |s| in one reciprocal square root, and |s| = s2 / |s|
    double area = s2 * ia;
    double nx_ = sx * ia;
    double ny_ = sy * ia;
    double ql = ul * nx_ + vl * ny_;
    double qr = ur * nx_ + vr * ny_;
    double srl = rsqrt(rl), srr = rsqrt(rr);
    double pol = pl * (srl * srl), por = pr * (srr * srr);  // p / rho: the sound speed and the enthalpy need it
    double gl = GAMMA * pol, gr = GAMMA * por;
    double cl = gl * rsqrt(gl);
    double cr = gr * rsqrt(gr);
    double kl = 0.5 * (ul * ul + vl * vl);
    double kr = 0.5 * (ur * ur + vr * vr);
    double hl = gg * pol + kl;
    double hr = gg * por + kr;
    // Roe averages: weights sqrt(rl) / (sqrt(rl) + sqrt(rr)) = 1 / (1 + R) and R / (1 + R), R = sqrt(rr / rl)
    double R = rr * srr * srl;
    double iw = rcp_rsqrt(1.0 + R);
    double ut = (ul + R * ur) * iw;
    double vt = (vl + R * vr) * iw;
    double ht = (hl + R * hr) * iw;
    double c2t = g1 * (ht - 0.5 * (ut * ut + vt * vt));
    double ct = c2t * rsqrt(c2t);
    double qt = ut * nx_ + vt * ny_;
    double s_l = fmin(ql - cl, qt - ct);
    double s_r = fmax(qr + cr, qt + ct);
    if (s_l >= 0.0) {
        double vs = ul * sx + vl * sy;
        f[0] = rl * vs; f[1] = rl * ul * vs + sx * pl; f[2] = rl * vl * vs + sy * pl; f[3] = rl * hl * vs;
        return;
    }
    if (s_r <= 0.0) {
        double vs = ur * sx + vr * sy;
        f[0] = rr * vs; f[1] = rr * ur * vs + sx * pr; f[2] = rr * vr * vs + sy * pr; f[3] = rr * hr * vs;
        return;
    }
    double ml = rl * (s_l - ql);
    double mr = rr * (s_r - qr);
    double sm = (mr * qr - ml * ql + pl - pr) * rcp_rsqrt(mr - ml);
    double ps = ml * (sm - ql) + pl;
    double m, u, v, q, p, e, s;
    if (sm >= 0.0) { m = ml; u = ul; v = vl; q = ql; p = pl; e = pl * ig1 + rl * kl; s = s_l; }
    else { m = mr; u = ur; v = vr; q = qr; p = pr; e = pr * ig1 + rr * kr; s = s_r; }
    double id = rcp_rsqrt(s - sm);
    double rs = m * id;
    double rus = (m * u + (ps - p) * nx_) * id;
    double rvs = (m * v + (ps - p) * ny_) * id;
    double es = ((s - q) * e - p * q + ps * sm) * id;
    f[0] = area * (rs * sm);
    f[1] = area * (rus * sm + ps * nx_);
    f[2] = area * (rvs * sm + ps * ny_);
    f[3] = area * ((es + ps) * sm);
}

#if RECIP
#define FACE_HLLC hllc_recip
#else
#define FACE_HLLC hllc
#endif

// The state V (two ghost layers) read straight from global memory.
struct GlobalV {
    const double* __restrict__ p;
    unsigned int W;
    size_t vs;
    __device__ __forceinline__ double operator()(int q, int j, int i) const {
        return p[q * vs + (size_t)(j + 2) * W + (i + 2)];
    }
};

// The state of a tile plus a two-cell halo in shared memory; (j0, i0) is the tile's first cell.
struct SharedV {
    const double* p;
    int sw, ss, j0, i0;
    __device__ __forceinline__ double operator()(int q, int j, int i) const {
        return p[q * ss + (j - j0 + 2) * sw + (i - i0 + 2)];
    }
};

// The flux through xi face f of row j (between cells f-1 and f): the limited increments of xi_limiter formed on
// the spot, then xi_flux's HLLC with the same operands in the same order.
template <class Acc>
__device__ __forceinline__ void xi_face_flux(const Acc& v, int j, int f, const double* __restrict__ sxx,
                                             const double* __restrict__ sxy, int nx, int limiter, double c1,
                                             double c2, double* out) {
    double l[4], r[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        double ip, im, unused;
        double a = v(q, j, f - 2), b = v(q, j, f - 1), c = v(q, j, f), d = v(q, j, f + 1);
        increments(a, b, c, limiter, c1, c2, &ip, &unused);
        increments(b, c, d, limiter, c1, c2, &unused, &im);
        l[q] = b + ip;
        r[q] = c - im;
    }
    size_t m = (size_t)j * (nx + 1) + f;
    FACE_HLLC(l[0], l[1], l[2], l[3], r[0], r[1], r[2], r[3], sxx[m], sxy[m], out);
}

// The flux through eta face g of column i (between cells g-1 and g).
template <class Acc>
__device__ __forceinline__ void eta_face_flux(const Acc& v, int g, int i, const double* __restrict__ sex,
                                              const double* __restrict__ sey, int nx, int limiter, double c1,
                                              double c2, double* out) {
    double l[4], r[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        double ip, im, unused;
        double a = v(q, g - 2, i), b = v(q, g - 1, i), c = v(q, g, i), d = v(q, g + 1, i);
        increments(a, b, c, limiter, c1, c2, &ip, &unused);
        increments(b, c, d, limiter, c1, c2, &unused, &im);
        l[q] = b + ip;
        r[q] = c - im;
    }
    size_t m = (size_t)g * nx + i;
    FACE_HLLC(l[0], l[1], l[2], l[3], r[0], r[1], r[2], r[3], sex[m], sey[m], out);
}

// The source kernel's arithmetic for one cell (mode 1; the caller writes zeros for mode 0).
__device__ __forceinline__ void mms_source_cell(double x, double y, double a, const double* __restrict__ c,
                                                double* s) {
    double sxr = sin(c[3] * x), cxr = cos(c[3] * x), syr = sin(c[4] * y), cyr = cos(c[4] * y);
    double sxu = sin(c[8] * x), cxu = cos(c[8] * x), syu = sin(c[9] * y), cyu = cos(c[9] * y);
    double sxv = sin(c[13] * x), cxv = cos(c[13] * x), syv = sin(c[14] * y), cyv = cos(c[14] * y);
    double sxp = sin(c[18] * x), cxp = cos(c[18] * x), syp = sin(c[19] * y), cyp = cos(c[19] * y);
    double r = c[0] + c[1] * sxr + c[2] * cyr;
    double u = c[5] + c[6] * sxu + c[7] * cyu;
    double v = c[10] + c[11] * cxv + c[12] * syv;
    double p = c[15] + c[16] * cxp + c[17] * syp;
    double rx = c[1] * c[3] * cxr;
    double ry = -c[2] * c[4] * syr;
    double ux = c[6] * c[8] * cxu;
    double uy = -c[7] * c[9] * syu;
    double vx = -c[11] * c[13] * sxv;
    double vy = c[12] * c[14] * cyv;
    double px = -c[16] * c[18] * sxp;
    double py = c[17] * c[19] * cyp;
    const double gg = GAMMA / (GAMMA - 1.0);
    double q2 = u * u + v * v;
    double w = gg * p + 0.5 * r * q2;
    double wx = gg * px + 0.5 * rx * q2 + r * (u * ux + v * vx);
    double wy = gg * py + 0.5 * ry * q2 + r * (u * uy + v * vy);
    s[0] = (rx * u + r * ux + ry * v + r * vy) * a;
    s[1] = (rx * u * u + 2.0 * r * u * ux + px + ry * u * v + r * uy * v + r * u * vy) * a;
    s[2] = (rx * u * v + r * ux * v + r * u * vx + ry * v * v + 2.0 * r * v * vy + py) * a;
    s[3] = (ux * w + u * wx + vy * w + v * wy) * a;
}

// Residual of cell (i, j) from its four face fluxes, as the source and rhs kernels compute it.
__device__ __forceinline__ void cell_residual(const double* fw, const double* fe, const double* gs,
                                              const double* gn, double x, double y, double a,
                                              const double* __restrict__ mmsc, double* res) {
    double s[4];
#if SOURCE
    mms_source_cell(x, y, a, mmsc, s);
#else
    s[0] = 0.0; s[1] = 0.0; s[2] = 0.0; s[3] = 0.0;
#endif
#pragma unroll
    for (int q = 0; q < 4; ++q) res[q] = s[q] - ((fe[q] - fw[q]) + (gn[q] - gs[q]));
}

// The update kernel's work for cell (i, j): (r0, u0_, v0, p0) is the cell's state at the stage start (used for
// dt in the first stage), res its residual; writes the new state and the ghosts this cell owns into Vout.
__device__ __forceinline__ void cell_update_one(unsigned int i, unsigned int j, double r0, double u0_, double v0,
                                                double p0, const double* res, double* __restrict__ U0,
                                                double* __restrict__ dt, const double* __restrict__ vol,
                                                const double* __restrict__ dtv, double* __restrict__ V,
                                                const double* __restrict__ sxx, const double* __restrict__ sxy,
                                                const double* __restrict__ sex, const double* __restrict__ sey,
                                                const int* __restrict__ bw, const int* __restrict__ be,
                                                const int* __restrict__ bs, const int* __restrict__ bn, int nx,
                                                int ny, double alpha, double cfl, int first, int last) {
    const double g1 = GAMMA - 1.0;
    const unsigned int W = nx + 4;
    const size_t n = (size_t)nx * ny, vs = (size_t)(ny + 4) * W;
    const unsigned int k = j * nx + i;
    size_t c = (size_t)(j + 2) * W + i + 2;
    double dtc;
    if (first) {
        double r = r0, u = u0_, v = v0, p = p0;
        double d0 = dtv[k], d1 = dtv[n + k], d2 = dtv[2 * n + k], d3 = dtv[3 * n + k];
        double cs = sqrt(GAMMA * p / r);
        double lx = fabs(u * d0 + v * d1) + cs * sqrt(d0 * d0 + d1 * d1);
        double ly = fabs(u * d2 + v * d3) + cs * sqrt(d2 * d2 + d3 * d3);
        dtc = cfl * vol[k] / (lx + ly);
        dt[k] = dtc;
    } else {
        dtc = dt[k];
    }
    double f = alpha * dtc / vol[k];
    double u0 = U0[k] + f * res[0];
    double u1 = U0[n + k] + f * res[1];
    double u2 = U0[2 * n + k] + f * res[2];
    double u3 = U0[3 * n + k] + f * res[3];
    double r = u0;
#if RECIP
    double ir = 1.0 / r;
    double u = u1 * ir;
    double v = u2 * ir;
#else
    double u = u1 / r;
    double v = u2 / r;
#endif
    double p = g1 * (u3 - 0.5 * r * (u * u + v * v));
    put(V, vs, c, r, u, v, p);
    if (last) { U0[k] = u0; U0[n + k] = u1; U0[2 * n + k] = u2; U0[3 * n + k] = u3; }
    // Ghost cells exactly as the update kernel writes them (one writer per ghost).
    size_t row = (size_t)(j + 2) * W;
    if (i < 2) {
        int t = bw[j];
        size_t f0 = (size_t)j * (nx + 1);
        if (t == WALL) put_reflected(V, vs, row + 1 - i, r, u, v, p, sxx[f0], sxy[f0]);
        else if (t == EXTRAP && i == 0) { put(V, vs, row + 1, r, u, v, p); put(V, vs, row, r, u, v, p); }
    }
    if (i + 2 >= (unsigned int)nx) {
        int t = be[j];
        unsigned int kk = nx - 1 - i;
        size_t f1 = (size_t)j * (nx + 1) + nx;
        if (t == WALL) put_reflected(V, vs, row + nx + 2 + kk, r, u, v, p, sxx[f1], sxy[f1]);
        else if (t == EXTRAP && kk == 0) { put(V, vs, row + nx + 2, r, u, v, p); put(V, vs, row + nx + 3, r, u, v, p); }
    }
    if (j < 2) {
        int t = bs[i];
        if (t == WALL) put_reflected(V, vs, (size_t)(1 - j) * W + i + 2, r, u, v, p, sex[i], sey[i]);
        else if (t == EXTRAP && j == 0) { put(V, vs, (size_t)W + i + 2, r, u, v, p); put(V, vs, i + 2, r, u, v, p); }
    }
    if (j + 2 >= (unsigned int)ny) {
        int t = bn[i];
        unsigned int kk = ny - 1 - j;
        size_t g1i = (size_t)ny * nx + i;
        if (t == WALL) put_reflected(V, vs, (size_t)(ny + 2 + kk) * W + i + 2, r, u, v, p, sex[g1i], sey[g1i]);
        else if (t == EXTRAP && kk == 0) {
            put(V, vs, (size_t)(ny + 2) * W + i + 2, r, u, v, p);
            put(V, vs, (size_t)(ny + 3) * W + i + 2, r, u, v, p);
        }
    }
}

// ---- level `directional`: limiter + flux per direction (no increments in memory), then one cell kernel ----

extern "C" __global__ void xi_face(const double* __restrict__ V, const double* __restrict__ sxx,
                                   const double* __restrict__ sxy, double* __restrict__ F, int nx, int ny,
                                   int limiter, double c1, double c2, int cx, int cy) {
    FIX_LIMITER;
    const GlobalV v{V, (unsigned int)nx + 4, (size_t)(ny + 4) * (nx + 4)};
    const size_t fs = (size_t)ny * (nx + 1);
    const int f0 = blockIdx.x * blockDim.x * cx + threadIdx.x, j0 = blockIdx.y * blockDim.y * cy + threadIdx.y;
    for (int b = 0; b < cy; ++b) {
        for (int a = 0; a < cx; ++a) {
            int f = f0 + a * blockDim.x, j = j0 + b * blockDim.y;
            if (f > nx || j >= ny) continue;
            double out[4];
            xi_face_flux(v, j, f, sxx, sxy, nx, limiter, c1, c2, out);
            size_t m = (size_t)j * (nx + 1) + f;
            for (int q = 0; q < 4; ++q) F[q * fs + m] = out[q];
        }
    }
}

extern "C" __global__ void eta_face(const double* __restrict__ V, const double* __restrict__ sex,
                                    const double* __restrict__ sey, double* __restrict__ G, int nx, int ny,
                                    int limiter, double c1, double c2, int cx, int cy) {
    FIX_LIMITER;
    const GlobalV v{V, (unsigned int)nx + 4, (size_t)(ny + 4) * (nx + 4)};
    const size_t gs = (size_t)(ny + 1) * nx;
    const int i0 = blockIdx.x * blockDim.x * cx + threadIdx.x, g0 = blockIdx.y * blockDim.y * cy + threadIdx.y;
    for (int b = 0; b < cy; ++b) {
        for (int a = 0; a < cx; ++a) {
            int i = i0 + a * blockDim.x, g = g0 + b * blockDim.y;
            if (i >= nx || g > ny) continue;
            double out[4];
            eta_face_flux(v, g, i, sex, sey, nx, limiter, c1, c2, out);
            size_t m = (size_t)g * nx + i;
            for (int q = 0; q < 4; ++q) G[q * gs + m] = out[q];
        }
    }
}

// source + rhs + update of each cell (in place on V: a cell reads only its own state, writes it and its ghosts).
extern "C" __global__ void cell_update(const double* __restrict__ F, const double* __restrict__ G,
                                       double* __restrict__ R, int store_r, double* __restrict__ U0,
                                       double* __restrict__ dt, const double* __restrict__ vol,
                                       const double* __restrict__ dtv, double* __restrict__ V,
                                       const double* __restrict__ sxx, const double* __restrict__ sxy,
                                       const double* __restrict__ sex, const double* __restrict__ sey,
                                       const int* __restrict__ bw, const int* __restrict__ be,
                                       const int* __restrict__ bs, const int* __restrict__ bn,
                                       const double* __restrict__ xc, const double* __restrict__ yc,
                                       const double* __restrict__ mmsc, int nx, int ny,
                                       double alpha, double cfl, int first, int last, int cx, int cy) {
    const unsigned int W = nx + 4;
    const size_t n = (size_t)nx * ny, vs = (size_t)(ny + 4) * W;
    const size_t fs = (size_t)ny * (nx + 1), gs = (size_t)(ny + 1) * nx;
    const int i0 = blockIdx.x * blockDim.x * cx + threadIdx.x, j0 = blockIdx.y * blockDim.y * cy + threadIdx.y;
    for (int b = 0; b < cy; ++b) {
        for (int a = 0; a < cx; ++a) {
            int i = i0 + a * blockDim.x, j = j0 + b * blockDim.y;
            if (i >= nx || j >= ny) continue;
            size_t k = (size_t)j * nx + i, f = (size_t)j * (nx + 1) + i;
            double fw[4], fe[4], gso[4], gno[4], res[4];
            for (int q = 0; q < 4; ++q) {
                fw[q] = F[q * fs + f];
                fe[q] = F[q * fs + f + 1];
                gso[q] = G[q * gs + k];
                gno[q] = G[q * gs + k + nx];
            }
            double x = 0.0, y = 0.0;
#if SOURCE
            x = xc[k]; y = yc[k];
#endif
            cell_residual(fw, fe, gso, gno, x, y, vol[k], mmsc, res);
            if (store_r) for (int q = 0; q < 4; ++q) R[q * n + k] = res[q];
            size_t c = (size_t)(j + 2) * W + i + 2;
            double r0 = 0.0, u0 = 0.0, v0 = 0.0, p0 = 0.0;
            if (first) { r0 = V[c]; u0 = V[vs + c]; v0 = V[2 * vs + c]; p0 = V[3 * vs + c]; }
            cell_update_one(i, j, r0, u0, v0, p0, res, U0, dt, vol, dtv, V, sxx, sxy, sex, sey, bw, be, bs, bn,
                            nx, ny, alpha, cfl, first, last);
        }
    }
}

// idx = start, start + step, ... over rows of `width` items: the (row, col) of idx, advanced without an integer
// division per item (a division by a run-time value costs tens of instructions, and the face loops took one
// per face).
struct RowWalk {
    int row, col, drow, dcol, width;
    __device__ __forceinline__ RowWalk(int start, int step, int w)
        : row(start / w), col(start % w), drow(step / w), dcol(step % w), width(w) {}
    __device__ __forceinline__ void next() {
        row += drow;
        col += dcol;
        if (col >= width) { col -= width; ++row; }
    }
};

// ---- level `stage`: one kernel per Runge-Kutta stage over 2-D tiles; Vin -> Vout (ping-pong buffers) ----
// Dynamic shared memory (doubles): SMEM: 4 (TY + 4)(TX + 4); FACES == 1: 4 TY (TX + 1) + 4 (TY + 1) TX.

extern "C" __global__ void stage_fused(const double* __restrict__ Vin, double* __restrict__ Vout,
                                       double* __restrict__ R, int store_r, double* __restrict__ U0,
                                       double* __restrict__ dt, const double* __restrict__ vol,
                                       const double* __restrict__ dtv, const double* __restrict__ sxx,
                                       const double* __restrict__ sxy, const double* __restrict__ sex,
                                       const double* __restrict__ sey, const int* __restrict__ bw,
                                       const int* __restrict__ be, const int* __restrict__ bs,
                                       const int* __restrict__ bn, const double* __restrict__ xc,
                                       const double* __restrict__ yc, const double* __restrict__ mmsc,
                                       int nx, int ny, int limiter, double c1, double c2,
                                       double alpha, double cfl, int first, int last, int cx, int cy) {
    extern __shared__ double smem[];
    FIX_LIMITER;
    const int bx = blockDim.x, by = blockDim.y;
    const int TX = bx * cx, TY = by * cy;
    const int i0 = blockIdx.x * TX, j0 = blockIdx.y * TY;
    const int tid = threadIdx.y * bx + threadIdx.x, nt = bx * by;
    const size_t n = (size_t)nx * ny;
#if SMEM
    const int sw = TX + 4, ss = (TY + 4) * sw;
    {
        const unsigned int W = nx + 4;
        const size_t vs = (size_t)(ny + 4) * W;
        RowWalk w(tid, nt, sw);
        for (int idx = tid; idx < ss; idx += nt, w.next()) {
            const int jj = w.row, ii = w.col;
            int j = j0 - 2 + jj, i = i0 - 2 + ii;
            if (j <= ny + 1 && i <= nx + 1) {
                size_t g = (size_t)(j + 2) * W + (i + 2);
#pragma unroll
                for (int q = 0; q < 4; ++q) smem[q * ss + idx] = Vin[q * vs + g];
            }
        }
    }
    const SharedV v{smem, sw, ss, j0, i0};
    double* fbase = smem + 4 * ss;
    __syncthreads();
#else
    const GlobalV v{Vin, (unsigned int)nx + 4, (size_t)(ny + 4) * (nx + 4)};
    double* fbase = smem;
#endif
#if FACES == 1
    const int fxn = TY * (TX + 1), gyn = (TY + 1) * TX;
    double* fx = fbase;
    double* gy = fbase + 4 * fxn;
    RowWalk wx(tid, nt, TX + 1);
    for (int idx = tid; idx < fxn; idx += nt, wx.next()) {
        const int jj = wx.row, ff = wx.col;
        int j = j0 + jj, f = i0 + ff;
        if (j < ny && f <= nx) {
            double out[4];
            xi_face_flux(v, j, f, sxx, sxy, nx, limiter, c1, c2, out);
            for (int q = 0; q < 4; ++q) fx[q * fxn + idx] = out[q];
        }
    }
    RowWalk wy(tid, nt, TX);
    for (int idx = tid; idx < gyn; idx += nt, wy.next()) {
        const int gg = wy.row, ii = wy.col;
        int g = j0 + gg, i = i0 + ii;
        if (g <= ny && i < nx) {
            double out[4];
            eta_face_flux(v, g, i, sex, sey, nx, limiter, c1, c2, out);
            for (int q = 0; q < 4; ++q) gy[q * gyn + idx] = out[q];
        }
    }
    __syncthreads();
#endif
// the cell's state at the stage start, which the update needs only in the first stage (for dt)
#define STAGE_START(q) (first ? v(q, j, i) : 0.0)
#if FACES == 2
    // March: each thread owns cy consecutive cells of a column (per a) and walks up it, handing its north eta
    // flux on as the next cell's south flux (registers), while the east xi flux of a cell is the west flux of
    // the next lane's cell (a warp shuffle; lane 31 computes its own). Needs whole warps along i
    // (blockDim.x % 32 == 0, a space constraint), so j and every break below are uniform across a warp.
    const int lane = tid & 31;
    for (int a = 0; a < cx; ++a) {
        const int i = i0 + threadIdx.x + a * bx;
        const int jb = j0 + threadIdx.y * cy;
        if (jb >= ny) break;
        double gso[4] = {0.0, 0.0, 0.0, 0.0};
        if (i < nx) eta_face_flux(v, jb, i, sex, sey, nx, limiter, c1, c2, gso);
        for (int b = 0; b < cy; ++b) {
            const int j = jb + b;
            if (j >= ny) break;
            double fw[4] = {0.0, 0.0, 0.0, 0.0}, fe[4], gno[4], res[4];
            if (i <= nx) xi_face_flux(v, j, i, sxx, sxy, nx, limiter, c1, c2, fw);
            for (int q = 0; q < 4; ++q) fe[q] = __shfl_down_sync(0xffffffffu, fw[q], 1);
            if (i < nx) {
                if (lane == 31) xi_face_flux(v, j, i + 1, sxx, sxy, nx, limiter, c1, c2, fe);
                eta_face_flux(v, j + 1, i, sex, sey, nx, limiter, c1, c2, gno);
                size_t k = (size_t)j * nx + i;
                double x = 0.0, y = 0.0;
#if SOURCE
                x = xc[k]; y = yc[k];
#endif
                cell_residual(fw, fe, gso, gno, x, y, vol[k], mmsc, res);
                if (store_r) for (int q = 0; q < 4; ++q) R[q * n + k] = res[q];
                cell_update_one(i, j, STAGE_START(0), STAGE_START(1), STAGE_START(2), STAGE_START(3), res, U0, dt,
                                vol, dtv, Vout, sxx, sxy, sex, sey, bw, be, bs, bn, nx, ny, alpha, cfl, first, last);
                for (int q = 0; q < 4; ++q) gso[q] = gno[q];
            }
        }
    }
#else
    for (int b = 0; b < cy; ++b) {
        for (int a = 0; a < cx; ++a) {
            int li = threadIdx.x + a * bx, lj = threadIdx.y + b * by;
            int i = i0 + li, j = j0 + lj;
            if (i >= nx || j >= ny) continue;
            double fw[4], fe[4], gso[4], gno[4], res[4];
#if FACES == 1
            for (int q = 0; q < 4; ++q) {
                fw[q] = fx[q * fxn + lj * (TX + 1) + li];
                fe[q] = fx[q * fxn + lj * (TX + 1) + li + 1];
                gso[q] = gy[q * gyn + lj * TX + li];
                gno[q] = gy[q * gyn + (lj + 1) * TX + li];
            }
#else
            xi_face_flux(v, j, i, sxx, sxy, nx, limiter, c1, c2, fw);
            xi_face_flux(v, j, i + 1, sxx, sxy, nx, limiter, c1, c2, fe);
            eta_face_flux(v, j, i, sex, sey, nx, limiter, c1, c2, gso);
            eta_face_flux(v, j + 1, i, sex, sey, nx, limiter, c1, c2, gno);
#endif
            size_t k = (size_t)j * nx + i;
            double x = 0.0, y = 0.0;
#if SOURCE
            x = xc[k]; y = yc[k];
#endif
            cell_residual(fw, fe, gso, gno, x, y, vol[k], mmsc, res);
            if (store_r) for (int q = 0; q < 4; ++q) R[q * n + k] = res[q];
            cell_update_one(i, j, STAGE_START(0), STAGE_START(1), STAGE_START(2), STAGE_START(3), res, U0, dt,
                            vol, dtv, Vout, sxx, sxy, sex, sey, bw, be, bs, bn, nx, ny, alpha, cfl, first, last);
        }
    }
#endif
#undef STAGE_START
}
