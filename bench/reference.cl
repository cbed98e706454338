// Hand-written reference kernels, in the style of the NVIDIA OpenCL SDK samples, that the FCL
// programs next to this file are measured against (bench/run.py).
//
// Compile-time parameters (-D): BLOCK_SIZE, the work-group size of the 1-D kernels (a power of
// two); TILE_DIM, the side of the square tiles of transpose and matmul (TILE_DIM * TILE_DIM work-
// items per group); SCAN_PER_ITEM, the elements each work-item scans sequentially.

// The bandwidth limit: one read and one write per element.
__kernel void copy(__global const int* in, __global int* out, int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = in[i];
}

__kernel void reverse(__global const int* in, __global int* out, int n) {
    int i = get_global_id(0);
    if (i < n) out[n - 1 - i] = in[i];
}

// A height x width row-major matrix into a width x height one, through a local tile padded by
// one column so that a column of the tile is spread over all memory banks.
__kernel void transpose(__global const int* in, __global int* out, int width, int height) {
    __local int tile[TILE_DIM * (TILE_DIM + 1)];
    int x = get_group_id(0) * TILE_DIM + get_local_id(0);
    int y = get_group_id(1) * TILE_DIM + get_local_id(1);
    if (x < width && y < height)
        tile[get_local_id(1) * (TILE_DIM + 1) + get_local_id(0)] = in[y * width + x];
    barrier(CLK_LOCAL_MEM_FENCE);
    x = get_group_id(1) * TILE_DIM + get_local_id(0);
    y = get_group_id(0) * TILE_DIM + get_local_id(1);
    if (x < height && y < width)
        out[y * height + x] = tile[get_local_id(0) * (TILE_DIM + 1) + get_local_id(1)];
}

// One sum per 2 * BLOCK_SIZE elements. The first addition happens while loading; the tree is
// unrolled for the compile-time block size. Unlike the SDK's last-warp tail, every step keeps
// its barrier: work-items of a CPU (or of a newer GPU) do not run in lockstep.
#define REDUCE_STEP(s) \
    if (BLOCK_SIZE >= 2 * (s)) { \
        if (tid < (s)) partial[tid] = sum = sum + partial[tid + (s)]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    }

__kernel void reduce(__global const int* in, __global int* out, int n) {
    __local int partial[BLOCK_SIZE];
    int tid = get_local_id(0);
    int i = get_group_id(0) * (2 * BLOCK_SIZE) + tid;
    int sum = i < n ? in[i] : 0;
    if (i + BLOCK_SIZE < n) sum += in[i + BLOCK_SIZE];
    partial[tid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    REDUCE_STEP(512) REDUCE_STEP(256) REDUCE_STEP(128) REDUCE_STEP(64) REDUCE_STEP(32)
    REDUCE_STEP(16) REDUCE_STEP(8) REDUCE_STEP(4) REDUCE_STEP(2) REDUCE_STEP(1)
    if (tid == 0) out[get_group_id(0)] = sum;
}

// Inclusive scan of chunks of BLOCK_SIZE * SCAN_PER_ITEM elements, one chunk per work-group:
// each work-item scans its consecutive elements in registers, the work-group scans the work-
// items' totals (Hillis-Steele, double-buffered in local memory), and each work-item adds the
// totals of the work-items before it. The chunk's total goes to sums (when sums is used).
#define CHUNK (BLOCK_SIZE * SCAN_PER_ITEM)

__kernel void scan_chunks(__global const int* in, __global int* out, __global int* sums, int n,
                          int write_sums) {
    __local int totals[2 * BLOCK_SIZE];
    int tid = get_local_id(0);
    int base = get_group_id(0) * CHUNK + tid * SCAN_PER_ITEM;
    int items[SCAN_PER_ITEM];
    int running = 0;
    for (int k = 0; k < SCAN_PER_ITEM; k++) {
        running += base + k < n ? in[base + k] : 0;
        items[k] = running;
    }
    int from = 0;
    totals[tid] = running;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int offset = 1; offset < BLOCK_SIZE; offset *= 2) {
        int to = BLOCK_SIZE - from;
        totals[to + tid] = tid >= offset ? totals[from + tid - offset] + totals[from + tid]
                                         : totals[from + tid];
        from = to;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    int before = tid > 0 ? totals[from + tid - 1] : 0;
    for (int k = 0; k < SCAN_PER_ITEM; k++)
        if (base + k < n) out[base + k] = items[k] + before;
    if (write_sums && tid == BLOCK_SIZE - 1) sums[get_group_id(0)] = totals[from + tid];
}

// The third kernel of the grid scan: chunk g > 0 adds the scanned total of chunks 0 .. g-1.
__kernel void scan_add(__global int* out, __global const int* scanned_sums, int n) {
    int chunk = get_group_id(0);
    if (chunk == 0) return;
    int offset = scanned_sums[chunk - 1];
    for (int i = chunk * CHUNK + get_local_id(0); i < min(n, (chunk + 1) * CHUNK); i += BLOCK_SIZE)
        out[i] += offset;
}

// C = A B for A of hA x wA and B of wA x wB, row-major, all dimensions multiples of TILE_DIM:
// each work-group computes one TILE_DIM x TILE_DIM tile of C, walking tiles of A and B through
// local memory; each work-item keeps its element's sum in a register. For ints (bench/matmul.fcl)
// and doubles (the original repository's matmul.fcl).
#define MATMUL(name, T) \
__kernel void name(__global const T* A, __global const T* B, __global T* C, int wA, int wB) { \
    __local T As[TILE_DIM][TILE_DIM]; \
    __local T Bs[TILE_DIM][TILE_DIM]; \
    int tx = get_local_id(0), ty = get_local_id(1); \
    int aBegin = wA * TILE_DIM * get_group_id(1); \
    int bBegin = TILE_DIM * get_group_id(0); \
    T sum = 0; \
    for (int a = aBegin, b = bBegin; a < aBegin + wA; a += TILE_DIM, b += TILE_DIM * wB) { \
        As[ty][tx] = A[a + wA * ty + tx]; \
        Bs[ty][tx] = B[b + wB * ty + tx]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
        for (int k = 0; k < TILE_DIM; k++) \
            sum += As[ty][k] * Bs[k][tx]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    C[(get_group_id(1) * TILE_DIM + ty) * wB + get_group_id(0) * TILE_DIM + tx] = sum; \
}

MATMUL(matmul, int)

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
MATMUL(matmul_double, double)
#endif
