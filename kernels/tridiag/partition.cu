// Austin-Berndt-Moulton partition method, FP64: one thread per sub-system of M rows (M is a compile-time
// constant, so the stage-3 work arrays unroll into registers). The math is the same as kernels/tridiag/partition.py;
// the reduced-system (stage 2 on the device) math is the same as kernels/tridiag/reduced.py.
//
// A system is four separate row pointers a, b, c, d of n entries; a[0] and c[n-1] are ignored; rows >= n are
// identity rows (x = 0). The (4, n) array of the host path passes its four rows. Grid-stride over the
// sub-systems [k0, k1) of one chunk, so any block count is valid.
//
// Three kernel families, each for the top level (sub-systems of M rows) and for the reduced levels (MR rows):
//   stage1 / stage1_r: two interface rows per sub-system, written to the next level's (a, b, c, d) at 2k, 2k+1;
//   stage3 / stage3_r: every unknown of every sub-system given the next level's solution z (at 2k, 2k+1);
//   pcr_small:         one block solves the last, small reduced system (<= PCR_MAX unknowns) by parallel cyclic
//                      reduction in shared memory, in place (x written over d).
// Error flags (atomicOr into *flag): 1 = an exact zero pivot, 2 = a NaN or Inf in the system.

#ifndef M
#define M 10
#endif
#ifndef MR
#define MR 32
#endif
#ifndef PCR_MAX
#define PCR_MAX 1024
#endif

#define FLAG_ZERO_PIVOT 1
#define FLAG_NONFINITE 2

struct Row { double a, b, c, d; };

__device__ __forceinline__ Row load_row(const double* __restrict__ A, const double* __restrict__ B,
                                        const double* __restrict__ C, const double* __restrict__ D,
                                        long long n, long long r) {
    Row w;
    if (r >= n) { w.a = 0.0; w.b = 1.0; w.c = 0.0; w.d = 0.0; return w; }
    w.a = (r == 0) ? 0.0 : A[r];
    w.b = B[r];
    w.c = (r == n - 1) ? 0.0 : C[r];
    w.d = D[r];
    return w;
}

__device__ __forceinline__ bool finite_row(const Row& w) {
    return isfinite(w.a) && isfinite(w.b) && isfinite(w.c) && isfinite(w.d);
}

// Row j (0 .. MM - 1) of sub-system k: from global memory (rows >= n are identity rows) or from a shared-memory
// tile (the staged kernels below). The stage-1 and stage-3 arithmetic is written once, over either.
struct GlobalRows {
    const double* A;
    const double* B;
    const double* C;
    const double* D;
    long long n, r0;
    __device__ __forceinline__ Row operator()(int j) const { return load_row(A, B, C, D, n, r0 + j); }
};

// Stage 1 of one sub-system: its two interface rows (top: its first row's equation, bottom: its last row's), with
// the interior eliminated; zero / bad collect an exact zero pivot and a non-finite entry.
template <int MM, class Rows>
__device__ __forceinline__ void stage1_rows(const Rows& row, Row& top, Row& bot, bool& zero, bool& bad) {
    constexpr int JJ = MM - 2;
    const Row first = row(0), last = row(MM - 1);
    const double a_in = row(1).a;       // couples the first unknown into the first interior row
    const double c_in = row(MM - 2).c;  // couples the last unknown into the last interior row
    bad |= !(finite_row(first) && finite_row(last));
    // top-down elimination over the interior: ends on the last entries of y, u, v
    double cp = 0.0, y = 0.0, u = 0.0, v = 0.0;
#pragma unroll
    for (int j = 0; j < JJ; ++j) {
        const Row w = row(1 + j);
        bad |= !finite_row(w);
        const double ru = (j == 0) ? a_in : 0.0, rv = (j == JJ - 1) ? c_in : 0.0;
        const double den = w.b - w.a * cp;
        zero |= (den == 0.0);
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
    for (int j = JJ - 1; j >= 0; --j) {
        const Row w = row(1 + j);
        const double ru = (j == 0) ? a_in : 0.0, rv = (j == JJ - 1) ? c_in : 0.0;
        const double den = w.b - w.c * cq;
        zero |= (den == 0.0);
        const double inv = 1.0 / den;
        cq = w.a * inv;
        y = (w.d - w.c * y) * inv;
        u = (ru - w.c * u) * inv;
        v = (rv - w.c * v) * inv;
    }
    top.a = first.a;
    top.b = first.b - first.c * u;
    top.c = -first.c * v;
    top.d = first.d - first.c * y;
    bot.a = -last.a * u_last;
    bot.b = last.b - last.a * v_last;
    bot.c = last.c;
    bot.d = last.d - last.a * y_last;
}

template <int MM>
__device__ __forceinline__ void stage1_one(const double* __restrict__ A, const double* __restrict__ B,
                                           const double* __restrict__ C, const double* __restrict__ D,
                                           long long n, long long k, Row& top, Row& bot, bool& zero,
                                           bool& bad) {
    stage1_rows<MM>(GlobalRows{A, B, C, D, n, k * MM}, top, bot, zero, bad);
}

template <int MM>
__device__ __forceinline__ void stage1_body(const double* __restrict__ A, const double* __restrict__ B,
                                            const double* __restrict__ C, const double* __restrict__ D,
                                            long long n, long long k0, long long k1,
                                            double* __restrict__ oa, double* __restrict__ ob,
                                            double* __restrict__ oc, double* __restrict__ od,
                                            int* __restrict__ flag) {
    for (long long k = k0 + blockIdx.x * (long long)blockDim.x + threadIdx.x; k < k1;
         k += (long long)gridDim.x * blockDim.x) {
        Row top, bot;
        bool zero = false, bad = false;
        stage1_one<MM>(A, B, C, D, n, k, top, bot, zero, bad);
        if (zero) atomicOr(flag, FLAG_ZERO_PIVOT);
        if (bad) atomicOr(flag, FLAG_NONFINITE);
        const long long q = 2 * k;
        oa[q] = top.a; ob[q] = top.b; oc[q] = top.c; od[q] = top.d;
        oa[q + 1] = bot.a; ob[q + 1] = bot.b; oc[q + 1] = bot.c; od[q + 1] = bot.d;
    }
}

// Where stage 3 puts unknown j (0 .. MM - 1) of sub-system k: x in global memory (rows < n only) or the tile.
struct GlobalOut {
    double* x;
    long long n, r0;
    __device__ __forceinline__ void operator()(int j, double v) const {
        if (r0 + j < n) x[r0 + j] = v;
    }
};

// Stage 3 of one sub-system given its interface values x0 (first row) and x1 (last row). In place (the output
// aliasing the rows' d) is safe: the forward sweep reads every interior row before any unknown is put.
template <int MM, class Rows, class Out>
__device__ __forceinline__ void stage3_rows(const Rows& row, double x0, double x1, const Out& put) {
    constexpr int JJ = MM - 2;
    double cp[JJ], dp[JJ];
    double prev_c = 0.0, prev_d = 0.0;
#pragma unroll
    for (int j = 0; j < JJ; ++j) {
        const Row w = row(1 + j);
        double rhs = w.d;
        if (j == 0) rhs -= w.a * x0;
        if (j == JJ - 1) rhs -= w.c * x1;
        const double inv = 1.0 / (w.b - w.a * prev_c);
        prev_c = cp[j] = w.c * inv;
        prev_d = dp[j] = (rhs - w.a * prev_d) * inv;
    }
    put(0, x0);
    put(MM - 1, x1);
    double xi = dp[JJ - 1];
    put(JJ, xi);
#pragma unroll
    for (int j = JJ - 2; j >= 0; --j) {
        xi = dp[j] - cp[j] * xi;
        put(1 + j, xi);
    }
}

template <int MM>
__device__ __forceinline__ void stage3_one(const double* __restrict__ A, const double* __restrict__ B,
                                           const double* __restrict__ C, const double* D, long long n,
                                           long long k, double x0, double x1, double* x) {
    stage3_rows<MM>(GlobalRows{A, B, C, D, n, k * MM}, x0, x1, GlobalOut{x, n, k * MM});
}

template <int MM>
__device__ __forceinline__ void stage3_body(const double* __restrict__ A, const double* __restrict__ B,
                                            const double* __restrict__ C, const double* D,
                                            long long n, long long k0, long long k1,
                                            const double* __restrict__ z, double* x) {
    for (long long k = k0 + blockIdx.x * (long long)blockDim.x + threadIdx.x; k < k1;
         k += (long long)gridDim.x * blockDim.x) {
        stage3_one<MM>(A, B, C, D, n, k, z[2 * k], z[2 * k + 1], x);
    }
}

#define STAGE1_ARGS                                                                                     \
    const double *__restrict__ A, const double *__restrict__ B, const double *__restrict__ C,            \
        const double *__restrict__ D, long long n, long long k0, long long k1, double *__restrict__ oa,  \
        double *__restrict__ ob, double *__restrict__ oc, double *__restrict__ od, int *__restrict__ flag
#define STAGE3_ARGS                                                                                      \
    const double *__restrict__ A, const double *__restrict__ B, const double *__restrict__ C,             \
        const double *D, long long n, long long k0, long long k1, const double *__restrict__ z, double *x

extern "C" __global__ void stage1(STAGE1_ARGS) { stage1_body<M>(A, B, C, D, n, k0, k1, oa, ob, oc, od, flag); }
extern "C" __global__ void stage1_r(STAGE1_ARGS) { stage1_body<MR>(A, B, C, D, n, k0, k1, oa, ob, oc, od, flag); }
extern "C" __global__ void stage3(STAGE3_ARGS) { stage3_body<M>(A, B, C, D, n, k0, k1, z, x); }
extern "C" __global__ void stage3_r(STAGE3_ARGS) { stage3_body<MR>(A, B, C, D, n, k0, k1, z, x); }

// One block of blockDim.x >= n threads (a power of two, <= PCR_MAX): thread i owns row i. Each step eliminates
// the couplings to rows i - s and i + s, doubling s, until every row is decoupled; then x_i = d_i / b_i.
// Rows outside [0, n) read as identity rows, so no step needs a bounds case. Same steps as reduced.pcr.
extern "C" __global__ void pcr_small(double* __restrict__ A, double* __restrict__ B, double* __restrict__ C,
                                     double* __restrict__ D, long long n, int* __restrict__ flag) {
    // sr holds 1 / b of every row, for its neighbours: each row's owner divides once per step (its neighbours
    // multiply), and keeps its own b in a register.
    __shared__ double sa[PCR_MAX], sr[PCR_MAX], sc[PCR_MAX], sd[PCR_MAX];
    const int i = threadIdx.x, N = blockDim.x;
    const Row w = load_row(A, B, C, D, n, i);
    bool zero = (w.b == 0.0), bad = (i < n) && !finite_row(w);
    double b = w.b;
    sa[i] = w.a; sr[i] = 1.0 / w.b; sc[i] = w.c; sd[i] = w.d;
    for (int s = 1; s < N; s *= 2) {
        __syncthreads();
        const int lo = i - s, hi = i + s;
        const double am = lo >= 0 ? sa[lo] : 0.0, rm = lo >= 0 ? sr[lo] : 1.0;
        const double cm = lo >= 0 ? sc[lo] : 0.0, dm = lo >= 0 ? sd[lo] : 0.0;
        const double ap = hi < N ? sa[hi] : 0.0, rp = hi < N ? sr[hi] : 1.0;
        const double cpv = hi < N ? sc[hi] : 0.0, dpv = hi < N ? sd[hi] : 0.0;
        const double k1 = sa[i] * rm, k2 = sc[i] * rp;
        const double na = -am * k1, nb = b - cm * k1 - ap * k2, nc = -cpv * k2;
        const double nd = sd[i] - dm * k1 - dpv * k2;
        zero |= (nb == 0.0);
        __syncthreads();
        sa[i] = na; sr[i] = 1.0 / nb; sc[i] = nc; sd[i] = nd;
        b = nb;
    }
    if (i < n) {
        if (zero) atomicOr(flag, FLAG_ZERO_PIVOT);
        if (bad) atomicOr(flag, FLAG_NONFINITE);
        D[i] = sd[i] / b;
    }
}

// ---- shared-memory staged variants (issue 21: stage 2's latency) ------------------------------------------
// The same arithmetic as stage1_body / stage3_body (stage1_rows / stage3_rows: the same bits), but a block of
// one warp first copies its 32 sub-systems' rows into shared memory with coalesced loads (every load of the tile in
// flight at once), and each thread then eliminates its own rows from there. A reduced-level kernel has few
// threads (2 x 10^6 rows at 10^7 unknowns = 62,500 sub-systems of 32 rows), so the plain kernels' serial chain of
// one DRAM round trip per row sets their time; staged, the chain runs on shared-memory latency. Rows are stored
// per sub-system with a stride of MM + 1 doubles, so the 32 threads of a warp hit distinct banks.

#define TILE 32

struct Tile { double* a; double* b; double* c; double* d; };

template <int MM>
__device__ __forceinline__ void load_tile(const double* __restrict__ A, const double* __restrict__ B,
                                          const double* __restrict__ C, const double* D, long long n,
                                          long long first_row, const Tile& s) {
    for (int i = threadIdx.x; i < TILE * MM; i += TILE) {
        const Row w = load_row(A, B, C, D, n, first_row + i);
        const int at = (i / MM) * (MM + 1) + i % MM;
        s.a[at] = w.a; s.b[at] = w.b; s.c[at] = w.c; s.d[at] = w.d;
    }
    __syncwarp();
}

__device__ __forceinline__ Row tile_row(const Tile& s, int at) {
    Row w; w.a = s.a[at]; w.b = s.b[at]; w.c = s.c[at]; w.d = s.d[at]; return w;
}

struct TileRows {  // a thread's sub-system in the tile: rows base .. base + MM - 1
    Tile s;
    int base;
    __device__ __forceinline__ Row operator()(int j) const { return tile_row(s, base + j); }
};

struct TileOut {  // stage 3's unknowns over the sub-system's d rows of the tile
    double* sd;
    int base;
    __device__ __forceinline__ void operator()(int j, double v) const { sd[base + j] = v; }
};

template <int MM>
__device__ __forceinline__ void stage1_staged(const double* __restrict__ A, const double* __restrict__ B,
                                              const double* __restrict__ C, const double* __restrict__ D,
                                              long long n, long long k0, long long k1,
                                              double* __restrict__ oa, double* __restrict__ ob,
                                              double* __restrict__ oc, double* __restrict__ od,
                                              int* __restrict__ flag) {
    constexpr int S = MM + 1;
    __shared__ double sa[TILE * S], sb[TILE * S], sc[TILE * S], sd[TILE * S];
    const Tile s = {sa, sb, sc, sd};
    for (long long k_tile = k0 + blockIdx.x * (long long)TILE; k_tile < k1; k_tile += (long long)gridDim.x * TILE) {
        load_tile<MM>(A, B, C, D, n, k_tile * MM, s);
        const long long k = k_tile + threadIdx.x;
        const int base = threadIdx.x * S;
        if (k < k1) {
            Row top, bot;
            bool zero = false, bad = false;
            stage1_rows<MM>(TileRows{s, base}, top, bot, zero, bad);
            if (zero) atomicOr(flag, FLAG_ZERO_PIVOT);
            if (bad) atomicOr(flag, FLAG_NONFINITE);
            const long long q = 2 * k;
            oa[q] = top.a; ob[q] = top.b; oc[q] = top.c; od[q] = top.d;
            oa[q + 1] = bot.a; ob[q + 1] = bot.b; oc[q + 1] = bot.c; od[q + 1] = bot.d;
        }
        __syncwarp();  // the tile is read by every thread before the next one overwrites it
    }
}

// x may alias D: the whole tile is in shared memory before any x of it is written, and tiles are disjoint.
template <int MM>
__device__ __forceinline__ void stage3_staged(const double* __restrict__ A, const double* __restrict__ B,
                                              const double* __restrict__ C, const double* D,
                                              long long n, long long k0, long long k1,
                                              const double* __restrict__ z, double* x) {
    constexpr int S = MM + 1;
    __shared__ double sa[TILE * S], sb[TILE * S], sc[TILE * S], sd[TILE * S];
    const Tile s = {sa, sb, sc, sd};
    for (long long k_tile = k0 + blockIdx.x * (long long)TILE; k_tile < k1; k_tile += (long long)gridDim.x * TILE) {
        load_tile<MM>(A, B, C, D, n, k_tile * MM, s);
        const long long k = k_tile + threadIdx.x;
        const int base = threadIdx.x * S;
        if (k < k1) {
            // the solution goes over this thread's own d rows of the tile (read by this thread only)
            stage3_rows<MM>(TileRows{s, base}, z[2 * k], z[2 * k + 1], TileOut{sd, base});
        }
        __syncwarp();
        const long long r_first = k_tile * MM;
        const long long r_end = min(k1 * (long long)MM, n);  // rows of sub-systems in [k_tile, k1), inside n
        for (int i = threadIdx.x; i < TILE * MM; i += TILE) {
            const long long r = r_first + i;
            if (r < r_end) x[r] = sd[(i / MM) * S + i % MM];
        }
        __syncwarp();
    }
}

extern "C" __global__ void __launch_bounds__(TILE) stage1_rs(STAGE1_ARGS) {
    stage1_staged<MR>(A, B, C, D, n, k0, k1, oa, ob, oc, od, flag);
}
extern "C" __global__ void __launch_bounds__(TILE) stage3_rs(STAGE3_ARGS) {
    stage3_staged<MR>(A, B, C, D, n, k0, k1, z, x);
}

// ---- SPIKE slices (issue 21: few kernels between the last upload and the first download) -------------------
// A block owns a slice of SLICE consecutive sub-systems. spike_reduce runs stage 1 of each (one thread per
// sub-system) into shared memory, which gives the slice's 2 * SLICE interface rows, and solves that block by PCR
// for three right-hand sides at once with its outer couplings cut: P (the rows' own d), R (a unit vector at the
// first row) and Q (a unit vector at the last row). The slice's interface solution is then
//     z = P - a_first * w_prev * R - c_last * u_next * Q,
// where a_first couples its first row to the previous slice's last unknown w_prev and c_last its last row to
// the next slice's first unknown u_next. Those end unknowns (u, w per slice) satisfy a tridiagonal "top" system
// of 2 rows per slice, written here by each block from its own P, R, Q ends (rows combined so that each couples
// only to its neighbours: see kernels/tridiag/reduced.py, spike_top_rows). Once the top system is solved
// (partition levels and one PCR block, as stage 2), spike_back forms z and runs stage 3 for each sub-system.
// Rows of sub-systems >= p are identity rows, so a partial last slice needs no special case.
#ifndef SLICE
#define SLICE 512
#endif
#define SLICE_ROWS (2 * SLICE)

// PCR on SLICE_ROWS rows in shared memory with three right-hand sides; SLICE threads, two rows each. The same
// steps as pcr_small, so each right-hand side gets the bits a one-rhs PCR of the same rows would give.
__device__ __forceinline__ void pcr3(double* sa, double* sr, double* sc, double* s0, double* s1, double* s2,
                                     double* own_b, bool& zero) {
    // sr holds 1 / b of every row for its neighbours (as in pcr_small); own_b[q]: this thread's rows' b
    for (int s = 1; s < SLICE_ROWS; s *= 2) {
        __syncthreads();
        double na[2], nb[2], nc[2], n0[2], n1[2], n2[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int i = threadIdx.x + q * SLICE, lo = i - s, hi = i + s;
            const bool ol = lo >= 0, oh = hi < SLICE_ROWS;
            const double am = ol ? sa[lo] : 0.0, rm = ol ? sr[lo] : 1.0, cm = ol ? sc[lo] : 0.0;
            const double ap = oh ? sa[hi] : 0.0, rp = oh ? sr[hi] : 1.0, cpv = oh ? sc[hi] : 0.0;
            const double k1 = sa[i] * rm, k2 = sc[i] * rp;
            na[q] = -am * k1;
            nb[q] = own_b[q] - cm * k1 - ap * k2;
            nc[q] = -cpv * k2;
            n0[q] = s0[i] - (ol ? s0[lo] : 0.0) * k1 - (oh ? s0[hi] : 0.0) * k2;
            n1[q] = s1[i] - (ol ? s1[lo] : 0.0) * k1 - (oh ? s1[hi] : 0.0) * k2;
            n2[q] = s2[i] - (ol ? s2[lo] : 0.0) * k1 - (oh ? s2[hi] : 0.0) * k2;
            zero |= (nb[q] == 0.0);
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int i = threadIdx.x + q * SLICE;
            sa[i] = na[q]; sr[i] = 1.0 / nb[q]; sc[i] = nc[q]; s0[i] = n0[q]; s1[i] = n1[q]; s2[i] = n2[q];
            own_b[q] = nb[q];
        }
    }
    __syncthreads();
}

// prq: 3 rows of slices * SLICE_ROWS (P, R, Q); ends: 2 rows of slices (a_first, c_last); t*: the top system.
extern "C" __global__ void __launch_bounds__(SLICE) spike_reduce(
    const double* __restrict__ A, const double* __restrict__ B, const double* __restrict__ C,
    const double* __restrict__ D, long long n, long long p, long long sl0, long long sl1, long long slices,
    double* __restrict__ prq, double* __restrict__ ends, double* __restrict__ ta, double* __restrict__ tb,
    double* __restrict__ tc, double* __restrict__ td, int* __restrict__ flag) {
    __shared__ double sa[SLICE_ROWS], sb[SLICE_ROWS], sc[SLICE_ROWS];  // sb: b, then 1 / b (pcr3)
    __shared__ double s0[SLICE_ROWS], s1[SLICE_ROWS], s2[SLICE_ROWS];
    const long long stride = slices * (long long)SLICE_ROWS;
    const int j = threadIdx.x;
    for (long long sl = sl0 + blockIdx.x; sl < sl1; sl += gridDim.x) {
        const long long k = sl * SLICE + j;
        Row top, bot;
        bool zero = false, bad = false;
        if (k < p) {
            stage1_one<M>(A, B, C, D, n, k, top, bot, zero, bad);
        } else {
            top.a = 0.0; top.b = 1.0; top.c = 0.0; top.d = 0.0;
            bot = top;
        }
        sa[2 * j] = top.a; sc[2 * j] = top.c; s0[2 * j] = top.d;
        sa[2 * j + 1] = bot.a; sc[2 * j + 1] = bot.c; s0[2 * j + 1] = bot.d;
        double own_b[2];  // rows j and j + SLICE: this thread's rows in the PCR below
        zero |= (top.b == 0.0) || (bot.b == 0.0);
        s1[2 * j] = 0.0; s1[2 * j + 1] = 0.0; s2[2 * j] = 0.0; s2[2 * j + 1] = 0.0;
        sb[2 * j] = top.b; sb[2 * j + 1] = bot.b;  // b for now; 1 / b once every thread has read its own rows
        __syncthreads();
        const double a_first = sa[0], c_last = sc[SLICE_ROWS - 1];
        own_b[0] = sb[j]; own_b[1] = sb[j + SLICE];
        __syncthreads();
        sb[j] = 1.0 / own_b[0]; sb[j + SLICE] = 1.0 / own_b[1];
        if (j == 0) {
            sa[0] = 0.0;
            s1[0] = 1.0;
            sc[SLICE_ROWS - 1] = 0.0;
            s2[SLICE_ROWS - 1] = 1.0;
        }
        pcr3(sa, sb, sc, s0, s1, s2, own_b, zero);
        if (zero) atomicOr(flag, FLAG_ZERO_PIVOT);
        if (bad) atomicOr(flag, FLAG_NONFINITE);
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int i = j + q * SLICE;
            const long long at = sl * SLICE_ROWS + i;
            s0[i] /= own_b[q];  // the solutions (kept for the top rows below)
            s1[i] /= own_b[q];
            s2[i] /= own_b[q];
            prq[at] = s0[i];
            prq[stride + at] = s1[i];
            prq[2 * stride + at] = s2[i];
        }
        __syncthreads();
        if (j == 0) {
            const int L = SLICE_ROWS - 1;
            const double p0 = s0[0], pl = s0[L];
            const double r0 = s1[0], rl = s1[L];
            const double q0 = s2[0], ql = s2[L];
            ends[sl] = a_first;
            ends[slices + sl] = c_last;
            // row u (the slice's first unknown): couples to w of the slice before and to w of this slice
            ta[2 * sl] = a_first * (r0 - q0 * rl / ql);
            tb[2 * sl] = 1.0;
            tc[2 * sl] = -q0 / ql;
            td[2 * sl] = p0 - q0 * pl / ql;
            // row w (the slice's last unknown): couples to u of this slice and to u of the slice after
            ta[2 * sl + 1] = -rl / r0;
            tb[2 * sl + 1] = 1.0;
            tc[2 * sl + 1] = c_last * (ql - rl * q0 / r0);
            td[2 * sl + 1] = pl - rl * p0 / r0;
        }
        __syncthreads();  // the slice's shared rows are read before the next slice overwrites them
    }
}

// spike_back_s, the staged spike_back, copies each warp's rows through shared memory with coalesced loads and
// stores its unknowns the same way: a thread's sub-system is M consecutive rows, so spike_back's loads and its
// stores of x touch a new 128-byte line for every lane (measured on the H100: 10% off spike_back; the same
// staging in spike_reduce gained nothing: likely the slice's PCR, not profiled). A warp's tile is 32 x (M + 1)
// doubles of one array at a time (stride M + 1: the lanes read distinct banks); compiled for M <= 11, where the
// block's tiles (SLICE x (M + 1) doubles) fit in 48 KiB and each thread keeps its 4 M row entries in registers.
#define SPIKE_TILE (32 * (M + 1))
#define SPIKE_STAGED (M <= 11)

// Entry r of one array of the system (which: 0 a, 1 b, 2 c, 3 d), with load_row's conventions.
__device__ __forceinline__ double row_entry(const double* __restrict__ X, int which, long long n, long long r) {
    if (r >= n) return which == 1 ? 1.0 : 0.0;
    if ((which == 0 && r == 0) || (which == 2 && r == n - 1)) return 0.0;
    return X[r];
}

struct RegRows {  // a thread's sub-system held in registers (indices are compile-time once unrolled)
    const Row* w;
    __device__ __forceinline__ Row operator()(int j) const { return w[j]; }
};

// rows[j] = row r0 + lane * MM + j: the rows of the warp's 32 sub-systems from r0 on, one array at a time
// through the warp's tile, every load of an array coalesced and in flight at once. Every lane of the warp
// must call it (rows past n are identity rows and read nothing).
template <int MM>
__device__ __forceinline__ void stage_rows(const double* __restrict__ A, const double* __restrict__ B,
                                           const double* __restrict__ C, const double* __restrict__ D,
                                           long long n, long long r0, double* tile, Row (&rows)[MM]) {
    const int lane = threadIdx.x & 31;
    const double* arrays[4] = {A, B, C, D};
#pragma unroll
    for (int which = 0; which < 4; ++which) {
#pragma unroll
        for (int i = lane; i < 32 * MM; i += 32) {
            tile[(i / MM) * (MM + 1) + i % MM] = row_entry(arrays[which], which, n, r0 + i);
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < MM; ++j) {
            const double v = tile[lane * (MM + 1) + j];
            if (which == 0) rows[j].a = v;
            else if (which == 1) rows[j].b = v;
            else if (which == 2) rows[j].c = v;
            else rows[j].d = v;
        }
        __syncwarp();  // every lane has its entries before the next array overwrites the tile
    }
}

// The slice's interface values z (2 per sub-system) from its spikes and the top solution y (u, w per slice).
__device__ __forceinline__ void spike_z(long long sl, long long slices, const double* __restrict__ prq,
                                        const double* __restrict__ ends, const double* __restrict__ y, double* z) {
    const long long stride = slices * (long long)SLICE_ROWS;
    const int j = threadIdx.x;
    const double w_prev = sl > 0 ? y[2 * sl - 1] : 0.0;
    const double u_next = sl + 1 < slices ? y[2 * sl + 2] : 0.0;
    const double left = ends[sl] * w_prev, right = ends[slices + sl] * u_next;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        const long long at = sl * SLICE_ROWS + j + q * SLICE;
        z[j + q * SLICE] = prq[at] - left * prq[stride + at] - right * prq[2 * stride + at];
    }
}

#define SPIKE_BACK_ARGS                                                                                         \
    const double *__restrict__ A, const double *__restrict__ B, const double *__restrict__ C, const double *D, \
        long long n, long long p, long long sl0, long long sl1, long long slices, const double *__restrict__ prq, \
        const double *__restrict__ ends, const double *__restrict__ y, double *x

// y: the top system's solution (u, w per slice). x may alias D (stage3_one reads before it writes).
extern "C" __global__ void __launch_bounds__(SLICE) spike_back(SPIKE_BACK_ARGS) {
    __shared__ double z[SLICE_ROWS];
    const int j = threadIdx.x;
    for (long long sl = sl0 + blockIdx.x; sl < sl1; sl += gridDim.x) {
        spike_z(sl, slices, prq, ends, y, z);
        __syncthreads();
        const long long k = sl * SLICE + j;
        if (k < p) stage3_one<M>(A, B, C, D, n, k, z[2 * j], z[2 * j + 1], x);
        __syncthreads();
    }
}

#if SPIKE_STAGED
// spike_back with each warp's rows staged and its unknowns stored through the tile (coalesced); the same
// arithmetic, so the same bits. x may alias D: a warp writes only its own rows, after staging all of them.
extern "C" __global__ void __launch_bounds__(SLICE) spike_back_s(SPIKE_BACK_ARGS) {
    __shared__ double buf[SLICE * (M + 1)];  // z (SLICE_ROWS doubles) first, then the warps' tiles
    const int j = threadIdx.x, lane = j & 31;
    double* tile = buf + (j / 32) * SPIKE_TILE;
    for (long long sl = sl0 + blockIdx.x; sl < sl1; sl += gridDim.x) {
        spike_z(sl, slices, prq, ends, y, buf);
        __syncthreads();
        const double x0 = buf[2 * j], x1 = buf[2 * j + 1];
        __syncthreads();  // z is read: the tiles may overwrite it
        const long long k = sl * SLICE + j, r0 = (k - lane) * (long long)M;  // r0: the warp's first row
        Row rows[M];
        stage_rows<M>(A, B, C, D, n, r0, tile, rows);
        if (k < p) stage3_rows<M>(RegRows{rows}, x0, x1, TileOut{tile, lane * (M + 1)});
        __syncwarp();
#pragma unroll
        for (int i = lane; i < 32 * M; i += 32) {
            const long long r = r0 + i;
            if (r < n) x[r] = tile[(i / M) * (M + 1) + i % M];
        }
        __syncthreads();  // every tile is stored before the next slice's z overwrites it
    }
}
#endif

// PCR for a top system of PCR_MAX + 1 .. 2 PCR_MAX unknowns in one block (the SPIKE slices' top system at 2.5-5 x
// 10^6 unknowns, where a partition level and its way back would cost two more launches): blockDim.x = PCR_MAX
// threads, two rows each (i and i + PCR_MAX), rows >= n identity rows; the same steps as pcr_small (1 / b shared,
// own b in registers), on 2 x PCR_MAX rows in dynamic shared memory (4 arrays: 64 KiB at PCR_MAX = 1024).
extern "C" __global__ void __launch_bounds__(PCR_MAX) pcr_big(double* __restrict__ A, double* __restrict__ B,
                                                             double* __restrict__ C, double* __restrict__ D,
                                                             long long n, int* __restrict__ flag) {
    extern __shared__ double big[];
    constexpr int N = 2 * PCR_MAX;
    double* sa = big;
    double* sr = big + N;
    double* sc = big + 2 * N;
    double* sd = big + 3 * N;
    bool zero = false, bad = false;
    double own_b[2];
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        const int i = threadIdx.x + q * PCR_MAX;
        const Row w = load_row(A, B, C, D, n, i);
        bad |= (i < n) && !finite_row(w);
        zero |= (w.b == 0.0);
        own_b[q] = w.b;
        sa[i] = w.a; sr[i] = 1.0 / w.b; sc[i] = w.c; sd[i] = w.d;
    }
    for (int s = 1; s < N; s *= 2) {
        __syncthreads();
        double na[2], nb[2], nc[2], nd[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int i = threadIdx.x + q * PCR_MAX, lo = i - s, hi = i + s;
            const bool ol = lo >= 0, oh = hi < N;
            const double am = ol ? sa[lo] : 0.0, rm = ol ? sr[lo] : 1.0, cm = ol ? sc[lo] : 0.0;
            const double dm = ol ? sd[lo] : 0.0;
            const double ap = oh ? sa[hi] : 0.0, rp = oh ? sr[hi] : 1.0, cpv = oh ? sc[hi] : 0.0;
            const double dpv = oh ? sd[hi] : 0.0;
            const double k1 = sa[i] * rm, k2 = sc[i] * rp;
            na[q] = -am * k1;
            nb[q] = own_b[q] - cm * k1 - ap * k2;
            nc[q] = -cpv * k2;
            nd[q] = sd[i] - dm * k1 - dpv * k2;
            zero |= (nb[q] == 0.0);
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int i = threadIdx.x + q * PCR_MAX;
            sa[i] = na[q]; sr[i] = 1.0 / nb[q]; sc[i] = nc[q]; sd[i] = nd[q];
            own_b[q] = nb[q];
        }
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        const int i = threadIdx.x + q * PCR_MAX;
        if (i < n) D[i] = sd[i] / own_b[q];
    }
    if (zero) atomicOr(flag, FLAG_ZERO_PIVOT);
    if (bad) atomicOr(flag, FLAG_NONFINITE);
}
