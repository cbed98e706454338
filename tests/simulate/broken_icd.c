/* A simulated OpenCL driver (an ICD, loaded by the ICD loader) whose compiler always fails.
 *
 * Why: on AMD Zen 5 (and later) CPUs, the PoCL inside the pyopencl wheel (LLVM 14) lists a CPU
 * device, yet every clBuildProgram fails with the build log "error: unknown target CPU
 * 'generic'". FCL probes devices for this; its tests need such a device on any machine. This one
 * looks like that PoCL (platform name and vendor, a CPU device): contexts, queues, buffers and
 * programs work, every build fails with that log, and everything else answers
 * CL_INVALID_OPERATION. tests/simulate/__init__.py compiles it (`cc -shared -fPIC`) and points
 * the loader at it.
 *
 * No OpenCL headers: the few types and constants are declared here (values from Khronos' CL/cl.h,
 * dispatch slots from CL/cl_icd.h's cl_icd_dispatch). Only the three symbols the ocl-icd loader
 * looks up are exported; everything else is static, so that our functions never get confused
 * with the loader's own functions of the same name. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_uint cl_bool;
typedef cl_ulong cl_bitfield;
typedef intptr_t cl_context_properties;
typedef cl_ulong cl_queue_properties;

enum {
    CL_SUCCESS = 0, CL_DEVICE_NOT_FOUND = -1, CL_OUT_OF_HOST_MEMORY = -6,
    CL_BUILD_PROGRAM_FAILURE = -11, CL_COMPILE_PROGRAM_FAILURE = -15,
    CL_INVALID_VALUE = -30, CL_INVALID_DEVICE_TYPE = -31, CL_INVALID_PLATFORM = -32,
    CL_INVALID_DEVICE = -33, CL_INVALID_CONTEXT = -34, CL_INVALID_HOST_PTR = -37,
    CL_INVALID_MEM_OBJECT = -38, CL_INVALID_PROGRAM_EXECUTABLE = -45,
    CL_INVALID_OPERATION = -59, CL_INVALID_BUFFER_SIZE = -61,
};

#define DEVICE_TYPE_DEFAULT 1u
#define DEVICE_TYPE_CPU 2u
#define DEVICE_TYPE_ALL 0xFFFFFFFFu
#define MEM_USE_HOST_PTR (1u << 3)
#define MEM_COPY_HOST_PTR (1u << 5)
#define CONTEXT_PLATFORM 0x1084
#define QUEUE_PROPERTIES 0x1093
#define BUILD_NONE (-1)
#define BUILD_ERROR (-2)

#define BUILD_LOG "error: unknown target CPU 'generic'\n"

/* Slots of cl_icd_dispatch (CL/cl_icd.h) that this driver fills; 150 slots in all, through
 * OpenCL 3.1's clGetKernelSuggestedLocalWorkSize. */
enum slot {
    S_GetPlatformIDs = 0, S_GetPlatformInfo = 1, S_GetDeviceIDs = 2, S_GetDeviceInfo = 3,
    S_CreateContext = 4, S_CreateContextFromType = 5, S_RetainContext = 6, S_ReleaseContext = 7,
    S_GetContextInfo = 8, S_CreateCommandQueue = 9, S_RetainCommandQueue = 10,
    S_ReleaseCommandQueue = 11, S_GetCommandQueueInfo = 12, S_CreateBuffer = 14,
    S_CreateImage2D = 15, S_CreateImage3D = 16, S_RetainMemObject = 17,
    S_ReleaseMemObject = 18, S_GetMemObjectInfo = 20, S_CreateSampler = 22,
    S_CreateProgramWithSource = 26, S_CreateProgramWithBinary = 27, S_RetainProgram = 28,
    S_ReleaseProgram = 29, S_BuildProgram = 30, S_GetProgramInfo = 32,
    S_GetProgramBuildInfo = 33, S_CreateKernel = 34, S_CreateKernelsInProgram = 35,
    S_WaitForEvents = 41, S_GetEventInfo = 42, S_RetainEvent = 43, S_ReleaseEvent = 44,
    S_Flush = 46, S_Finish = 47, S_EnqueueReadBuffer = 48, S_EnqueueWriteBuffer = 49,
    S_EnqueueCopyBuffer = 50, S_EnqueueMapBuffer = 56, S_EnqueueMapImage = 57,
    S_GetExtensionFunctionAddress = 65, S_CreateFromGLBuffer = 66, S_CreateFromGLTexture2D = 67,
    S_CreateFromGLTexture3D = 68, S_CreateFromGLRenderbuffer = 69, S_CreateSubBuffer = 82,
    S_CreateUserEvent = 84, S_CreateEventFromGLsyncKHR = 92, S_RetainDevice = 94,
    S_ReleaseDevice = 95, S_CreateImage = 96, S_CreateProgramWithBuiltInKernels = 97,
    S_CompileProgram = 98, S_LinkProgram = 99, S_EnqueueFillBuffer = 102,
    S_EnqueueMarkerWithWaitList = 105, S_EnqueueBarrierWithWaitList = 106,
    S_GetExtensionFunctionAddressForPlatform = 107, S_CreateFromGLTexture = 108,
    S_CreateFromEGLImageKHR = 119, S_CreateEventFromEGLSyncKHR = 122,
    S_CreateCommandQueueWithProperties = 123, S_CreatePipe = 124, S_SVMAlloc = 126,
    S_CreateSamplerWithProperties = 133, S_CloneKernel = 137, S_CreateProgramWithIL = 138,
    S_CreateBufferWithProperties = 146, S_CreateImageWithProperties = 147,
    N_SLOTS = 150,
};

typedef void (*fn)(void);
static fn dispatch[N_SLOTS];

/* Every OpenCL object starts with its dispatch table: that is how the loader finds the driver. */
typedef struct object { fn *dispatch; cl_uint refs; } object;
typedef object *cl_platform_id, *cl_device_id, *cl_context, *cl_kernel, *cl_sampler;
typedef struct queue { object o; cl_context ctx; cl_bitfield props; } *cl_command_queue;
typedef struct mem { object o; cl_context ctx; cl_bitfield flags; size_t size; char *data; int owned; } *cl_mem;
typedef struct program { object o; cl_context ctx; char *source; char *options; cl_int status; } *cl_program;
typedef struct event { object o; cl_command_queue queue; cl_uint type; } *cl_event;

static object platform = {dispatch, 1}, device = {dispatch, 1};

static void *new_object(size_t size, cl_int *err) {
    object *o = calloc(1, size);
    if (o) { o->dispatch = dispatch; o->refs = 1; }
    if (err) *err = o ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
    return o;
}

/* --- clGet*Info: copy one answer out, as the specification asks --- */

static cl_int answer(const void *v, size_t n, size_t size, void *value, size_t *size_ret) {
    if (value) {
        if (size < n) return CL_INVALID_VALUE;
        memcpy(value, v, n);
    }
    if (size_ret) *size_ret = n;
    return CL_SUCCESS;
}
#define ANSWER(type, v) do { type x_ = (v); return answer(&x_, sizeof x_, size, value, size_ret); } while (0)
#define ANSWER_STR(s) return answer((s), strlen(s) + 1, size, value, size_ret)

/* An unanswered query: CL_INVALID_VALUE, and a line on stderr when BROKEN_ICD_TRACE is set (to
 * find what a caller needs). */
static cl_int unknown(const char *what, cl_uint param) {
    if (getenv("BROKEN_ICD_TRACE")) fprintf(stderr, "broken_icd: %s 0x%x unanswered\n", what, param);
    return CL_INVALID_VALUE;
}

/* --- Platform and device --- */

static cl_int get_platform_ids(cl_uint n, cl_platform_id *platforms, cl_uint *count) {
    if ((n == 0 && platforms) || (!platforms && !count)) return CL_INVALID_VALUE;
    if (platforms) platforms[0] = &platform;
    if (count) *count = 1;
    return CL_SUCCESS;
}

static cl_int get_platform_info(cl_platform_id p, cl_uint param, size_t size, void *value, size_t *size_ret) {
    if (p != &platform) return CL_INVALID_PLATFORM;
    switch (param) {
    case 0x0900: ANSWER_STR("FULL_PROFILE");
    case 0x0901: ANSWER_STR("OpenCL 3.0 PoCL 3.0 (simulated: builds fail)");
    case 0x0902: ANSWER_STR("Portable Computing Language");
    case 0x0903: ANSWER_STR("The pocl project");
    case 0x0904: ANSWER_STR("cl_khr_icd");
    case 0x0905: ANSWER(cl_ulong, 0);              /* host timer resolution */
    case 0x0906: ANSWER(cl_uint, 3u << 22);        /* numeric version 3.0 */
    case 0x0920: ANSWER_STR("POCLSIM");            /* ICD suffix: not real PoCL's "POCL" */
    default: return unknown("clGetPlatformInfo", param);
    }
}

static int type_matches(cl_bitfield type) {
    return type == DEVICE_TYPE_ALL || (type & (DEVICE_TYPE_CPU | DEVICE_TYPE_DEFAULT));
}

static cl_int get_device_ids(cl_platform_id p, cl_bitfield type, cl_uint n, cl_device_id *devices, cl_uint *count) {
    if (p != &platform) return CL_INVALID_PLATFORM;
    if ((n == 0 && devices) || (!devices && !count)) return CL_INVALID_VALUE;
    if (count) *count = type_matches(type) ? 1 : 0;
    if (!type_matches(type)) return CL_DEVICE_NOT_FOUND;
    if (devices) devices[0] = &device;
    return CL_SUCCESS;
}

static cl_int get_device_info(cl_device_id d, cl_uint param, size_t size, void *value, size_t *size_ret) {
    static const size_t item_sizes[3] = {4096, 4096, 4096};
    if (d != &device) return CL_INVALID_DEVICE;
    switch (param) {
    case 0x1000: ANSWER(cl_bitfield, DEVICE_TYPE_CPU);
    case 0x1001: ANSWER(cl_uint, 0x1022);          /* vendor id: AMD */
    case 0x1002: ANSWER(cl_uint, 2);               /* max compute units */
    case 0x1003: ANSWER(cl_uint, 3);               /* max work item dimensions */
    case 0x1004: ANSWER(size_t, 4096);             /* max work group size */
    case 0x1005: return answer(item_sizes, sizeof item_sizes, size, value, size_ret);
    case 0x1006: case 0x1007: case 0x1008: case 0x100A:   /* preferred vector widths */
    case 0x1036: case 0x1037: case 0x1038: case 0x103A:   /* native vector widths */
        ANSWER(cl_uint, 16);
    case 0x1009: case 0x100B: case 0x1039: case 0x103B: ANSWER(cl_uint, 8);
    case 0x1034: case 0x103C: ANSWER(cl_uint, 0);  /* half */
    case 0x100C: ANSWER(cl_uint, 3000);            /* max clock frequency, MHz */
    case 0x100D: ANSWER(cl_uint, 64);              /* address bits */
    case 0x1010: ANSWER(cl_ulong, 512ull << 20);   /* max mem alloc size */
    case 0x1016: ANSWER(cl_bool, 0);               /* image support */
    case 0x1017: ANSWER(size_t, 1024);             /* max parameter size */
    case 0x1019: ANSWER(cl_uint, 1024);            /* mem base addr align, bits */
    case 0x101A: ANSWER(cl_uint, 128);             /* min data type align size */
    case 0x101B: case 0x1032: ANSWER(cl_bitfield, 0x3F);  /* single, double fp config */
    case 0x101C: ANSWER(cl_uint, 2);               /* global mem cache: read-write */
    case 0x101D: ANSWER(cl_uint, 64);              /* cache line size */
    case 0x101E: ANSWER(cl_ulong, 32ull << 20);    /* global mem cache size */
    case 0x101F: ANSWER(cl_ulong, 1ull << 30);     /* global mem size */
    case 0x1020: ANSWER(cl_ulong, 64ull << 10);    /* max constant buffer size */
    case 0x1021: ANSWER(cl_uint, 8);               /* max constant args */
    case 0x1022: ANSWER(cl_uint, 2);               /* local mem type: global (as on PoCL) */
    case 0x1023: ANSWER(cl_ulong, 64ull << 10);    /* local mem size */
    case 0x1024: ANSWER(cl_bool, 0);               /* error correction */
    case 0x1025: ANSWER(size_t, 1);                /* profiling timer resolution, ns */
    case 0x1026: case 0x1027: case 0x1028: case 0x103E:  /* little endian, available, compiler, linker */
    case 0x1035: case 0x1048: ANSWER(cl_bool, 1);  /* host unified memory, interop user sync */
    case 0x1029: ANSWER(cl_bitfield, 1);           /* execution capabilities: kernels */
    case 0x102A: ANSWER(cl_bitfield, 2);           /* queue properties: profiling */
    case 0x102B: ANSWER_STR("pthread-generic");
    case 0x102C: ANSWER_STR("AuthenticAMD");
    case 0x102D: ANSWER_STR("3.0");                /* driver version */
    case 0x102E: ANSWER_STR("FULL_PROFILE");
    case 0x102F: ANSWER_STR("OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-generic");
    case 0x1030: ANSWER_STR("cl_khr_byte_addressable_store cl_khr_global_int32_base_atomics "
                            "cl_khr_global_int32_extended_atomics cl_khr_local_int32_base_atomics "
                            "cl_khr_local_int32_extended_atomics cl_khr_fp64");
    case 0x1031: ANSWER(cl_platform_id, &platform);
    case 0x103D: ANSWER_STR("OpenCL C 1.2 PoCL");
    case 0x103F: ANSWER_STR("");                   /* built-in kernels */
    case 0x1042: ANSWER(cl_device_id, NULL);       /* parent device */
    case 0x1043: ANSWER(cl_uint, 0);               /* partition max sub-devices */
    case 0x1044: case 0x1046: ANSWER(cl_context_properties, 0);  /* partition properties, type */
    case 0x1045: ANSWER(cl_bitfield, 0);           /* partition affinity domain */
    case 0x1047: ANSWER(cl_uint, 1);               /* reference count */
    case 0x1049: ANSWER(size_t, 1u << 16);         /* printf buffer size */
    case 0x1053: ANSWER(cl_bitfield, 0);           /* SVM capabilities */
    case 0x105E: ANSWER(cl_uint, 3u << 22);        /* numeric version 3.0 */
    case 0x1065: case 0x1068: case 0x1069: case 0x1071: ANSWER(cl_bool, 0);  /* 3.0 optional features */
    case 0x1067: ANSWER(size_t, 8);                /* preferred work group size multiple */
    default: return unknown("clGetDeviceInfo", param);
    }
}

/* --- Contexts: one device; the properties are kept to be read back --- */

typedef struct context { object o; cl_context_properties props[16]; size_t nprops; } context;

static cl_context new_context(const cl_context_properties *props, cl_int *err) {
    size_t n = 0;
    if (props) {
        for (; props[n]; n += 2)
            if (n + 3 > 16 || (props[n] == CONTEXT_PLATFORM && (cl_platform_id)props[n + 1] != &platform)) {
                if (err) *err = n + 3 > 16 ? CL_INVALID_VALUE : CL_INVALID_PLATFORM;
                return NULL;
            }
        n++;  /* the terminating 0 */
    }
    context *c = new_object(sizeof *c, err);
    if (!c) return NULL;
    if (n) memcpy(c->props, props, n * sizeof *props);
    c->nprops = n;
    return &c->o;
}

static cl_context create_context(const cl_context_properties *props, cl_uint n, const cl_device_id *devices,
                                 void (*notify)(const char *, const void *, size_t, void *), void *user, cl_int *err) {
    (void)notify; (void)user;
    for (cl_uint i = 0; i < n; i++)
        if (devices[i] != &device) { if (err) *err = CL_INVALID_DEVICE; return NULL; }
    if (n == 0 || !devices) { if (err) *err = CL_INVALID_VALUE; return NULL; }
    return new_context(props, err);
}

static cl_context create_context_from_type(const cl_context_properties *props, cl_bitfield type,
                                           void (*notify)(const char *, const void *, size_t, void *),
                                           void *user, cl_int *err) {
    (void)notify; (void)user;
    if (!type_matches(type)) { if (err) *err = CL_DEVICE_NOT_FOUND; return NULL; }
    return new_context(props, err);
}

static cl_int retain(object *o) { if (!o) return CL_INVALID_VALUE; o->refs++; return CL_SUCCESS; }
static cl_int keep_device(cl_device_id d) { return d == &device ? CL_SUCCESS : CL_INVALID_DEVICE; }
static cl_int release_context(cl_context c) {
    if (!c) return CL_INVALID_CONTEXT;
    if (--c->refs == 0) free(c);
    return CL_SUCCESS;
}

static cl_int get_context_info(cl_context c, cl_uint param, size_t size, void *value, size_t *size_ret) {
    if (!c) return CL_INVALID_CONTEXT;
    context *ctx = (context *)c;
    switch (param) {
    case 0x1080: ANSWER(cl_uint, c->refs);
    case 0x1081: ANSWER(cl_device_id, &device);
    case 0x1082: return answer(ctx->props, ctx->nprops * sizeof *ctx->props, size, value, size_ret);
    case 0x1083: ANSWER(cl_uint, 1);
    default: return unknown("clGetContextInfo", param);
    }
}

/* --- Command queues: nothing runs on them, so flush and finish have nothing to wait for --- */

static cl_command_queue new_queue(cl_context c, cl_device_id d, cl_bitfield props, cl_int *err) {
    if (!c) { if (err) *err = CL_INVALID_CONTEXT; return NULL; }
    if (d != &device) { if (err) *err = CL_INVALID_DEVICE; return NULL; }
    cl_command_queue q = new_object(sizeof *q, err);
    if (q) { q->ctx = c; q->props = props; retain(c); }
    return q;
}

static cl_command_queue create_queue(cl_context c, cl_device_id d, cl_bitfield props, cl_int *err) {
    return new_queue(c, d, props, err);
}

static cl_command_queue create_queue_with_properties(cl_context c, cl_device_id d,
                                                     const cl_queue_properties *props, cl_int *err) {
    cl_bitfield flags = 0;
    for (size_t i = 0; props && props[i]; i += 2)
        if (props[i] == QUEUE_PROPERTIES) flags = props[i + 1];
    return new_queue(c, d, flags, err);
}

static cl_int release_queue(cl_command_queue q) {
    if (!q) return CL_INVALID_VALUE;
    if (--q->o.refs == 0) { release_context(q->ctx); free(q); }
    return CL_SUCCESS;
}

static cl_int get_queue_info(cl_command_queue q, cl_uint param, size_t size, void *value, size_t *size_ret) {
    if (!q) return CL_INVALID_VALUE;
    switch (param) {
    case 0x1090: ANSWER(cl_context, q->ctx);
    case 0x1091: ANSWER(cl_device_id, &device);
    case 0x1092: ANSWER(cl_uint, q->o.refs);
    case 0x1093: ANSWER(cl_bitfield, q->props);
    default: return unknown("clGetCommandQueueInfo", param);
    }
}

static cl_int succeed(cl_command_queue q) { return q ? CL_SUCCESS : CL_INVALID_VALUE; }

/* --- Events: every command completes at once --- */

static cl_int new_event(cl_command_queue q, cl_uint type, cl_event *event) {
    cl_int err = CL_SUCCESS;
    if (!event) return CL_SUCCESS;
    *event = new_object(sizeof **event, &err);
    if (*event) { (*event)->queue = q; (*event)->type = type; q->o.refs++; }
    return err;
}

static cl_int wait_for_events(cl_uint n, const cl_event *events) {
    return n && events ? CL_SUCCESS : CL_INVALID_VALUE;
}

static cl_int release_event(cl_event e) {
    if (!e) return CL_INVALID_VALUE;
    if (--e->o.refs == 0) { release_queue(e->queue); free(e); }
    return CL_SUCCESS;
}

static cl_int get_event_info(cl_event e, cl_uint param, size_t size, void *value, size_t *size_ret) {
    if (!e) return CL_INVALID_VALUE;
    switch (param) {
    case 0x11D0: ANSWER(cl_command_queue, e->queue);
    case 0x11D1: ANSWER(cl_uint, e->type);
    case 0x11D2: ANSWER(cl_uint, e->o.refs);
    case 0x11D3: ANSWER(cl_int, 0);                /* CL_COMPLETE */
    case 0x11D4: ANSWER(cl_context, e->queue->ctx);
    default: return unknown("clGetEventInfo", param);
    }
}

static cl_int marker(cl_command_queue q, cl_uint n, const cl_event *wait, cl_event *event) {
    (void)n; (void)wait;
    return q ? new_event(q, 0x1205, event) : CL_INVALID_VALUE;  /* CL_COMMAND_MARKER */
}

/* --- Buffers: host memory, so that data can go in and out as on the real PoCL --- */

static cl_mem create_buffer(cl_context c, cl_bitfield flags, size_t n, void *host, cl_int *err) {
    int with_host = (flags & (MEM_USE_HOST_PTR | MEM_COPY_HOST_PTR)) != 0;
    cl_int e = !c ? CL_INVALID_CONTEXT : n == 0 ? CL_INVALID_BUFFER_SIZE
             : with_host != (host != NULL) ? CL_INVALID_HOST_PTR : CL_SUCCESS;
    if (e) { if (err) *err = e; return NULL; }
    cl_mem m = new_object(sizeof *m, err);
    if (!m) return NULL;
    m->ctx = c; m->flags = flags; m->size = n;
    m->owned = !(flags & MEM_USE_HOST_PTR);
    m->data = m->owned ? malloc(n) : host;
    if (!m->data) { free(m); if (err) *err = CL_OUT_OF_HOST_MEMORY; return NULL; }
    if (flags & MEM_COPY_HOST_PTR) memcpy(m->data, host, n);
    retain(c);
    return m;
}

static cl_int release_mem(cl_mem m) {
    if (!m) return CL_INVALID_MEM_OBJECT;
    if (--m->o.refs == 0) { if (m->owned) free(m->data); release_context(m->ctx); free(m); }
    return CL_SUCCESS;
}

static cl_int get_mem_info(cl_mem m, cl_uint param, size_t size, void *value, size_t *size_ret) {
    if (!m) return CL_INVALID_MEM_OBJECT;
    switch (param) {
    case 0x1100: ANSWER(cl_uint, 0x10F0);          /* CL_MEM_OBJECT_BUFFER */
    case 0x1101: ANSWER(cl_bitfield, m->flags);
    case 0x1102: ANSWER(size_t, m->size);
    case 0x1103: ANSWER(void *, m->owned ? NULL : m->data);
    case 0x1104: ANSWER(cl_uint, 0);               /* map count */
    case 0x1105: ANSWER(cl_uint, m->o.refs);
    case 0x1106: ANSWER(cl_context, m->ctx);
    case 0x1107: ANSWER(cl_mem, NULL);             /* associated mem object */
    case 0x1108: ANSWER(size_t, 0);                /* offset */
    case 0x1109: ANSWER(cl_bool, 0);               /* uses SVM pointer */
    default: return unknown("clGetMemObjectInfo", param);
    }
}

static cl_int check_range(cl_command_queue q, cl_mem m, size_t offset, size_t n) {
    if (!q) return CL_INVALID_VALUE;
    if (!m) return CL_INVALID_MEM_OBJECT;
    return offset > m->size || n > m->size - offset ? CL_INVALID_VALUE : CL_SUCCESS;
}

static cl_int read_buffer(cl_command_queue q, cl_mem m, cl_bool block, size_t offset, size_t n, void *out,
                          cl_uint nwait, const cl_event *wait, cl_event *event) {
    (void)block; (void)nwait; (void)wait;
    cl_int err = check_range(q, m, offset, n);
    if (err) return err;
    memcpy(out, m->data + offset, n);
    return new_event(q, 0x11F3, event);
}

static cl_int write_buffer(cl_command_queue q, cl_mem m, cl_bool block, size_t offset, size_t n, const void *in,
                           cl_uint nwait, const cl_event *wait, cl_event *event) {
    (void)block; (void)nwait; (void)wait;
    cl_int err = check_range(q, m, offset, n);
    if (err) return err;
    memcpy(m->data + offset, in, n);
    return new_event(q, 0x11F4, event);
}

static cl_int copy_buffer(cl_command_queue q, cl_mem from, cl_mem to, size_t from_offset, size_t to_offset, size_t n,
                          cl_uint nwait, const cl_event *wait, cl_event *event) {
    (void)nwait; (void)wait;
    cl_int err = check_range(q, from, from_offset, n);
    if (!err) err = check_range(q, to, to_offset, n);
    if (err) return err;
    memmove(to->data + to_offset, from->data + from_offset, n);
    return new_event(q, 0x11F5, event);
}

static cl_int fill_buffer(cl_command_queue q, cl_mem m, const void *pattern, size_t pattern_size, size_t offset,
                          size_t n, cl_uint nwait, const cl_event *wait, cl_event *event) {
    (void)nwait; (void)wait;
    cl_int err = check_range(q, m, offset, n);
    if (err) return err;
    if (!pattern || !pattern_size || offset % pattern_size || n % pattern_size) return CL_INVALID_VALUE;
    for (size_t i = 0; i < n; i += pattern_size) memcpy(m->data + offset + i, pattern, pattern_size);
    return new_event(q, 0x1207, event);            /* CL_COMMAND_FILL_BUFFER */
}

/* --- Programs: the source is kept; every build fails as on Zen 5 --- */

static cl_program create_program_with_source(cl_context c, cl_uint count, const char **strings,
                                             const size_t *lengths, cl_int *err) {
    if (!c) { if (err) *err = CL_INVALID_CONTEXT; return NULL; }
    if (count == 0 || !strings) { if (err) *err = CL_INVALID_VALUE; return NULL; }
    size_t total = 0;
    for (cl_uint i = 0; i < count; i++)
        total += lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
    cl_program p = new_object(sizeof *p, err);
    if (!p) return NULL;
    p->source = malloc(total + 1);
    p->options = strdup("");
    if (!p->source || !p->options) {
        free(p->source); free(p->options); free(p);
        if (err) *err = CL_OUT_OF_HOST_MEMORY;
        return NULL;
    }
    char *end = p->source;
    for (cl_uint i = 0; i < count; i++) {
        size_t n = lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
        memcpy(end, strings[i], n);
        end += n;
    }
    *end = 0;
    p->ctx = c; p->status = BUILD_NONE;
    retain(c);
    return p;
}

static cl_int release_program(cl_program p) {
    if (!p) return CL_INVALID_VALUE;
    if (--p->o.refs == 0) { release_context(p->ctx); free(p->source); free(p->options); free(p); }
    return CL_SUCCESS;
}

static cl_int fail_build(cl_program p, const char *options, void (*notify)(cl_program, void *), void *user) {
    if (!p) return CL_INVALID_VALUE;
    char *copy = strdup(options ? options : "");
    if (copy) { free(p->options); p->options = copy; }
    p->status = BUILD_ERROR;
    if (notify) notify(p, user);
    return CL_BUILD_PROGRAM_FAILURE;
}

static cl_int build_program(cl_program p, cl_uint n, const cl_device_id *devices, const char *options,
                            void (*notify)(cl_program, void *), void *user) {
    (void)n; (void)devices;
    return fail_build(p, options, notify, user);
}

/* clCompileProgram fails the same way, with the code that function is specified to return. */
static cl_int compile_program(cl_program p, cl_uint n, const cl_device_id *devices, const char *options,
                              cl_uint nheaders, const cl_program *headers, const char **names,
                              void (*notify)(cl_program, void *), void *user) {
    (void)n; (void)devices; (void)nheaders; (void)headers; (void)names;
    return fail_build(p, options, notify, user) == CL_BUILD_PROGRAM_FAILURE ? CL_COMPILE_PROGRAM_FAILURE : CL_INVALID_VALUE;
}

static cl_int get_program_info(cl_program p, cl_uint param, size_t size, void *value, size_t *size_ret) {
    if (!p) return CL_INVALID_VALUE;
    switch (param) {
    case 0x1160: ANSWER(cl_uint, p->o.refs);
    case 0x1161: ANSWER(cl_context, p->ctx);
    case 0x1162: ANSWER(cl_uint, 1);
    case 0x1163: ANSWER(cl_device_id, &device);
    case 0x1164: ANSWER_STR(p->source);
    case 0x1165: ANSWER(size_t, 0);                /* binary sizes: nothing was built */
    case 0x1166: ANSWER(void *, NULL);             /* binaries: nothing to copy */
    case 0x1167: case 0x1168: return CL_INVALID_PROGRAM_EXECUTABLE;  /* kernels */
    default: return unknown("clGetProgramInfo", param);
    }
}

static cl_int get_program_build_info(cl_program p, cl_device_id d, cl_uint param, size_t size, void *value,
                                     size_t *size_ret) {
    if (!p) return CL_INVALID_VALUE;
    if (d != &device) return CL_INVALID_DEVICE;
    switch (param) {
    case 0x1181: ANSWER(cl_int, p->status);
    case 0x1182: ANSWER_STR(p->options);
    case 0x1183: ANSWER_STR(p->status == BUILD_ERROR ? BUILD_LOG : "");
    case 0x1184: ANSWER(cl_uint, 0);               /* binary type: none */
    case 0x1185: ANSWER(size_t, 0);                /* global variable total size */
    default: return unknown("clGetProgramBuildInfo", param);
    }
}

static cl_kernel create_kernel(cl_program p, const char *name, cl_int *err) {
    (void)p; (void)name;
    if (err) *err = CL_INVALID_PROGRAM_EXECUTABLE;
    return NULL;
}

static cl_int create_kernels(cl_program p, cl_uint n, cl_kernel *kernels, cl_uint *count) {
    (void)p; (void)n; (void)kernels; (void)count;
    return CL_INVALID_PROGRAM_EXECUTABLE;
}

/* --- Everything else --- */

/* The slots that return cl_int (or nothing) all point here. A call through a pointer of another
 * type is what every ICD stub table relies on: the C calling conventions of x86-64 and AArch64
 * let a callee ignore the arguments it was passed. */
static cl_int unsupported(void) { return CL_INVALID_OPERATION; }

/* The slots that create something return NULL and set *errcode_ret, which each takes in a
 * different place; so each gets its own function, typed as the slot is. */
#define REFUSE(name, ...) static void *name(__VA_ARGS__, cl_int *err) { if (err) *err = CL_INVALID_OPERATION; return NULL; }
typedef const void *ptr;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
REFUSE(refuse_image2d, cl_context c, cl_bitfield f, ptr fmt, size_t w, size_t h, size_t pitch, void *host)
REFUSE(refuse_image3d, cl_context c, cl_bitfield f, ptr fmt, size_t w, size_t h, size_t d, size_t row,
       size_t slice, void *host)
REFUSE(refuse_sampler, cl_context c, cl_bool normalized, cl_uint addressing, cl_uint filter)
REFUSE(refuse_program_with_binary, cl_context c, cl_uint n, ptr devices, ptr lengths, ptr binaries, cl_int *status)
REFUSE(refuse_map_buffer, cl_command_queue q, cl_mem m, cl_bool block, cl_bitfield f, size_t offset, size_t n,
       cl_uint nwait, ptr wait, cl_event *event)
REFUSE(refuse_map_image, cl_command_queue q, cl_mem m, cl_bool block, cl_bitfield f, ptr origin, ptr region,
       size_t *row, size_t *slice, cl_uint nwait, ptr wait, cl_event *event)
REFUSE(refuse_gl_buffer, cl_context c, cl_bitfield f, cl_uint object)   /* also renderbuffers */
REFUSE(refuse_gl_texture, cl_context c, cl_bitfield f, cl_uint target, cl_int level, cl_uint texture)
REFUSE(refuse_sub_buffer, cl_mem m, cl_bitfield f, cl_uint type, ptr info)
REFUSE(refuse_user_event, cl_context c)
REFUSE(refuse_gl_sync_event, cl_context c, ptr sync)
REFUSE(refuse_image, cl_context c, cl_bitfield f, ptr fmt, ptr desc, void *host)
REFUSE(refuse_builtin_kernels, cl_context c, cl_uint n, ptr devices, const char *names)
REFUSE(refuse_link, cl_context c, cl_uint n, ptr devices, const char *options, cl_uint ninputs, ptr inputs,
       void (*notify)(cl_program, void *), void *user)
REFUSE(refuse_egl_image, cl_context c, ptr display, ptr image, cl_uint target, ptr props)
REFUSE(refuse_egl_sync_event, cl_context c, ptr sync, ptr display)
REFUSE(refuse_pipe, cl_context c, cl_bitfield f, cl_uint packet, cl_uint max, ptr props)
REFUSE(refuse_sampler_with_properties, cl_context c, ptr props)
REFUSE(refuse_clone_kernel, cl_kernel k)
REFUSE(refuse_program_with_il, cl_context c, ptr il, size_t n)
REFUSE(refuse_buffer_with_properties, cl_context c, ptr props, cl_bitfield f, size_t n, void *host)
REFUSE(refuse_image_with_properties, cl_context c, ptr props, cl_bitfield f, ptr fmt, ptr desc, void *host)
static void *refuse_svm_alloc(cl_context c, cl_bitfield f, size_t n, cl_uint align) { return NULL; }
#pragma GCC diagnostic pop

/* Extension functions: this driver has none beyond the loader's own entry points. */
static void *extension_function(const char *name);
static void *extension_function_for_platform(cl_platform_id p, const char *name) {
    return p == &platform ? extension_function(name) : NULL;
}

static void fill_dispatch(void) {
    for (int i = 0; i < N_SLOTS; i++) dispatch[i] = (fn)unsupported;
    /* The slots of cl_khr_d3d10_sharing, cl_khr_d3d11_sharing and cl_khr_dx9_media_sharing (75-80,
     * 109-118) exist on Windows only, where this file is not used. */
#define SET(slot, f) dispatch[S_##slot] = (fn)(f)
    SET(GetPlatformIDs, get_platform_ids); SET(GetPlatformInfo, get_platform_info);
    SET(GetDeviceIDs, get_device_ids); SET(GetDeviceInfo, get_device_info);
    SET(RetainDevice, keep_device); SET(ReleaseDevice, keep_device);  /* the one device lives for ever */
    SET(CreateContext, create_context); SET(CreateContextFromType, create_context_from_type);
    SET(RetainContext, retain); SET(ReleaseContext, release_context); SET(GetContextInfo, get_context_info);
    SET(CreateCommandQueue, create_queue); SET(CreateCommandQueueWithProperties, create_queue_with_properties);
    SET(RetainCommandQueue, retain); SET(ReleaseCommandQueue, release_queue);
    SET(GetCommandQueueInfo, get_queue_info); SET(Flush, succeed); SET(Finish, succeed);
    SET(WaitForEvents, wait_for_events); SET(GetEventInfo, get_event_info);
    SET(RetainEvent, retain); SET(ReleaseEvent, release_event);
    SET(EnqueueMarkerWithWaitList, marker); SET(EnqueueBarrierWithWaitList, marker);
    SET(CreateBuffer, create_buffer); SET(RetainMemObject, retain); SET(ReleaseMemObject, release_mem);
    SET(GetMemObjectInfo, get_mem_info); SET(EnqueueReadBuffer, read_buffer);
    SET(EnqueueWriteBuffer, write_buffer); SET(EnqueueCopyBuffer, copy_buffer);
    SET(EnqueueFillBuffer, fill_buffer);
    SET(CreateProgramWithSource, create_program_with_source); SET(RetainProgram, retain);
    SET(ReleaseProgram, release_program); SET(BuildProgram, build_program);
    SET(CompileProgram, compile_program); SET(GetProgramInfo, get_program_info);
    SET(GetProgramBuildInfo, get_program_build_info);
    SET(CreateKernel, create_kernel); SET(CreateKernelsInProgram, create_kernels);
    SET(GetExtensionFunctionAddress, extension_function);
    SET(GetExtensionFunctionAddressForPlatform, extension_function_for_platform);
    SET(CreateImage2D, refuse_image2d); SET(CreateImage3D, refuse_image3d); SET(CreateSampler, refuse_sampler);
    SET(CreateProgramWithBinary, refuse_program_with_binary); SET(EnqueueMapBuffer, refuse_map_buffer);
    SET(EnqueueMapImage, refuse_map_image); SET(CreateFromGLBuffer, refuse_gl_buffer);
    SET(CreateFromGLTexture2D, refuse_gl_texture); SET(CreateFromGLTexture3D, refuse_gl_texture);
    SET(CreateFromGLRenderbuffer, refuse_gl_buffer); SET(CreateFromGLTexture, refuse_gl_texture);
    SET(CreateSubBuffer, refuse_sub_buffer); SET(CreateUserEvent, refuse_user_event);
    SET(CreateEventFromGLsyncKHR, refuse_gl_sync_event); SET(CreateImage, refuse_image);
    SET(CreateProgramWithBuiltInKernels, refuse_builtin_kernels); SET(LinkProgram, refuse_link);
    SET(CreateFromEGLImageKHR, refuse_egl_image); SET(CreateEventFromEGLSyncKHR, refuse_egl_sync_event);
    SET(CreatePipe, refuse_pipe); SET(SVMAlloc, refuse_svm_alloc);
    SET(CreateSamplerWithProperties, refuse_sampler_with_properties); SET(CloneKernel, refuse_clone_kernel);
    SET(CreateProgramWithIL, refuse_program_with_il);
    SET(CreateBufferWithProperties, refuse_buffer_with_properties);
    SET(CreateImageWithProperties, refuse_image_with_properties);
#undef SET
}

/* --- What the loader looks up: the platforms, their names, and the two functions by name --- */

EXPORT cl_int clIcdGetPlatformIDsKHR(cl_uint n, cl_platform_id *platforms, cl_uint *count) {
    if (!dispatch[0]) fill_dispatch();  /* the loader calls this first, once, under its lock */
    return get_platform_ids(n, platforms, count);
}

EXPORT cl_int clGetPlatformInfo(cl_platform_id p, cl_uint param, size_t size, void *value, size_t *size_ret) {
    return get_platform_info(p, param, size, value, size_ret);
}

static void *extension_function(const char *name) {
    if (name && !strcmp(name, "clIcdGetPlatformIDsKHR")) return (void *)clIcdGetPlatformIDsKHR;
    if (name && !strcmp(name, "clGetPlatformInfo")) return (void *)clGetPlatformInfo;
    return NULL;
}

EXPORT void *clGetExtensionFunctionAddress(const char *name) {
    return extension_function(name);
}
