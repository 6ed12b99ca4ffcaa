// The seven kernels of one Runge-Kutta stage of the 2D finite-volume Euler solver (FP64).
// Each thread handles one cell or face of a kernel's domain in a grid-stride loop, so any (blocks, threads)
// launch is valid and every element is computed by exactly one thread with the same instructions: results are
// bitwise identical across launch configurations. The arithmetic mirrors kernels/cfd/reference.py line by line
// (compiled with --fmad=false so the two agree to the last bit; only the MMS source's sin/cos may differ).
// Layout: [var][j][i], i fastest. V has two ghost layers: width W = nx + 4, var stride (ny + 4) * W.

#define GAMMA 1.4
#define TINY 1e-30
#define FIXED 0
#define WALL 1
#define EXTRAP 2

#define GRID_STRIDE(k, n) \
    for (unsigned int k = blockIdx.x * blockDim.x + threadIdx.x; k < (unsigned int)(n); k += gridDim.x * blockDim.x)

// Psi(dp/dm) * dm without the ratio (the limiters offered are symmetric, so this is also Psi(dm/dp) * dp):
// mirrors reference.limited_slope.
__device__ __forceinline__ double limited_slope(double dm, double dp, int limiter) {
    if (limiter == 1) return dm * dp > 0.0 ? copysign(fmin(fabs(dm), fabs(dp)), dm) : 0.0;
    if (limiter == 2) return (dp * fabs(dm) + fabs(dp) * dm) / (fabs(dm) + fabs(dp) + TINY);
    return fmax(0.0, dm * dp) * (dm + dp) / (dm * dm + dp * dp + TINY);
}

__device__ __forceinline__ void increments(double vm, double vc, double vp, int limiter, double c1, double c2,
                                           double* ip, double* im) {
    double dm = vc - vm;
    double dp = vp - vc;
    if (limiter == 0) {
        *ip = c1 * dm + c2 * dp;
        *im = c2 * dm + c1 * dp;
        return;
    }
    double s = limited_slope(dm, dp, limiter);
    *ip = c1 * s + c2 * s;
    *im = c2 * s + c1 * s;
}

extern "C" __global__ void xi_limiter(const double* __restrict__ V, double* __restrict__ incp,
                                      double* __restrict__ incm, int nx, int ny, int limiter, double c1,
                                      double c2) {
    const unsigned int w = nx + 2, W = nx + 4;
    const size_t vs = (size_t)(ny + 4) * W, is = (size_t)ny * w;
    GRID_STRIDE(k, w * ny) {
        unsigned int j = k / w, ii = k - j * w;  // cell i = ii - 1
        size_t c = (size_t)(j + 2) * W + ii + 1;
        for (int q = 0; q < 4; ++q) {
            double ip, im;
            increments(V[q * vs + c - 1], V[q * vs + c], V[q * vs + c + 1], limiter, c1, c2, &ip, &im);
            incp[q * is + k] = ip;
            incm[q * is + k] = im;
        }
    }
}

extern "C" __global__ void eta_limiter(const double* __restrict__ V, double* __restrict__ incp,
                                       double* __restrict__ incm, int nx, int ny, int limiter, double c1,
                                       double c2) {
    const unsigned int W = nx + 4;
    const size_t vs = (size_t)(ny + 4) * W, is = (size_t)(ny + 2) * nx;
    GRID_STRIDE(k, (unsigned int)nx * (ny + 2)) {
        unsigned int jj = k / nx, i = k - jj * nx;  // cell j = jj - 1
        size_t c = (size_t)(jj + 1) * W + i + 2;
        for (int q = 0; q < 4; ++q) {
            double ip, im;
            increments(V[q * vs + c - W], V[q * vs + c], V[q * vs + c + W], limiter, c1, c2, &ip, &im);
            incp[q * is + k] = ip;
            incm[q * is + k] = im;
        }
    }
}

// HLLC flux with Einfeldt's (Roe-averaged) wave speeds; (sx, sy) is the area-weighted face normal.
// Mirrors reference.hllc: the same four candidate fluxes, the same selection.
__device__ __forceinline__ void hllc(double rl, double ul, double vl, double pl, double rr, double ur, double vr,
                                     double pr, double sx, double sy, double* f) {
    const double g1 = GAMMA - 1.0;
    const double gg = GAMMA / (GAMMA - 1.0);
    double area = sqrt(sx * sx + sy * sy);
    double nx_ = sx / area;
    double ny_ = sy / area;
    double ql = ul * nx_ + vl * ny_;
    double qr = ur * nx_ + vr * ny_;
    double cl = sqrt(GAMMA * pl / rl);
    double cr = sqrt(GAMMA * pr / rr);
    double kl = 0.5 * (ul * ul + vl * vl);
    double kr = 0.5 * (ur * ur + vr * vr);
    double hl = gg * pl / rl + kl;
    double hr = gg * pr / rr + kr;
    double sl = sqrt(rl);
    double sr = sqrt(rr);
    double w = sl + sr;
    double ut = (sl * ul + sr * ur) / w;
    double vt = (sl * vl + sr * vr) / w;
    double ht = (sl * hl + sr * hr) / w;
    double ct = sqrt(g1 * (ht - 0.5 * (ut * ut + vt * vt)));
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
    double sm = (mr * qr - ml * ql + pl - pr) / (mr - ml);
    double ps = ml * (sm - ql) + pl;
    double m, u, v, q, p, e, s;
    if (sm >= 0.0) { m = ml; u = ul; v = vl; q = ql; p = pl; e = pl / g1 + rl * kl; s = s_l; }
    else { m = mr; u = ur; v = vr; q = qr; p = pr; e = pr / g1 + rr * kr; s = s_r; }
    double d = s - sm;
    double rs = m / d;
    double rus = (m * u + (ps - p) * nx_) / d;
    double rvs = (m * v + (ps - p) * ny_) / d;
    double es = ((s - q) * e - p * q + ps * sm) / d;
    f[0] = area * (rs * sm);
    f[1] = area * (rus * sm + ps * nx_);
    f[2] = area * (rvs * sm + ps * ny_);
    f[3] = area * ((es + ps) * sm);
}

extern "C" __global__ void xi_flux(const double* __restrict__ V, const double* __restrict__ incp,
                                   const double* __restrict__ incm, const double* __restrict__ sxx,
                                   const double* __restrict__ sxy, double* __restrict__ F, int nx, int ny) {
    const unsigned int w = nx + 1, W = nx + 4, iw = nx + 2;
    const size_t vs = (size_t)(ny + 4) * W, is = (size_t)ny * iw, fs = (size_t)ny * w;
    GRID_STRIDE(k, w * ny) {
        unsigned int j = k / w, f = k - j * w;  // face between cells f-1 and f
        size_t cl = (size_t)(j + 2) * W + f + 1, il = (size_t)j * iw + f;
        double l[4], r[4], out[4];
        for (int q = 0; q < 4; ++q) {
            l[q] = V[q * vs + cl] + incp[q * is + il];
            r[q] = V[q * vs + cl + 1] - incm[q * is + il + 1];
        }
        hllc(l[0], l[1], l[2], l[3], r[0], r[1], r[2], r[3], sxx[k], sxy[k], out);
        for (int q = 0; q < 4; ++q) F[q * fs + k] = out[q];
    }
}

extern "C" __global__ void eta_flux(const double* __restrict__ V, const double* __restrict__ incp,
                                    const double* __restrict__ incm, const double* __restrict__ sex,
                                    const double* __restrict__ sey, double* __restrict__ G, int nx, int ny) {
    const unsigned int W = nx + 4;
    const size_t vs = (size_t)(ny + 4) * W, is = (size_t)(ny + 2) * nx, gs = (size_t)(ny + 1) * nx;
    GRID_STRIDE(k, (unsigned int)nx * (ny + 1)) {
        unsigned int g = k / nx, i = k - g * nx;  // face between cells g-1 and g
        size_t cl = (size_t)(g + 1) * W + i + 2, il = (size_t)g * nx + i;
        double l[4], r[4], out[4];
        for (int q = 0; q < 4; ++q) {
            l[q] = V[q * vs + cl] + incp[q * is + il];
            r[q] = V[q * vs + cl + W] - incm[q * is + il + nx];
        }
        hllc(l[0], l[1], l[2], l[3], r[0], r[1], r[2], r[3], sex[k], sey[k], out);
        for (int q = 0; q < 4; ++q) G[q * gs + k] = out[q];
    }
}

// The manufactured-solution source times the cell area; c is (4, 5) row-major: phi0, phi_x, phi_y, a_x, a_y
// with the wave numbers already multiplied by pi/L. mode 0 writes zeros (inlet, free stream).
extern "C" __global__ void source(const double* __restrict__ xc, const double* __restrict__ yc,
                                  const double* __restrict__ vol, const double* __restrict__ c,
                                  double* __restrict__ S, int n, int mode) {
    GRID_STRIDE(k, n) {
        if (mode == 0) {
            S[k] = 0.0; S[n + k] = 0.0; S[2 * (size_t)n + k] = 0.0; S[3 * (size_t)n + k] = 0.0;
            continue;
        }
        double x = xc[k], y = yc[k];
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
        double a = vol[k];
        S[k] = (rx * u + r * ux + ry * v + r * vy) * a;
        S[n + k] = (rx * u * u + 2.0 * r * u * ux + px + ry * u * v + r * uy * v + r * u * vy) * a;
        S[2 * (size_t)n + k] = (rx * u * v + r * ux * v + r * u * vx + ry * v * v + 2.0 * r * v * vy + py) * a;
        S[3 * (size_t)n + k] = (ux * w + u * wx + vy * w + v * wy) * a;
    }
}

extern "C" __global__ void rhs(const double* __restrict__ F, const double* __restrict__ G,
                               const double* __restrict__ S, double* __restrict__ R, int nx, int ny) {
    const size_t n = (size_t)nx * ny, fs = (size_t)ny * (nx + 1), gs = (size_t)(ny + 1) * nx;
    GRID_STRIDE(k, n) {
        unsigned int j = k / nx, i = k - j * nx;
        size_t f = (size_t)j * (nx + 1) + i;
        for (int q = 0; q < 4; ++q)
            R[q * n + k] = S[q * n + k] - ((F[q * fs + f + 1] - F[q * fs + f]) + (G[q * gs + k + nx] - G[q * gs + k]));
    }
}

__device__ __forceinline__ void put_reflected(double* V, size_t vs, size_t at, double r, double u, double v,
                                              double p, double sx, double sy) {
    double a = sqrt(sx * sx + sy * sy);
    double nx_ = sx / a;
    double ny_ = sy / a;
    double un = u * nx_ + v * ny_;
    V[at] = r;
    V[vs + at] = u - 2.0 * un * nx_;
    V[2 * vs + at] = v - 2.0 * un * ny_;
    V[3 * vs + at] = p;
}

__device__ __forceinline__ void put(double* V, size_t vs, size_t at, double r, double u, double v, double p) {
    V[at] = r; V[vs + at] = u; V[2 * vs + at] = v; V[3 * vs + at] = p;
}

extern "C" __global__ void update(double* __restrict__ U0, const double* __restrict__ R, double* __restrict__ dt,
                                  const double* __restrict__ vol, const double* __restrict__ dtv,
                                  double* __restrict__ V, const double* __restrict__ sxx,
                                  const double* __restrict__ sxy, const double* __restrict__ sex,
                                  const double* __restrict__ sey, const int* __restrict__ bw,
                                  const int* __restrict__ be, const int* __restrict__ bs,
                                  const int* __restrict__ bn, int nx, int ny, double alpha, double cfl, int first,
                                  int last) {
    const double g1 = GAMMA - 1.0;
    const unsigned int W = nx + 4;
    const size_t n = (size_t)nx * ny, vs = (size_t)(ny + 4) * W;
    GRID_STRIDE(k, n) {
        unsigned int j = k / nx, i = k - j * nx;
        size_t c = (size_t)(j + 2) * W + i + 2;
        double dtc;
        if (first) {
            double r = V[c], u = V[vs + c], v = V[2 * vs + c], p = V[3 * vs + c];
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
        double u0 = U0[k] + f * R[k];
        double u1 = U0[n + k] + f * R[n + k];
        double u2 = U0[2 * n + k] + f * R[2 * n + k];
        double u3 = U0[3 * n + k] + f * R[3 * n + k];
        double r = u0;
        double u = u1 / r;
        double v = u2 / r;
        double p = g1 * (u3 - 0.5 * r * (u * u + v * v));
        put(V, vs, c, r, u, v, p);
        if (last) { U0[k] = u0; U0[n + k] = u1; U0[2 * n + k] = u2; U0[3 * n + k] = u3; }
        // Ghost cells: cell k (k = 0, 1) from a boundary writes the mirror ghost -1-k of a wall; the boundary
        // cell writes both outflow ghosts. Each ghost has exactly one writer, so there is no race.
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
}
