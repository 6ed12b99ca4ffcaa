/* The 2-D heat equation, explicit 5-point update, with temporal tiling: one launch advances the whole grid
 * `steps_per_launch` time steps.
 *
 *   u'[y][x] = u[y][x] + alpha * (u[y][x-1] + u[y][x+1] + u[y-1][x] + u[y+1][x] - 4 u[y][x])
 *
 * on every interior cell; the cells of the grid's edge keep their values (fixed, Dirichlet, boundary).
 *
 * Each block owns a tile of (block_size_x * tile_x) x (block_size_y * tile_y) cells. It loads its tile and a
 * halo `steps_per_launch` cells wide into shared memory, then advances the loaded region step by step: a step
 * is exact one cell further in than the last (its neighbours there were exact after the step before), so
 * after `steps_per_launch` steps the block's own tile is exact and is written out. One launch therefore
 * reads and writes global memory once for `steps_per_launch` steps, at the price of recomputing the halo
 * (overlapped tiles); which trade wins is the card's, hence a tunable parameter. Two buffers of the region
 * live in dynamic shared memory (the spec's `shared_memory`).
 *
 * Tunable: block_size_x, block_size_y (the thread block), tile_x, tile_y (cells per thread in x and y),
 * steps_per_launch (the time steps one launch advances).
 */
extern "C" __global__ void heat(float *out, const float *in, const int nx, const int ny, const float alpha) {
    extern __shared__ float region[];
    const int T = steps_per_launch;
    const int W = block_size_x * tile_x + 2 * T;  /* the region: the tile and its halo */
    const int H = block_size_y * tile_y + 2 * T;
    float *a = region;
    float *b = region + W * H;
    const int x0 = blockIdx.x * (block_size_x * tile_x) - T;  /* the region's first cell on the grid */
    const int y0 = blockIdx.y * (block_size_y * tile_y) - T;

    for (int ly = threadIdx.y; ly < H; ly += block_size_y) {
        const int gy = y0 + ly;
        for (int lx = threadIdx.x; lx < W; lx += block_size_x) {
            const int gx = x0 + lx;
            a[ly * W + lx] = (gx >= 0 && gx < nx && gy >= 0 && gy < ny) ? in[gy * nx + gx] : 0.0f;
        }
    }
    __syncthreads();

    for (int s = 1; s <= T; s++) {  /* step s is exact on [s, W - s) x [s, H - s) */
        for (int ly = s + threadIdx.y; ly < H - s; ly += block_size_y) {
            const int gy = y0 + ly;
            for (int lx = s + threadIdx.x; lx < W - s; lx += block_size_x) {
                const int gx = x0 + lx;
                const int i = ly * W + lx;
                const float c = a[i];
                const bool interior = gx > 0 && gx < nx - 1 && gy > 0 && gy < ny - 1;
                b[i] = interior ? c + alpha * (a[i - 1] + a[i + 1] + a[i - W] + a[i + W] - 4.0f * c) : c;
            }
        }
        __syncthreads();
        float *t = a;
        a = b;
        b = t;
    }

    for (int ly = T + threadIdx.y; ly < H - T; ly += block_size_y) {
        const int gy = y0 + ly;
        if (gy >= ny) break;
        for (int lx = T + threadIdx.x; lx < W - T; lx += block_size_x) {
            const int gx = x0 + lx;
            if (gx < nx) out[gy * nx + gx] = a[ly * W + lx];
        }
    }
}
