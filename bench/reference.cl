// Hand-written reference kernels that the FCL programs next to this file are measured against
// (bench/run.py). Each task has two: one in the style of the NVIDIA OpenCL SDK samples (for GPUs),
// and one written for a CPU's OpenCL (PoCL), where a work-group runs as a loop over its
// work-items that LLVM vectorizes between barriers, and every barrier and every work-item costs:
// vector loads and stores of consecutive elements, compile-time sizes, required work-group sizes,
// several elements per work-item, few barriers. run.py times both on the device and measures
// against the faster ("References, third edition" in README.md: on both PoCLs the CPU kernels
// won every task, by 1.03 to 64 times).
//
// Compile-time parameters (-D): BLOCK_SIZE, the work-group size of the 1-D SDK kernels (a power
// of two); TILE_DIM, the side of the square tiles of transpose and matmul (TILE_DIM * TILE_DIM
// work-items per group); SCAN_PER_ITEM, the elements each work-item of scan_chunks scans
// sequentially. For the CPU kernels: VEC_GROUP, the work-group size of copy_vec and
// reverse_vec; REDUCE_GROUP, the work-items per group of reduce_items (each sums a chunk);
// REDUCE_BIG, the ints each work-item of the full reduction's first pass sums, REDUCE_BIG_GROUP its work-items
// per group; MATMUL_GX and MATMUL_GY, the work-group of matmul_vec.

#define REQD1(x) __attribute__((reqd_work_group_size(x, 1, 1)))
#define REQD2(x, y) __attribute__((reqd_work_group_size(x, y, 1)))

// The bandwidth limit: one read and one write per element.
__kernel void copy(__global const int* in, __global int* out, int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = in[i];
}

__kernel void reverse(__global const int* in, __global int* out, int n) {
    int i = get_global_id(0);
    if (i < n) out[n - 1 - i] = in[i];
}

// For CPUs: copy_vec moves 8 ints per work-item as one vector, reverse_vec 8 reversed in
// registers; n a multiple of 8, the launch exactly n / 8 work-items. (16 ints per work-item
// measured 2-6% faster on Xeons, but on a CPU without AVX-512 pip's PoCL crashes running a
// shuffled int16, and Oclgrind takes its lanes for uninitialized.)
__kernel REQD1(VEC_GROUP) void copy_vec(__global const int* in, __global int* out) {
    size_t i = get_global_id(0);
    vstore8(vload8(i, in), i, out);
}

__kernel REQD1(VEC_GROUP) void reverse_vec(__global const int* in, __global int* out, int n) {
    size_t i = get_global_id(0);
    vstore8(vload8(i, in).s76543210, (size_t)(n / 8) - 1 - i, out);
}

// For CPUs: each work-item a loop over 16 consecutive ints, which the compiler vectorizes
// whether or not it vectorizes across work-items (LLVM 14 on an AMD EPYC did not: copy 2.9
// times slower there than these); n a multiple of 16, exactly n / 16 work-items.
__kernel REQD1(VEC_GROUP) void copy_run(__global const int* restrict in, __global int* restrict out) {
    size_t start = get_global_id(0) * 16;
    for (size_t i = start; i < start + 16; i++) out[i] = in[i];
}

__kernel REQD1(VEC_GROUP) void reverse_run(__global const int* restrict in, __global int* restrict out,
                                           int n) {
    size_t start = get_global_id(0) * 16;
    for (size_t i = start; i < start + 16; i++) out[n - 1 - i] = in[i];
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

// For CPUs: a 32 x 32 tile per work-group of 8 x 32, each work-item moving an int4 in (a
// quarter of a tile row) and an int4 out (four elements of a tile column); width and height
// multiples of 32, the launch (width / 4, height). Unpadded: a CPU has no memory banks. The row
// strides stay arguments (constants let LLVM turn the rows into gathers).
__kernel REQD2(8, 32) void transpose_vec(__global const int* in, __global int* out, int width,
                                         int height) {
    __local int tile[32 * 32];
    size_t lx = get_local_id(0), ly = get_local_id(1);
    size_t gx = get_group_id(0), gy = get_group_id(1);
    vstore4(vload4(gx * 8 + lx, in + (gy * 32 + ly) * width), 0, tile + ly * 32 + 4 * lx);
    barrier(CLK_LOCAL_MEM_FENCE);
    __local const int* column = tile + 4 * lx * 32 + ly;
    vstore4((int4)(column[0], column[32], column[64], column[96]), gy * 8 + lx,
            out + (gx * 32 + ly) * height);
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

// For CPUs: one work-item per chunk of PER ints (a multiple of 16), summed in two int8
// accumulators (as one int16 would be; Oclgrind misreads int16 lanes), no local memory, no
// barrier; REDUCE_GROUP (REDUCE_BIG_GROUP) chunks per work-group, n a multiple of PER and the
// launch exactly n / PER work-items. reduce_items: the chunks of the partial reduction (2 * BLOCK_SIZE);
// reduce_items_big: the first pass of the full reduction.
inline int sum8(int8 v) {
    int4 h = v.lo + v.hi;
    return h.s0 + h.s1 + h.s2 + h.s3;
}

#define REDUCE_ITEMS(name, PER, GROUP) \
__kernel REQD1(GROUP) void name(__global const int* in, __global int* out) { \
    size_t g = get_global_id(0); \
    __global const int* chunk = in + g * (PER); \
    int8 a0 = vload8(0, chunk), a1 = vload8(1, chunk); \
    for (int k = 2; k < (PER) / 8; k += 2) { \
        a0 += vload8(k, chunk); \
        a1 += vload8(k + 1, chunk); \
    } \
    out[g] = sum8(a0 + a1); \
}

REDUCE_ITEMS(reduce_items, 2 * BLOCK_SIZE, REDUCE_GROUP)
REDUCE_ITEMS(reduce_items_big, REDUCE_BIG, REDUCE_BIG_GROUP)

// The same chunks summed by a plain loop, left to the C compiler's vectoriser: on pip's PoCL
// (LLVM 14) 2.5-4 times faster than the int8 accumulators above (bench/README.md,
// "Reassociation").
#define REDUCE_LOOP(name, PER, GROUP) \
__kernel REQD1(GROUP) void name(__global const int* restrict in, __global int* restrict out) { \
    size_t g = get_global_id(0); \
    __global const int* chunk = in + g * (PER); \
    uint sum = 0; \
    for (int k = 0; k < (PER); k++) sum += (uint)chunk[k]; \
    out[g] = (int)sum; \
}

REDUCE_LOOP(reduce_loop, 2 * BLOCK_SIZE, REDUCE_GROUP)
REDUCE_LOOP(reduce_loop_big, REDUCE_BIG, REDUCE_BIG_GROUP)

// The rest of a full reduction: one work-item sums n ints.
__kernel void reduce_rest(__global const int* in, __global int* out, int n) {
    int8 acc = 0;
    int k = 0;
    for (; k + 8 <= n; k += 8) acc += vload8(0, in + k);
    int sum = sum8(acc);
    for (; k < n; k++) sum += in[k];
    out[0] = sum;
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

// For CPUs: the same three kernels over chunks of CHUNK = SCAN_GROUP * 8 ints, a work-group of
// SCAN_GROUP per chunk (n a multiple of CHUNK; the launch exactly n / 8 work-items). Each work-
// item loads its 8 consecutive ints as one vector and scans them in registers; work-item 0 scans
// the work-items' totals in local memory (SCAN_GROUP additions, where a Hillis-Steele scan is
// log2 SCAN_GROUP barrier intervals, each a loop over the whole group); each work-item adds the
// totals before it and stores its vector. The chunk's total goes to sums when write_sums.
#if CHUNK % 8 == 0
#define SCAN_GROUP (CHUNK / 8)

__kernel REQD1(SCAN_GROUP) void scan_chunks_vec(__global const int* in, __global int* out,
                                                __global int* sums, int write_sums) {
    __local int totals[SCAN_GROUP + 1];
    size_t tid = get_local_id(0);
    size_t v = get_group_id(0) * SCAN_GROUP + tid;
    int8 x = vload8(v, in);
    x.s1 += x.s0; x.s2 += x.s1; x.s3 += x.s2; x.s4 += x.s3; x.s5 += x.s4; x.s6 += x.s5;
    x.s7 += x.s6;
    totals[tid + 1] = x.s7;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid == 0) {
        int running = 0;
        totals[0] = 0;
        for (int k = 1; k <= SCAN_GROUP; k++) totals[k] = running += totals[k];
        if (write_sums) sums[get_group_id(0)] = running;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    vstore8(x + totals[tid], v, out);
}

// Chunk g > 0 adds scanned_sums[g - 1] (chunk 0 adds nothing).
__kernel REQD1(SCAN_GROUP) void scan_add_vec(__global int* out,
                                             __global const int* scanned_sums) {
    size_t g = get_group_id(0);
    int offset = g > 0 ? scanned_sums[g - 1] : 0;
    size_t v = g * SCAN_GROUP + get_local_id(0);
    vstore8(vload8(v, out) + offset, v, out);
}
#endif

// For CPUs: a work-item per chunk scans its CHUNK consecutive ints by a plain loop (its total
// to sums); one work-item scans the totals, in chunks of CHUNK as scan_chunks does (the original
// repository's scan.fcl scans them so); each chunk after the first adds the total before it.
// pip's PoCL ran it in half scan_chunks_vec's time (bench/README.md, "Reassociation").
__kernel void scan_chunks_loop(__global const int* restrict in, __global int* restrict out,
                               __global int* restrict sums) {
    size_t c = get_global_id(0);
    __global const int* from = in + c * CHUNK;
    __global int* to = out + c * CHUNK;
    uint running = 0;
    for (int k = 0; k < CHUNK; k++) to[k] = (int)(running += (uint)from[k]);
    sums[c] = (int)running;
}

__kernel void scan_totals_loop(__global int* sums, int count) {
    uint running = 0;
    for (int k = 0; k < count; k++) {
        if (k % CHUNK == 0) running = 0;
        sums[k] = (int)(running += (uint)sums[k]);
    }
}

__kernel void scan_add_loop(__global int* restrict out, __global const int* restrict scanned) {
    size_t c = get_global_id(0) + 1;
    uint before = (uint)scanned[c - 1];
    __global int* to = out + c * CHUNK;
    for (int k = 0; k < CHUNK; k++) to[k] = (int)((uint)to[k] + before);
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

// For CPUs: each work-item computes 4 rows x 16 columns of C in registers, from vector loads
// of B's row and 4 scalars of A per step; no local memory. wB a multiple of 16, hA of 4; the
// launch (wB / 16, hA / 4) in groups of MATMUL_GX x MATMUL_GY. matmul_vec holds each row of 16
// in one vector (a zmm register with AVX-512), matmul_vec8 in two vectors of 8: the faster on
// the device is kept, of those that run right there (bench/reference.py checks each in a child
// process: LLVM 14 aborts making code for some of them on some CPUs).
#define MATMUL_VEC(name, T, T16) \
__kernel REQD2(MATMUL_GX, MATMUL_GY) void name(__global const T* A, __global const T* B, \
                                               __global T* C, int wA, int wB) { \
    size_t c = get_global_id(0), r = 4 * get_global_id(1); \
    __global const T* a = A + r * wA; \
    T16 c0 = 0, c1 = 0, c2 = 0, c3 = 0; \
    for (int k = 0; k < wA; k++) { \
        T16 b = vload16(c, B + (size_t)k * wB); \
        c0 += a[k] * b; c1 += a[wA + k] * b; c2 += a[2 * wA + k] * b; c3 += a[3 * wA + k] * b; \
    } \
    vstore16(c0, c, C + r * wB); vstore16(c1, c, C + (r + 1) * wB); \
    vstore16(c2, c, C + (r + 2) * wB); vstore16(c3, c, C + (r + 3) * wB); \
}

// matmul_rows8 makes each vector of B of 8 scalar loads, which the code generator loads as one:
// pip's PoCL calls a function for each vloadN, and its accumulators then live in memory across
// the call (FCL's register blocking prints them so, for that reason).
#define VLOAD8(T8, p) vload8(0, p)
#define ROW8(p) (p)[0], (p)[1], (p)[2], (p)[3], (p)[4], (p)[5], (p)[6], (p)[7]
#define SCALARS8(T8, p) ((T8)(ROW8(p)))
#define MATMUL_VEC8(name, T, T8, LOAD8) \
__kernel REQD2(MATMUL_GX, MATMUL_GY) void name(__global const T* A, __global const T* B, \
                                               __global T* C, int wA, int wB) { \
    size_t c = 16 * get_global_id(0), r = 4 * get_global_id(1); \
    __global const T* a = A + r * wA; \
    T8 c0 = 0, c1 = 0, c2 = 0, c3 = 0, d0 = 0, d1 = 0, d2 = 0, d3 = 0; \
    for (int k = 0; k < wA; k++) { \
        __global const T* bk = B + (size_t)k * wB + c; \
        T8 b = LOAD8(T8, bk), e = LOAD8(T8, bk + 8); \
        T a0 = a[k], a1 = a[wA + k], a2 = a[2 * wA + k], a3 = a[3 * wA + k]; \
        c0 += a0 * b; c1 += a1 * b; c2 += a2 * b; c3 += a3 * b; \
        d0 += a0 * e; d1 += a1 * e; d2 += a2 * e; d3 += a3 * e; \
    } \
    vstore8(c0, 0, C + r * wB + c); vstore8(d0, 1, C + r * wB + c); \
    vstore8(c1, 0, C + (r + 1) * wB + c); vstore8(d1, 1, C + (r + 1) * wB + c); \
    vstore8(c2, 0, C + (r + 2) * wB + c); vstore8(d2, 1, C + (r + 2) * wB + c); \
    vstore8(c3, 0, C + (r + 3) * wB + c); vstore8(d3, 1, C + (r + 3) * wB + c); \
}

MATMUL(matmul, int)
MATMUL_VEC8(matmul_vec8, int, int8, VLOAD8)
MATMUL_VEC(matmul_vec, int, int16)
MATMUL_VEC8(matmul_rows8, int, int8, SCALARS8)

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
MATMUL(matmul_double, double)
MATMUL_VEC8(matmul_vec8_double, double, double8, VLOAD8)
MATMUL_VEC(matmul_vec_double, double, double16)
// matmul_rows8 for doubles: each row of 16 in four double4 made of scalar loads.
#define ROW4(p) (p)[0], (p)[1], (p)[2], (p)[3]
__kernel REQD2(MATMUL_GX, MATMUL_GY) void matmul_rows4_double(
        __global const double* A, __global const double* B, __global double* C, int wA, int wB) {
    size_t c = 16 * get_global_id(0), r = 4 * get_global_id(1);
    __global const double* a = A + r * wA;
    double4 acc[4][4] = {{0}};
    for (int k = 0; k < wA; k++) {
        __global const double* bk = B + (size_t)k * wB + c;
        double4 b[4] = {(double4)(ROW4(bk)), (double4)(ROW4(bk + 4)), (double4)(ROW4(bk + 8)),
                        (double4)(ROW4(bk + 12))};
        for (int i = 0; i < 4; i++) {
            double ai = a[i * wA + k];
            for (int h = 0; h < 4; h++) acc[i][h] += ai * b[h];
        }
    }
    for (int i = 0; i < 4; i++)
        for (int h = 0; h < 4; h++) vstore4(acc[i][h], h, C + (r + i) * wB + c);
}
#endif

// Histograms: `counts[bin[i]] += 1` for every i. histogram_zero clears the bins (each run starts
// from zeros, as FCL's histogram fills its bins with the neutral element first).
__kernel void histogram_zero(__global int* counts, int bins) {
    int b = get_global_id(0);
    if (b < bins) counts[b] = 0;
}

// One global atomic per value: any number of bins.
__kernel void histogram_global(__global const int* bin, __global int* counts, int n) {
    int i = get_global_id(0);
    if (i < n) atomic_inc(&counts[bin[i]]);
}

// For few bins (at most BLOCK_SIZE): each work-group counts HISTOGRAM_PER_ITEM values per
// work-item into a sub-histogram in local memory, then adds its nonzero bins to the histogram.
#define HISTOGRAM_PER_ITEM 8
__kernel REQD1(BLOCK_SIZE) void histogram_local(__global const int* bin, __global int* counts,
                                                int n, int bins) {
    __local int sub[BLOCK_SIZE];
    int t = get_local_id(0);
    if (t < bins) sub[t] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    int first = get_group_id(0) * BLOCK_SIZE * HISTOGRAM_PER_ITEM;
    for (int k = 0; k < HISTOGRAM_PER_ITEM; k++) {
        int i = first + k * BLOCK_SIZE + t;
        if (i < n) atomic_inc(&sub[bin[i]]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < bins && sub[t] != 0) atomic_add(&counts[t], sub[t]);
}

// Sparse matrix times vector, the matrix in CSR: y[r] = sum of vals[e] * x[cols[e]] over row
// r's nonzeros e in [offsets[r], offsets[r+1]). One work-item per row (scalar CSR): a long row
// keeps its work-item busy while the others wait.
__kernel void smvm_scalar(__global const int* offsets, __global const int* cols,
                          __global const int* vals, __global const int* x, __global int* y,
                          int rows) {
    int r = get_global_id(0);
    if (r >= rows) return;
    int sum = 0;
    for (int e = offsets[r]; e < offsets[r + 1]; e++) sum += vals[e] * x[cols[e]];
    y[r] = sum;
}

// SMVM_LANES work-items per row (vector CSR, Bell and Garland): each sums every SMVM_LANES-th
// nonzero of the row, then the lanes' sums meet in a tree in local memory. Reads of a row are
// coalesced; a short row leaves lanes idle.
__kernel REQD1(BLOCK_SIZE) void smvm_vector(__global const int* offsets, __global const int* cols,
                                            __global const int* vals, __global const int* x,
                                            __global int* y, int rows) {
    __local int partial[BLOCK_SIZE];
    int t = get_local_id(0);
    int lane = t % SMVM_LANES;
    int r = get_group_id(0) * (BLOCK_SIZE / SMVM_LANES) + t / SMVM_LANES;
    int sum = 0;
    if (r < rows)
        for (int e = offsets[r] + lane; e < offsets[r + 1]; e += SMVM_LANES)
            sum += vals[e] * x[cols[e]];
    partial[t] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int d = SMVM_LANES / 2; d > 0; d /= 2) {
        if (lane < d) partial[t] += partial[t + d];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0 && r < rows) y[r] = partial[t];
}
