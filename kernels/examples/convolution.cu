/* 2-D convolution for the `kernel` workload (docs/kernel.md), written for this project from the algorithm:

       output[y][x] = sum over i < filter_height, j < filter_width of input[y + i][x + j] * filter[i][j]

   output is height x width, input (height + filter_height - 1) x (width + filter_width - 1), row-major.
   Every tunable parameter arrives as a #define (Kernel Tuner's convention); the defaults below only let the
   file compile on its own.

   block_size_x, block_size_y  threads of a block
   tile_size_x, tile_size_y    outputs per thread in x and y (a block covers block_size * tile_size outputs;
                               a thread's outputs are block_size apart, so neighbouring threads touch
                               neighbouring addresses)
   read_only                   1: global loads through the read-only data cache (__ldg)
   use_shmem                   1: the block's input tile with its halo is staged in shared memory first
   use_padding                 1: each shared-memory row is one float longer, so threads reading down a
                               column fall in different banks (only where use_shmem is 1)
   use_cmem                    1: the filter is read from __constant__ memory (d_filter, filled by the
                               workload), 0: from the global `filter` argument
   filter_height, filter_width the filter's extent

   Every output is summed in the same order (i, then j) whatever the configuration, so all configurations
   compute the same floats. */

#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 1
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif
#ifndef tile_size_y
#define tile_size_y 1
#endif
#ifndef read_only
#define read_only 0
#endif
#ifndef use_shmem
#define use_shmem 0
#endif
#ifndef use_padding
#define use_padding 0
#endif
#ifndef use_cmem
#define use_cmem 1
#endif
#ifndef filter_height
#define filter_height 15
#endif
#ifndef filter_width
#define filter_width 15
#endif

#define TILE_W (block_size_x * tile_size_x)
#define TILE_H (block_size_y * tile_size_y)
#define HALO_W (TILE_W + filter_width - 1)
#define HALO_H (TILE_H + filter_height - 1)

#if read_only
#define LOAD(pointer) __ldg(pointer)
#else
#define LOAD(pointer) (*(pointer))
#endif

#if use_cmem
__constant__ float d_filter[filter_height * filter_width];
#endif

extern "C" __global__ void convolution_kernel(float *output, const float *__restrict__ input,
                                              const float *__restrict__ filter, const int width,
                                              const int height) {
    const int in_width = width + filter_width - 1;
    const int in_height = height + filter_height - 1;
    const int x0 = blockIdx.x * TILE_W;  // first output column of this block
    const int y0 = blockIdx.y * TILE_H;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;

#if use_shmem
    __shared__ float tile[HALO_H][HALO_W + use_padding];
    for (int i = ty; i < HALO_H; i += block_size_y) {
        const int y = y0 + i;
        for (int j = tx; j < HALO_W; j += block_size_x) {
            const int x = x0 + j;
            tile[i][j] = (y < in_height && x < in_width) ? LOAD(input + (long long)y * in_width + x) : 0.0f;
        }
    }
    __syncthreads();
#endif

    float sum[tile_size_y][tile_size_x];
#pragma unroll
    for (int a = 0; a < tile_size_y; a++) {
#pragma unroll
        for (int b = 0; b < tile_size_x; b++) {
            sum[a][b] = 0.0f;
        }
    }

    for (int i = 0; i < filter_height; i++) {
        for (int j = 0; j < filter_width; j++) {
#if use_cmem
            const float w = d_filter[i * filter_width + j];
#else
            const float w = LOAD(filter + i * filter_width + j);
#endif
#pragma unroll
            for (int a = 0; a < tile_size_y; a++) {
#pragma unroll
                for (int b = 0; b < tile_size_x; b++) {
                    const int ly = ty + a * block_size_y + i;  // row of the input tile
                    const int lx = tx + b * block_size_x + j;
#if use_shmem
                    sum[a][b] += tile[ly][lx] * w;
#else
                    const int y = y0 + ly;
                    const int x = x0 + lx;
                    // outside the input only for outputs outside the image, which are not written
                    if (y < in_height && x < in_width) {
                        sum[a][b] += LOAD(input + (long long)y * in_width + x) * w;
                    }
#endif
                }
            }
        }
    }

#pragma unroll
    for (int a = 0; a < tile_size_y; a++) {
#pragma unroll
        for (int b = 0; b < tile_size_x; b++) {
            const int y = y0 + ty + a * block_size_y;
            const int x = x0 + tx + b * block_size_x;
            if (y < height && x < width) {
                output[(long long)y * width + x] = sum[a][b];
            }
        }
    }
}
