// ember: float32 matrix products with AVX-512, or AVX2 + FMA where the CPU has no AVX-512
// (ember/inductor/gemm.py says why and when)
//
// C[b] = A[b] @ B[b] for b < batch, C row-major and contiguous per matrix; A and B with any
// element strides, so transposed views need no copy before the call.
//
// The classic blocked GEMM: for each KC-deep slice of K and NC-wide slice of N, a packed copy of
// B (NR-wide column strips, k-major), for each MC-tall block of rows a packed copy of A (MR-row
// strips, k-major), then an MR x NR micro-kernel that keeps its 24 accumulators in registers,
// streams its B strip from L1 and its A strip from L2. Packing pads strips with zeros, so the
// micro-kernel always runs full tiles; only its stores are clipped (AVX-512 masks).
// Threads split the batch, else the rows, else the columns: each runs the whole product for
// its part with its own packing buffers (no barrier inside a product).
//
// Two instruction sets, one driver: each section below defines the tile (MR, NR), the blocking
// (KC, MC, NC), PAR_FLOPS, STRIP_PREFETCH, Mat, pack_a, pack_b, Cols (the columns a clipped
// tile stores) and micro(); the blocked loops, the threads and the entry points after them are
// shared. Any other CPU (no AVX2/FMA, ARM) stops at the #error: gemm.py logs it, numpy serves.
#if defined(__AVX512F__)
// ---------------------------------------------------------------- AVX-512
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include <vector>

namespace {

constexpr int MR = 12;         // rows of a micro-tile
constexpr int NR = 32;         // columns of a micro-tile: two zmm registers
constexpr int KC = 256;        // depth of a packed slice: a B strip is KC*NR*4 = 32 KB (L1)
constexpr int MC = 120;        // rows of a packed A block: MC*KC*4 = 120 KB (L2)
constexpr int NC = 2048;       // columns of a packed B block
constexpr double PAR_FLOPS = 2e5;   // smaller products run on one thread
// gemm_part_short asks for every line of the next B strip's source (the first strip of the next K
// slice after the last), a share before each micro-tile, into L2 (_MM_HINT_T2): a weight read
// from memory (the forward after an optimizer step walked 50 MB) is otherwise fetched line by
// line by the packing. 64 x 1024 x 1024 on 2 threads, interleaved with the previous build (no
// prefetch), B from memory / in cache: B^T (a Linear's weight) 1.05 -> 0.99 and 1.21 -> 1.08 ms
// / 0.90 -> 0.87 ms; B 1.05 -> 0.97 ms / 0.91 -> 0.86 ms. One line per row at the strip's start,
// as AVX2 does, measured no better here.
constexpr int STRIP_PREFETCH = 2;

struct Mat {                   // a strided matrix view
    const float* p;
    int64_t s0, s1;            // element strides of rows and columns
    inline float at(int64_t i, int64_t j) const { return p[i * s0 + j * s1]; }
};

// r[i][j] <- r[j][i] for a 16x16 block of floats, in registers
inline void transpose16(__m512 r[16]) {
    __m512 t[16], u[16], v[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 4; ++i) {
            v[8 * h + i] = _mm512_shuffle_f32x4(u[8 * h + i], u[8 * h + 4 + i], 0x88);
            v[8 * h + 4 + i] = _mm512_shuffle_f32x4(u[8 * h + i], u[8 * h + 4 + i], 0xDD);
        }
    for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_shuffle_f32x4(v[i], v[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(v[i], v[8 + i], 0xDD);
    }
}

// B[k0:k0+kc, j0:j0+nc] as strips of NR columns, each k-major (kc rows of NR), zero-padded
void pack_b(const Mat& B, int64_t k0, int kc, int64_t j0, int nc, float* dst) {
    for (int js = 0; js < nc; js += NR) {
        int w = nc - js < NR ? nc - js : NR;
        float* d = dst + (int64_t)(js / NR) * kc * NR;
        if (B.s1 == 1) {
            __mmask16 m0 = w >= 16 ? 0xFFFF : (__mmask16)((1u << w) - 1);
            __mmask16 m1 = w >= 32 ? 0xFFFF : (w > 16 ? (__mmask16)((1u << (w - 16)) - 1) : 0);
            for (int k = 0; k < kc; ++k) {
                const float* s = B.p + (k0 + k) * B.s0 + (j0 + js);
                _mm512_store_ps(d + k * NR, _mm512_maskz_loadu_ps(m0, s));
                _mm512_store_ps(d + k * NR + 16, _mm512_maskz_loadu_ps(m1, s + 16));
            }
        } else if (B.s0 == 1) {
            // a transposed weight (column j of B is row j of W, contiguous in k): 16x16 blocks
            // loaded along k and transposed in registers
            for (int k = 0; k < kc; k += 16) {
                int kk = kc - k < 16 ? kc - k : 16;
                __mmask16 km = kk == 16 ? 0xFFFF : (__mmask16)((1u << kk) - 1);
                for (int h = 0; h < NR; h += 16) {
                    __m512 r[16];
                    for (int q = 0; q < 16; ++q)
                        r[q] = h + q < w ? _mm512_maskz_loadu_ps(km, B.p + (k0 + k) + (j0 + js + h + q) * B.s1)
                                         : _mm512_setzero_ps();
                    transpose16(r);
                    for (int q = 0; q < kk; ++q) _mm512_store_ps(d + (k + q) * NR + h, r[q]);
                }
            }
        } else {
            if (w < NR) memset(d, 0, sizeof(float) * kc * NR);
            for (int jj = 0; jj < w; ++jj) {          // column by column: contiguous when s0 == 1
                const float* s = B.p + k0 * B.s0 + (j0 + js + jj) * B.s1;
                for (int k = 0; k < kc; ++k) d[k * NR + jj] = s[k * B.s0];
            }
        }
    }
}

// A[i0:i0+mc, k0:k0+kc] as strips of MR rows, each k-major (kc columns of MR), zero-padded
void pack_a(const Mat& A, int64_t i0, int mc, int64_t k0, int kc, float* dst) {
    if (A.s0 == 1) {
        // transposed A (a weight gradient's X^T): row k of the block is contiguous in i. Walk it
        // k-row by k-row across every strip: strip by strip, each strip read one 48-byte piece
        // of a line per k at a stride of whole rows (kilobytes), the same L1 sets again and
        // again, and the product ran at 172 instead of 210 GFLOP/s (1024^2 x 256, 2 threads)
        const int strips = (mc + MR - 1) / MR;
        for (int k = 0; k < kc; ++k) {
            const float* s = A.p + i0 + (k0 + k) * A.s1;
            for (int t = 0; t < strips; ++t) {
                int h = mc - t * MR < MR ? mc - t * MR : MR;
                __mmask16 m = (__mmask16)((1u << h) - 1);
                _mm512_mask_storeu_ps(dst + (int64_t)t * kc * MR + k * MR, (__mmask16)((1u << MR) - 1),
                                      _mm512_maskz_loadu_ps(m, s + t * MR));
            }
        }
        return;
    }
    for (int is = 0; is < mc; is += MR) {
        int h = mc - is < MR ? mc - is : MR;
        float* d = dst + (int64_t)(is / MR) * kc * MR;
        if (A.s1 == 1) {                    // row-major A: 16 k of 16 (12 used) rows, transposed
            for (int k = 0; k < kc; k += 16) {
                int kk = kc - k < 16 ? kc - k : 16;
                __mmask16 km = kk == 16 ? 0xFFFF : (__mmask16)((1u << kk) - 1);
                __m512 r[16];
                for (int q = 0; q < 16; ++q)
                    r[q] = q < h ? _mm512_maskz_loadu_ps(km, A.p + (i0 + is + q) * A.s0 + k0 + k) : _mm512_setzero_ps();
                transpose16(r);
                for (int q = 0; q < kk; ++q) _mm512_mask_storeu_ps(d + (k + q) * MR, (__mmask16)((1u << MR) - 1), r[q]);
            }
        } else {
            if (h < MR) memset(d, 0, sizeof(float) * kc * MR);
            for (int ii = 0; ii < h; ++ii) {          // row by row: contiguous when s1 == 1
                const float* s = A.p + (i0 + is + ii) * A.s0 + k0 * A.s1;
                for (int k = 0; k < kc; ++k) d[k * MR + ii] = s[k * A.s1];
            }
        }
    }
}

// C[0:R, 0:nr] (+)= a (R of the strip's MR rows, kc deep, k-major) @ b (kc x NR, k-major).
// R is a template argument so that a short last strip (64 rows = 5 strips of 12 and one of 4)
// runs only its own rows' FMAs: computing it as a full 12-row tile spent 12 % of a 64-row
// product's FMAs on zero padding.
template <int R>
inline void micro_rows(int kc, const float* __restrict__ a, const float* __restrict__ b, float* c, int64_t ldc,
                       __mmask16 m0, __mmask16 m1, bool acc) {
    __m512 c0[R], c1[R];
    // C's tile asked for before the FMAs, so that its lines (read back when acc, owned for the
    // stores either way) arrive while they run: a weight gradient's 1024 x 1024 output written
    // from memory (K = 64, one slice) 0.88 -> 0.82 ms, 1024 x 256 x 1024 products 2-5% (Zen 4)
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
        _mm_prefetch((const char*)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char*)(c + i * ldc + 31), _MM_HINT_T0);
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) { c0[i] = _mm512_setzero_ps(); c1[i] = _mm512_setzero_ps(); }
    // pointers bumped, not a[k * MR + i]: the code cache builds with -fwrapv, under which an
    // int index is recomputed and sign-extended for every broadcast (two integer ops per pair of
    // FMAs: the product ran at 1.9 instead of 1.4 ms for 1024 x 256 x 1024)
    for (int k = 0; k < kc; ++k, a += MR, b += NR) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
        for (int i = 0; i < R; ++i) {
            __m512 av = _mm512_set1_ps(a[i]);
            c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
        float* r = c + i * ldc;
        if (acc) {
            c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, r));
            c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, r + 16));
        }
        _mm512_mask_storeu_ps(r, m0, c0[i]);
        _mm512_mask_storeu_ps(r + 16, m1, c1[i]);
    }
}

// the micro-tile of the strip's first mr rows (1 <= mr <= MR)
inline void micro(int kc, const float* __restrict__ a, const float* __restrict__ b, float* c, int64_t ldc,
                  int mr, __mmask16 m0, __mmask16 m1, bool acc) {
    switch (mr) {
        case 12: micro_rows<12>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 11: micro_rows<11>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 10: micro_rows<10>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 9: micro_rows<9>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 8: micro_rows<8>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 7: micro_rows<7>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 6: micro_rows<6>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 5: micro_rows<5>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 4: micro_rows<4>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 3: micro_rows<3>(kc, a, b, c, ldc, m0, m1, acc); break;
        case 2: micro_rows<2>(kc, a, b, c, ldc, m0, m1, acc); break;
        default: micro_rows<1>(kc, a, b, c, ldc, m0, m1, acc); break;
    }
}

// The micro-kernel with the operands' roles swapped, for C = A @ W^T (a Linear's weight W, its
// rows contiguous in k): t[0:R, 0:NR] (+)= W[0:R, 0:kc] @ b, C^T's tile, computed as micro_rows
// computes C's but broadcasting W's elements straight from its rows (no packed copy of W)
// against a packed strip b of A^T. t is a small tile buffer (NR floats a row) that gemm_part_wt
// transposes into C after the last K slice; each sum runs in micro_rows's order (k in order
// within a slice, the slice's sum added to the earlier slices'), so the bits are the same.
template <int R, int V>
inline void micro_wt_rows(int kc, const float* __restrict__ w, int64_t ldw, const float* __restrict__ b,
                          float* __restrict__ t, bool acc) {
    __m512 c0[R], c1[R];
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) { c0[i] = _mm512_setzero_ps(); c1[i] = _mm512_setzero_ps(); }
    for (int k = 0; k < kc; ++k, ++w, b += NR) {
        __m512 b0 = _mm512_load_ps(b), b1 = V == 2 ? _mm512_load_ps(b + 16) : b0;
#pragma GCC unroll 12
        for (int i = 0; i < R; ++i) {
            __m512 av = _mm512_set1_ps(w[i * ldw]);
            c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
            if (V == 2) c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
        float* r = t + i * NR;
        if (acc) {
            c0[i] = _mm512_add_ps(c0[i], _mm512_load_ps(r));
            if (V == 2) c1[i] = _mm512_add_ps(c1[i], _mm512_load_ps(r + 16));
        }
        _mm512_store_ps(r, c0[i]);
        if (V == 2) _mm512_store_ps(r + 16, c1[i]);
    }
}

// C[0:nc, 0:r] = t[0:r, 0:nc]^T (t: NR floats a row), 16x16 blocks transposed in registers
inline void store_transposed(const float* t, int r, int nc, float* c, int64_t ldc) {
    const __mmask16 m = (__mmask16)((1u << r) - 1);
    for (int h = 0; h * 16 < nc; ++h) {
        __m512 v[16];
        for (int q = 0; q < 16; ++q) v[q] = q < r ? _mm512_load_ps(t + q * NR + h * 16) : _mm512_setzero_ps();
        transpose16(v);
        const int rows = nc - h * 16 < 16 ? nc - h * 16 : 16;
        for (int l = 0; l < rows; ++l) _mm512_mask_storeu_ps(c + (int64_t)(h * 16 + l) * ldc, m, v[l]);
    }
}

// gemm_part_wt takes a short product with B = W^T when its rows fill whole 16-column halves of
// the strips (no padded FMAs) and number at most 96: 64 x 1024 x 1024 1.15-1.17x, 48 x 1024 x 1024
// 1.14x, 16 x 1024 x 1024 1.5x, 96 x 1024 x 1024 1.03-1.04x; 100 and 56 rows (a padded strip)
// 0.92-0.95x and 112 rows 0.96-1.06x stay on gemm_part_short (Zen 4, 1 and 2 threads).
constexpr int WT_COLS = 16, WT_MAX_ROWS = 96;

// the columns of C a micro-tile writes, as the two stores' masks
struct Cols {
    __mmask16 m0, m1;
    explicit Cols(int nr)
        : m0(nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1)),
          m1(nr >= 32 ? 0xFFFF : (nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0)) {}
};

inline void micro(int kc, const float* __restrict__ a, const float* __restrict__ b, float* c, int64_t ldc,
                  int mr, const Cols& cols, bool acc) {
    micro(kc, a, b, c, ldc, mr, cols.m0, cols.m1, acc);
}

#elif defined(__AVX2__) && defined(__FMA__)
// ---------------------------------------------------------------- AVX2 + FMA (no AVX-512)
// 16 ymm registers: a 6 x 16 tile keeps 12 accumulators, two B vectors and one broadcast of A
// (the classic Haswell tile; 4 x 24 and 8 x 8 were not tried). Measured on the 2-core AMD EPYC
// box (L1d 32 KB, L2 512 KB per core): see gemm.py. Edges: a template per row count and per
// column width (8 or 16), so a clipped tile runs only its own rows' and vectors' FMAs; clipped
// columns are stored through a small buffer, element by element (no masked stores).
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include <vector>

namespace {

constexpr int MR = 6;          // rows of a micro-tile
constexpr int NR = 16;         // columns of a micro-tile: two ymm registers
constexpr int KC = 256;        // depth of a packed slice: a B strip is KC*NR*4 = 16 KB (L1)
constexpr int MC = 144;        // rows of a packed A block: MC*KC*4 = 144 KB (L2)
constexpr int NC = 2048;       // columns of a packed B block
// smaller products run on one thread: waking a second (OMP_WAIT_POLICY=passive) cost more than
// it saved on the 2-core box, 128 x 128 x 64 (2.1 MFLOP) ran at 75 GFLOP/s on one thread, 40 on two
constexpr double PAR_FLOPS = 4e6;
// gemm_part_short asks for the next B strip's source rows while the current strip computes: a
// row-major B is read 64 bytes per row at a stride of whole rows, across pages, which the hardware
// prefetchers do not follow (64 x 1024 x 1024: 34-41 -> 45-49 GFLOP/s, one thread)
constexpr int STRIP_PREFETCH = 1;    // the next strip's source, one line per row at its start

struct Mat {                   // a strided matrix view
    const float* p;
    int64_t s0, s1;            // element strides of rows and columns
    inline float at(int64_t i, int64_t j) const { return p[i * s0 + j * s1]; }
};

// r[i][j] <- r[j][i] for an 8x8 block of floats, in registers
inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}

// B[k0:k0+kc, j0:j0+nc] as strips of NR columns, each k-major (kc rows of NR), zero-padded
void pack_b(const Mat& B, int64_t k0, int kc, int64_t j0, int nc, float* dst) {
    for (int js = 0; js < nc; js += NR) {
        int w = nc - js < NR ? nc - js : NR;
        float* d = dst + (int64_t)(js / NR) * kc * NR;
        if (B.s1 == 1) {
            const float* s = B.p + k0 * B.s0 + (j0 + js);
            if (w == NR) {
                for (int k = 0; k < kc; ++k, s += B.s0) {
                    _mm256_store_ps(d + k * NR, _mm256_loadu_ps(s));
                    _mm256_store_ps(d + k * NR + 8, _mm256_loadu_ps(s + 8));
                }
            } else {
                for (int k = 0; k < kc; ++k, s += B.s0) {
                    float* r = d + k * NR;
                    int j = 0;
                    for (; j < w; ++j) r[j] = s[j];
                    for (; j < NR; ++j) r[j] = 0.0f;
                }
            }
        } else if (B.s0 == 1) {
            // a transposed weight (column j of B is row j of W, contiguous in k): 8x8 blocks
            // loaded along k and transposed in registers; a ragged k tail element by element
            int k = 0;
            for (; k + 8 <= kc; k += 8)
                for (int h = 0; h < NR; h += 8) {
                    __m256 r[8];
                    for (int q = 0; q < 8; ++q)
                        r[q] = h + q < w ? _mm256_loadu_ps(B.p + (k0 + k) + (j0 + js + h + q) * B.s1)
                                         : _mm256_setzero_ps();
                    transpose8(r);
                    for (int q = 0; q < 8; ++q) _mm256_store_ps(d + (k + q) * NR + h, r[q]);
                }
            for (; k < kc; ++k)
                for (int j = 0; j < NR; ++j) d[k * NR + j] = j < w ? B.p[(k0 + k) + (j0 + js + j) * B.s1] : 0.0f;
        } else {
            if (w < NR) memset(d, 0, sizeof(float) * kc * NR);
            for (int jj = 0; jj < w; ++jj) {          // column by column
                const float* s = B.p + k0 * B.s0 + (j0 + js + jj) * B.s1;
                for (int k = 0; k < kc; ++k) d[k * NR + jj] = s[k * B.s0];
            }
        }
    }
}

// A[i0:i0+mc, k0:k0+kc] as strips of MR rows, each k-major (kc columns of MR), zero-padded
void pack_a(const Mat& A, int64_t i0, int mc, int64_t k0, int kc, float* dst) {
    const int strips = (mc + MR - 1) / MR;
    if (A.s0 == 1) {
        // transposed A (a weight gradient's X^T): row k of the block is contiguous in i; walked
        // k-row by k-row across every strip (the AVX-512 path's reason holds here too)
        for (int k = 0; k < kc; ++k) {
            const float* s = A.p + i0 + (k0 + k) * A.s1;
            int t = 0;
            for (; t < strips && (t + 1) * MR <= mc; ++t) {
                float* d = dst + (int64_t)t * kc * MR + k * MR;
                _mm_storeu_ps(d, _mm_loadu_ps(s + t * MR));
                _mm_storel_pi((__m64*)(d + 4), _mm_castpd_ps(_mm_load_sd((const double*)(s + t * MR + 4))));
            }
            for (; t < strips; ++t) {
                float* d = dst + (int64_t)t * kc * MR + k * MR;
                int h = mc - t * MR;
                for (int q = 0; q < MR; ++q) d[q] = q < h ? s[t * MR + q] : 0.0f;
            }
        }
        return;
    }
    for (int t = 0; t < strips; ++t) {
        int is = t * MR, h = mc - is < MR ? mc - is : MR;
        float* d = dst + (int64_t)t * kc * MR;
        if (A.s1 == 1) {                    // row-major A: 8 k of 8 (6 used) rows, transposed
            int k = 0;
            for (; k + 8 <= kc; k += 8) {
                __m256 r[8];
                for (int q = 0; q < 8; ++q)
                    r[q] = q < h ? _mm256_loadu_ps(A.p + (i0 + is + q) * A.s0 + k0 + k) : _mm256_setzero_ps();
                transpose8(r);
                for (int q = 0; q < 8; ++q) {
                    float* o = d + (k + q) * MR;
                    _mm_storeu_ps(o, _mm256_castps256_ps128(r[q]));
                    _mm_storel_pi((__m64*)(o + 4), _mm256_extractf128_ps(r[q], 1));
                }
            }
            for (; k < kc; ++k)
                for (int q = 0; q < MR; ++q) d[k * MR + q] = q < h ? A.p[(i0 + is + q) * A.s0 + k0 + k] : 0.0f;
        } else {
            if (h < MR) memset(d, 0, sizeof(float) * kc * MR);
            for (int ii = 0; ii < h; ++ii) {          // row by row
                const float* s = A.p + (i0 + is + ii) * A.s0 + k0 * A.s1;
                for (int k = 0; k < kc; ++k) d[k * MR + ii] = s[k * A.s1];
            }
        }
    }
}

// the columns of C a micro-tile writes: nr of NR
struct Cols {
    int nr;
    explicit Cols(int n) : nr(n) {}
};

// C[0:R, 0:nr] (+)= a (R of the strip's MR rows, kc deep, k-major) @ b (kc x NR, k-major), with
// W = 1 (nr <= 8: only the strip's first vector) or 2 vectors per row
template <int R, int W>
inline void micro_rows(int kc, const float* __restrict__ a, const float* __restrict__ b, float* c, int64_t ldc,
                       int nr, bool acc) {
    __m256 cv[R][W];
    // C's tile asked for ahead of its load and store at the end: the blocked 1024 x 256 x 1024
    // product's thread-CPU time median went from 51-55 to 62-64 GFLOP/s (one thread, loaded box)
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
        _mm_prefetch((const char*)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char*)(c + i * ldc + 8 * W - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < W; ++v) cv[i][v] = _mm256_setzero_ps();
    // pointers bumped, not a[k * MR + i] (see the AVX-512 kernel: -fwrapv)
#pragma GCC unroll 4
    for (int k = 0; k < kc; ++k, a += MR, b += NR) {
        __m256 bv[W];
#pragma GCC unroll 2
        for (int v = 0; v < W; ++v) bv[v] = _mm256_load_ps(b + 8 * v);
#pragma GCC unroll 12
        for (int i = 0; i < R; ++i) {
            __m256 av = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 2
            for (int v = 0; v < W; ++v) cv[i][v] = _mm256_fmadd_ps(av, bv[v], cv[i][v]);
        }
    }
    if (nr == 8 * W) {
#pragma GCC unroll 12
        for (int i = 0; i < R; ++i) {
            float* r = c + i * ldc;
#pragma GCC unroll 2
            for (int v = 0; v < W; ++v) {
                __m256 x = cv[i][v];
                if (acc) x = _mm256_add_ps(x, _mm256_loadu_ps(r + 8 * v));
                _mm256_storeu_ps(r + 8 * v, x);
            }
        }
        return;
    }
    alignas(32) float tmp[8 * W];
#pragma GCC unroll 12                     // unrolled, so the accumulators stay in registers
    for (int i = 0; i < R; ++i) {
        float* r = c + i * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < W; ++v) _mm256_store_ps(tmp + 8 * v, cv[i][v]);
        if (acc)
            for (int j = 0; j < nr; ++j) r[j] += tmp[j];
        else
            for (int j = 0; j < nr; ++j) r[j] = tmp[j];
    }
}

// the micro-tile of the strip's first mr rows (1 <= mr <= MR) and first cols.nr columns
inline void micro(int kc, const float* __restrict__ a, const float* __restrict__ b, float* c, int64_t ldc,
                  int mr, const Cols& cols, bool acc) {
    const int nr = cols.nr;
    if (nr > 8) {
        switch (mr) {
            case 6: micro_rows<6, 2>(kc, a, b, c, ldc, nr, acc); break;
            case 5: micro_rows<5, 2>(kc, a, b, c, ldc, nr, acc); break;
            case 4: micro_rows<4, 2>(kc, a, b, c, ldc, nr, acc); break;
            case 3: micro_rows<3, 2>(kc, a, b, c, ldc, nr, acc); break;
            case 2: micro_rows<2, 2>(kc, a, b, c, ldc, nr, acc); break;
            default: micro_rows<1, 2>(kc, a, b, c, ldc, nr, acc); break;
        }
    } else {
        switch (mr) {
            case 6: micro_rows<6, 1>(kc, a, b, c, ldc, nr, acc); break;
            case 5: micro_rows<5, 1>(kc, a, b, c, ldc, nr, acc); break;
            case 4: micro_rows<4, 1>(kc, a, b, c, ldc, nr, acc); break;
            case 3: micro_rows<3, 1>(kc, a, b, c, ldc, nr, acc); break;
            case 2: micro_rows<2, 1>(kc, a, b, c, ldc, nr, acc); break;
            default: micro_rows<1, 1>(kc, a, b, c, ldc, nr, acc); break;
        }
    }
}

// C^T's tile t[0:R, 0:8*V] (+)= W[0:R, 0:kc] @ b, W read in place: the AVX-512 section's
// micro_wt_rows (gemm_part_wt says why) on 8-float vectors
template <int R, int V>
inline void micro_wt_rows(int kc, const float* __restrict__ w, int64_t ldw, const float* __restrict__ b,
                          float* __restrict__ t, bool acc) {
    __m256 cv[R][V];
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) cv[i][v] = _mm256_setzero_ps();
    for (int k = 0; k < kc; ++k, ++w, b += NR) {
        __m256 bv[V];
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) bv[v] = _mm256_load_ps(b + 8 * v);
#pragma GCC unroll 12
        for (int i = 0; i < R; ++i) {
            __m256 av = _mm256_broadcast_ss(w + i * ldw);
#pragma GCC unroll 2
            for (int v = 0; v < V; ++v) cv[i][v] = _mm256_fmadd_ps(av, bv[v], cv[i][v]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) {
            float* r = t + i * NR + 8 * v;
            __m256 x = cv[i][v];
            if (acc) x = _mm256_add_ps(x, _mm256_load_ps(r));
            _mm256_store_ps(r, x);
        }
}

// C[0:nc, 0:r] = t[0:r, 0:nc]^T (t: NR floats a row), 8x8 blocks transposed in registers; each
// C row's r floats through a small buffer (no masked stores, as micro_rows)
inline void store_transposed(const float* t, int r, int nc, float* c, int64_t ldc) {
    alignas(32) float tmp[8];
    for (int h = 0; h * 8 < nc; ++h) {
        __m256 v[8];
        for (int q = 0; q < 8; ++q) v[q] = q < r ? _mm256_load_ps(t + q * NR + h * 8) : _mm256_setzero_ps();
        transpose8(v);
        const int rows = nc - h * 8 < 8 ? nc - h * 8 : 8;
        for (int l = 0; l < rows; ++l) {
            _mm256_store_ps(tmp, v[l]);
            memcpy(c + (int64_t)(h * 8 + l) * ldc, tmp, sizeof(float) * r);
        }
    }
}

// gemm_part_wt's rows here: whole 8-column halves of the 16-wide strips, at most 96. Measured with
// this build on the Zen 4 box (no AVX2-only CPU at hand), one thread, median GFLOP/s: 64 x 1024 x
// 1024 78 -> 85, 48 x 1024 x 1024 77 -> 91, 16 x 1024 x 1024 52 -> 79, 32 x 256 x 1024 65 -> 74,
// 40 x 1024 x 1024 and 96 x 1024 x 1024 level.
constexpr int WT_COLS = 8, WT_MAX_ROWS = 96;

#else
#error "ember GEMM: the CPU has neither AVX-512F nor AVX2 with FMA (numpy matmul serves)"
#endif

// the shared driver, only under a section above (elsewhere the #error is the compiler's one message)
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))

float* buffer(std::vector<float>& v, size_t n) {
    if (v.size() < n + 16) v.resize(n + 16);
    uintptr_t p = (uintptr_t)v.data();
    return (float*)((p + 63) & ~(uintptr_t)63);
}

// The source of the B strip gemm_part_short packs after the one at (pc, j): the next NR columns,
// else the first of the next KC slice. rows: its source's contiguous runs (KC-deep rows of a
// row-major B, NR columns of a transposed one; 0 for other strides or past the end).
struct NextStrip {
    const char* p = nullptr;
    int64_t step = 0;          // bytes between runs
    int rows = 0, bytes = 0;   // runs, bytes per run
    NextStrip() = default;
    NextStrip(const Mat& B, int64_t K, int64_t pc, int64_t j, int64_t j0, int64_t j1) {
        int64_t jn = j + NR, pn = pc;
        if (jn >= j1) { jn = j0; pn = pc + KC; }
        if (pn >= K || (B.s1 != 1 && B.s0 != 1)) return;
        const int nn = (int)(j1 - jn < NR ? j1 - jn : NR), kn = (int)(K - pn < KC ? K - pn : KC);
        p = (const char*)(B.p + pn * B.s0 + jn * B.s1);
        if (B.s1 == 1) { step = B.s0 * 4; rows = kn; bytes = nn * 4; }
        else { step = B.s1 * 4; rows = nn; bytes = kn * 4; }
    }
    // every line of runs [r0, r1) into L2
    inline void prefetch(int r0, int r1) const {
        for (int r = r0; r < r1; ++r) {
            const char* q = p + r * step;
            for (int o = 0; o < bytes; o += 64) _mm_prefetch(q + o, _MM_HINT_T2);
            _mm_prefetch(q + bytes - 4, _MM_HINT_T2);
        }
    }
};

// gemm_part for a short block (at most MC rows: one packed A block per slice). B is packed one
// NR-wide strip at a time, just before its micro-kernels: with few rows a packed B strip serves
// few micro-tiles, and packing a whole KC x NC slice first read B from memory with nothing to
// compute meanwhile. Strip by strip, the core overlaps the next strip's loads with this one's
// FMAs, and the strip stays in L1. Measured on the 2-core box, interleaved in one process:
// 64 x 1024 x 1024 products 1.03-1.13x, compiled MLP inference (three of them) 1.08x; a
// software prefetch of the next strip's source on top measured no better (dropped). Same
// tiles, same order of sums: the same bits as the blocked path.
void gemm_part_short(int64_t K, const Mat& A, const Mat& B, float* C, int64_t ldc,
                     int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    thread_local std::vector<float> abuf, sbuf;
    float* ap = buffer(abuf, (size_t)MC * KC);
    float* bs = buffer(sbuf, (size_t)KC * NR);
    const int mc = (int)(i1 - i0), tiles = (mc + MR - 1) / MR;
    for (int64_t pc = 0; pc < K; pc += KC) {
        int kc = (int)(K - pc < KC ? K - pc : KC);
        pack_a(A, i0, mc, pc, kc, ap);
        for (int64_t j = j0; j < j1; j += NR) {
            int nr = (int)(j1 - j < NR ? j1 - j : NR);
            pack_b(B, pc, kc, j, nr, bs);
            if (STRIP_PREFETCH == 1 && j + NR < j1) {   // the next strip's source, one line per row
                const char* nx = (const char*)(B.p + pc * B.s0 + (j + NR) * B.s1);
                const int64_t step = (B.s1 == 1 ? B.s0 : (B.s0 == 1 ? B.s1 : 0)) * 4;
                if (step) for (int q = 0; q < (B.s1 == 1 ? kc : NR); ++q) _mm_prefetch(nx + q * step, _MM_HINT_T2);
            }
            const NextStrip next = STRIP_PREFETCH == 2 ? NextStrip(B, K, pc, j, j0, j1) : NextStrip();
            const Cols cols(nr);
            for (int t = 0; t < tiles; ++t) {
                if (STRIP_PREFETCH == 2) next.prefetch(next.rows * t / tiles, next.rows * (t + 1) / tiles);
                int ir = t * MR, mr = mc - ir < MR ? mc - ir : MR;
                micro(kc, ap + (int64_t)t * kc * MR, bs, C + (i0 + ir) * ldc + j, ldc, mr, cols, pc > 0);
            }
        }
    }
}

// gemm_part_short for B = W^T with W's rows contiguous in k (B.s0 == 1: a Linear's weight), where
// packing B is most of a short product's cost: each NR-wide strip of B is a register transpose
// of NR of W's rows, used by a few micro-tiles only (64 x 1024 x 1024 on one thread: 84 GFLOP/s,
// 107 with B packed beforehand). The product is computed as C^T = W @ A^T instead (micro_wt): A^T,
// a few strips wide, is packed once per K slice; W is read in place, MR rows at a time; the C^T
// tiles' sums are kept in a buffer over the K slices and transposed into C after the last.
// W's rows are copied first (a plain copy, to a stride of KC + 16 floats) where its row stride is
// a multiple of 2 KB: MR rows read side by side at a 4 KB stride all fall in the same L1 sets,
// and 64 x 1024 x 1024 ran at 66-69 GFLOP/s in some processes (by where the arrays lay), 97 in
// others; copied, 96-98 in all.
// micro_wt_rows (each section's) for the tile's first r (1 <= r <= MR) rows of W and a strip's
// first nc columns: one vector a row where nc fits in one, else two
template <int R>
inline void micro_wt_r(int kc, const float* __restrict__ w, int64_t ldw, const float* __restrict__ b, float* t,
                       int r, int nc, bool acc) {
    if (r == R || R == 1) {
        if (nc > NR / 2) micro_wt_rows<R, 2>(kc, w, ldw, b, t, acc);
        else micro_wt_rows<R, 1>(kc, w, ldw, b, t, acc);
    } else if constexpr (R > 1) {
        micro_wt_r<R - 1>(kc, w, ldw, b, t, r, nc, acc);
    }
}

inline void micro_wt(int kc, const float* __restrict__ w, int64_t ldw, const float* __restrict__ b, float* t,
                     int r, int nc, bool acc) {
    micro_wt_r<MR>(kc, w, ldw, b, t, r, nc, acc);
}

int64_t wt_parts = 0;          // thread parts computed by gemm_part_wt (the tests ask)

// gemm_part_wt on the W rows [j0, j1): its C^T tiles' sums in t over every K slice, then into C
void gemm_part_wt_rows(int64_t K, const Mat& A, const Mat& B, float* C, int64_t ldc, int64_t i0, int64_t i1,
                       int64_t j0, int64_t j1, float* ap, float* wc, float* t) {
    constexpr int LDW = KC + 16;
    const int mc = (int)(i1 - i0), strips = (mc + NR - 1) / NR;
    const int64_t tiles = (j1 - j0 + MR - 1) / MR;
    const Mat At{A.p, A.s1, A.s0};                                  // A^T [K, M]
    const bool copy_rows = B.s1 % 512 == 0;
    for (int64_t pc = 0; pc < K; pc += KC) {
        const int kc = (int)(K - pc < KC ? K - pc : KC);
        pack_b(At, pc, kc, i0, mc, ap);
        for (int64_t q = 0; q < tiles; ++q) {
            const int64_t j = j0 + q * MR;
            const int r = (int)(j1 - j < MR ? j1 - j : MR);
            const float* w = B.p + pc + j * B.s1;
            int64_t ldw = B.s1;
            if (copy_rows) {
                for (int i = 0; i < r; ++i) memcpy(wc + i * LDW, w + i * B.s1, sizeof(float) * kc);
                w = wc;
                ldw = LDW;
            }
            // the next tile's rows (the next K slice's first after the last) asked for into L2, a
            // share before each strip's micro-tile: W comes from memory (see gemm_part_wt)
            const int64_t qn = q + 1 < tiles ? q + 1 : 0, pn = q + 1 < tiles ? pc : pc + KC;
            const int64_t jn = j0 + qn * MR;
            const int rn = pn < K ? (int)(j1 - jn < MR ? j1 - jn : MR) : 0;
            const int kn = pn < K ? (int)(K - pn < KC ? K - pn : KC) : 0;
            for (int s = 0; s < strips; ++s) {
                for (int i = rn * s / strips; i < rn * (s + 1) / strips; ++i) {
                    const char* row = (const char*)(B.p + pn + (jn + i) * B.s1);
                    for (int o = 0; o < kn * 4; o += 64) _mm_prefetch(row + o, _MM_HINT_T1);
                    _mm_prefetch(row + kn * 4 - 4, _MM_HINT_T1);
                }
                micro_wt(kc, w, ldw, ap + (int64_t)s * kc * NR, t + (q * strips + s) * MR * NR, r,
                         mc - s * NR < NR ? mc - s * NR : NR, pc > 0);
            }
        }
    }
    for (int64_t q = 0; q < tiles; ++q) {
        const int64_t j = j0 + q * MR;
        const int r = (int)(j1 - j < MR ? j1 - j : MR);
        for (int s = 0; s < strips; ++s)
            store_transposed(t + (q * strips + s) * MR * NR, r, mc - s * NR < NR ? mc - s * NR : NR,
                             C + (i0 + (int64_t)s * NR) * ldc + j, ldc);
    }
}

// W's rows in chunks of at most WT_TILES tiles, so that the C^T tiles' buffer stays small (at most
// 96 x 1020 floats, 392 KB, where a whole vocabulary-wide product would double C's memory)
constexpr int64_t WT_TILES = 85;

void gemm_part_wt(int64_t K, const Mat& A, const Mat& B, float* C, int64_t ldc,
                  int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    __atomic_add_fetch(&wt_parts, 1, __ATOMIC_RELAXED);
    thread_local std::vector<float> abuf, tbuf, wbuf;
    const int strips = (int)((i1 - i0 + NR - 1) / NR);
    const int64_t tiles = (j1 - j0 + MR - 1) / MR, chunks = (tiles + WT_TILES - 1) / WT_TILES;
    const int64_t per = (tiles + chunks - 1) / chunks;              // tiles per chunk, balanced
    float* ap = buffer(abuf, (size_t)KC * strips * NR);
    float* wc = buffer(wbuf, (size_t)MR * (KC + 16));
    float* t = buffer(tbuf, (size_t)(per * strips * MR * NR));       // C^T's tiles: [tile][strip][MR][NR]
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t ja = j0 + c * per * MR, jb = ja + per * MR < j1 ? ja + per * MR : j1;
        if (ja < jb) gemm_part_wt_rows(K, A, B, C, ldc, i0, i1, ja, jb, ap, wc, t);
    }
}


// C[i0:i1, j0:j1] = A[i0:i1, :] @ B[:, j0:j1] on the calling thread. With ``pre`` (B packed
// whole by ember_sgemm_pack_b, rows padded to npad columns) the B blocks are read from it.
void gemm_part(int64_t K, const Mat& A, const Mat& B, float* C, int64_t ldc,
               int64_t i0, int64_t i1, int64_t j0, int64_t j1, const float* pre = nullptr, int64_t npad = 0) {
    if (!pre && i1 - i0 <= MC) {
        const int64_t mc = i1 - i0;
        if (B.s0 == 1 && mc % WT_COLS == 0 && mc <= WT_MAX_ROWS)
            gemm_part_wt(K, A, B, C, ldc, i0, i1, j0, j1);
        else
            gemm_part_short(K, A, B, C, ldc, i0, i1, j0, j1);
        return;
    }
    thread_local std::vector<float> abuf, bbuf;
    float* ap = buffer(abuf, (size_t)MC * KC);
    float* bp = pre ? nullptr : buffer(bbuf, (size_t)KC * NC);
    for (int64_t jc = j0; jc < j1; jc += NC) {
        int nc = (int)(j1 - jc < NC ? j1 - jc : NC);
        for (int64_t pc = 0; pc < K; pc += KC) {
            int kc = (int)(K - pc < KC ? K - pc : KC);
            if (pre) bp = const_cast<float*>(pre) + pc * npad + (jc / NR) * kc * NR;   // jc: a multiple of NR
            else pack_b(B, pc, kc, jc, nc, bp);
            for (int64_t ic = i0; ic < i1; ic += MC) {
                int mc = (int)(i1 - ic < MC ? i1 - ic : MC);
                pack_a(A, ic, mc, pc, kc, ap);
                for (int jr = 0; jr < nc; jr += NR) {
                    int nr = nc - jr < NR ? nc - jr : NR;
                    const Cols cols(nr);
                    const float* bs = bp + (int64_t)(jr / NR) * kc * NR;
                    for (int ir = 0; ir < mc; ir += MR) {
                        int mr = mc - ir < MR ? mc - ir : MR;
                        micro(kc, ap + (int64_t)(ir / MR) * kc * MR, bs, C + (ic + ir) * ldc + jc + jr, ldc,
                              mr, cols, pc > 0);
                    }
                }
            }
        }
    }
}

// thread t of n computes its share of C = A @ B: a range of row strips, else (a wide, short
// product) a range of column strips
void thread_share(int t, int n, int64_t M, int64_t N, int64_t K, const Mat& A, const Mat& B, float* C,
                  const float* pre = nullptr, int64_t npad = 0) {
    if (M >= N || N < (int64_t)n * NR) {
        int64_t strips = (M + MR - 1) / MR;
        int64_t lo = strips * t / n * MR, hi = strips * (t + 1) / n * MR;
        if (hi > M) hi = M;
        if (lo < hi) gemm_part(K, A, B, C, N, lo, hi, 0, N, pre, npad);
    } else {
        int64_t strips = (N + NR - 1) / NR;
        int64_t lo = strips * t / n * NR, hi = strips * (t + 1) / n * NR;
        if (hi > N) hi = N;
        if (lo < hi) gemm_part(K, A, B, C, N, 0, M, lo, hi, pre, npad);
    }
}

// Ask for an R x C strided matrix to be brought into L2 ahead of its product, where it is one
// dense span (a matrix or a transposed one, as a batched product's operands are)
void prefetch_span(const Mat& X, int64_t R, int64_t C) {
    int64_t lo = (X.s0 < X.s1 ? X.s0 : X.s1), hi = (X.s0 < X.s1 ? X.s1 : X.s0);
    int64_t n_lo = X.s0 < X.s1 ? R : C, n_hi = X.s0 < X.s1 ? C : R;
    if (lo != 1 || hi != n_lo) return;                 // not dense: leave it to the hardware
    const char* p = (const char*)X.p;
    const int64_t bytes = n_lo * n_hi * 4;
    for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
}

int64_t calls = 0;

}  // namespace

extern "C" int64_t ember_sgemm_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }

// thread parts of products taken by gemm_part_wt (C = A @ W^T computed as C^T = W @ A^T)
extern "C" int64_t ember_sgemm_wt_parts(void) { return __atomic_load_n(&wt_parts, __ATOMIC_RELAXED); }

// the micro-tile's width: pack_b's strips are padded to a multiple of it (gemm.py sizes the
// packed buffer with it) -- 32 with AVX-512, 16 with AVX2
extern "C" int ember_sgemm_nr(void) { return NR; }

// the micro-tile's height (rows of a packed A strip): 12 with AVX-512, 6 with AVX2
extern "C" int ember_sgemm_mr(void) { return MR; }

// the depth of a packed slice of K
extern "C" int ember_sgemm_kc(void) { return KC; }

// the instruction set the library was built for: 512 (AVX-512F) or 256 (AVX2 + FMA)
extern "C" int ember_sgemm_isa(void) {
#if defined(__AVX512F__)
    return 512;
#else
    return 256;
#endif
}

// batch products C[b] = A[b] @ B[b]: A [M,K] at a + b*sab with strides (sa0, sa1), B [K,N] likewise,
// C contiguous [M,N] at c + b*M*N. K == 0 writes zeros.
extern "C" void ember_sgemm(int64_t batch, int64_t M, int64_t N, int64_t K,
                            const float* a, int64_t sab, int64_t sa0, int64_t sa1,
                            const float* b, int64_t sbb, int64_t sb0, int64_t sb1,
                            float* c, int nthreads) {
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (batch <= 0 || M <= 0 || N <= 0) return;
    if (K <= 0) { memset(c, 0, sizeof(float) * batch * M * N); return; }
    int nt = nthreads > 0 ? nthreads : omp_get_max_threads();
    double flops = 2.0 * batch * M * N * K;
    if (flops < PAR_FLOPS || omp_in_parallel()) nt = 1;
    if (nt == 1) {
        for (int64_t q = 0; q < batch; ++q)
            gemm_part(K, Mat{a + q * sab, sa0, sa1}, Mat{b + q * sbb, sb0, sb1}, c + q * M * N, N, 0, M, 0, N);
        return;
    }
    #pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        if (batch >= n) {                               // whole matrices per thread
            // a contiguous run of them: the kernels around a batched product (attention's head
            // split before it, its softmax after it) split their rows over the threads the same
            // way, so a thread's operands and outputs stay in its own core's caches
            const int64_t q0 = batch * t / n, q1 = batch * (t + 1) / n;
            for (int64_t q = q0; q < q1; ++q) {
                if (q + 1 < q1) {
                    prefetch_span(Mat{a + (q + 1) * sab, sa0, sa1}, M, K);
                    prefetch_span(Mat{b + (q + 1) * sbb, sb0, sb1}, K, N);
                }
                gemm_part(K, Mat{a + q * sab, sa0, sa1}, Mat{b + q * sbb, sb0, sb1}, c + q * M * N, N, 0, M, 0, N);
            }
        } else {
            for (int64_t q = 0; q < batch; ++q)          // split each product
                thread_share(t, n, M, N, K, Mat{a + q * sab, sa0, sa1}, Mat{b + q * sbb, sb0, sb1}, c + q * M * N);
        }
    }
}

// B [K,N] (element strides sb0, sb1) packed whole for ember_sgemm_packed: for each KC-deep slice
// (at dst + pc * npad, npad = N rounded up to NR) its NR-wide strips, k-major, zero-padded; the
// layout gemm_part reads. ``dst`` 64-byte aligned, K * npad floats. Packed once, a right operand
// shared by many products (an RNN's recurrent weight, used at every step) is not packed per product.
extern "C" void ember_sgemm_pack_b(int64_t K, int64_t N, const float* b, int64_t sb0, int64_t sb1,
                                   float* dst, int nthreads) {
    if (K <= 0 || N <= 0) return;
    const int64_t npad = (N + NR - 1) / NR * NR, strips = npad / NR;
    int nt = nthreads > 0 ? nthreads : omp_get_max_threads();
    if (K * N < (1 << 16) || omp_in_parallel()) nt = 1;
    Mat B{b, sb0, sb1};
    #pragma omp parallel for num_threads(nt) schedule(static) collapse(2)
    for (int64_t pc = 0; pc < K; pc += KC)
        for (int64_t s = 0; s < strips; ++s) {
            int kc = (int)(K - pc < KC ? K - pc : KC);
            int nc = (int)(N - s * NR < NR ? N - s * NR : NR);
            pack_b(B, pc, kc, s * NR, nc, dst + pc * npad + s * kc * NR);
        }
}

// C [M,N] (contiguous) = A @ B with B packed by ember_sgemm_pack_b; threads split rows, else columns
extern "C" void ember_sgemm_packed(int64_t M, int64_t N, int64_t K, const float* a, int64_t sa0, int64_t sa1,
                                   const float* packed, float* c, int nthreads) {
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { memset(c, 0, sizeof(float) * M * N); return; }
    const int64_t npad = (N + NR - 1) / NR * NR;
    Mat A{a, sa0, sa1}, B{nullptr, 0, 0};
    int nt = nthreads > 0 ? nthreads : omp_get_max_threads();
    if (2.0 * M * N * K < PAR_FLOPS || omp_in_parallel()) nt = 1;
    if (nt == 1) { gemm_part(K, A, B, c, N, 0, M, 0, N, packed, npad); return; }
    #pragma omp parallel num_threads(nt)
    {
        thread_share(omp_get_thread_num(), omp_get_num_threads(), M, N, K, A, B, c, packed, npad);
    }
}

// ---- numpy array objects read here: the inductor wrapper's per-product cost. Passing each
// product's pointers, sizes and strides through ctypes cost ~13 us a call (a.ctypes.data alone
// ~1.5 us, a 14-argument call ~6 us): an LSTM step's 16-MFLOP product is ~110 us. These entries
// take the three arrays as objects (~1.2 us a call) and read them as numpy lays them out.
namespace {
// byte offsets of (data, nd, dimensions, strides) in a numpy array object: PyArrayObject_fields,
// public ABI; set by gemm.py after it checked them on arrays of its own
int64_t NP_OFF[4] = {-1, -1, -1, -1};

struct NpArr {
    const char* data;
    int nd;
    const int64_t* dims;
    const int64_t* strides;       // bytes
};

inline NpArr np_arr(const void* o) {
    const char* p = (const char*)o;
    return NpArr{*(const char* const*)(p + NP_OFF[0]), *(const int*)(p + NP_OFF[1]),
                 *(const int64_t* const*)(p + NP_OFF[2]), *(const int64_t* const*)(p + NP_OFF[3])};
}

// C-contiguous (numpy's rule: the strides of size-1 dims do not matter)
inline bool np_contiguous(const NpArr& c) {
    int64_t want = 4;
    for (int i = c.nd - 1; i >= 0; --i) {
        if (c.dims[i] != 1 && c.strides[i] != want) return false;
        want *= c.dims[i];
    }
    return true;
}
}  // namespace

extern "C" void ember_sgemm_np_layout(int64_t data, int64_t nd, int64_t dims, int64_t strides) {
    NP_OFF[0] = data; NP_OFF[1] = nd; NP_OFF[2] = dims; NP_OFF[3] = strides;
}

// out = a @ b for float32 numpy arrays (the caller checked the dtypes): 2-d, or 3-d with one
// batch size for all three; out C-contiguous. 0 when done; 1 (nothing written) for a product
// this entry does not take -- other ranks or shapes, strides not whole elements, a layout not
// set, fewer than min_macs multiply-adds -- which gemm.matmul's general path then decides.
extern "C" int ember_sgemm_np(const void* ao, const void* bo, void* co, int nthreads, int64_t min_macs) {
    if (NP_OFF[0] < 0) return 1;
    const NpArr a = np_arr(ao), b = np_arr(bo), c = np_arr(co);
    const int nd = a.nd;
    if (b.nd != nd || c.nd != nd || (nd != 2 && nd != 3)) return 1;
    const int64_t batch = nd == 3 ? a.dims[0] : 1;
    if (nd == 3 && (b.dims[0] != batch || c.dims[0] != batch)) return 1;
    const int64_t M = a.dims[nd - 2], K = a.dims[nd - 1], N = b.dims[nd - 1];
    if (b.dims[nd - 2] != K || c.dims[nd - 2] != M || c.dims[nd - 1] != N || !np_contiguous(c)) return 1;
    for (int i = 0; i < nd; ++i)
        if (a.strides[i] % 4 || b.strides[i] % 4) return 1;
    if (batch * M * N * K < min_macs) return 1;
    ember_sgemm(batch, M, N, K, (const float*)a.data, nd == 3 ? a.strides[0] / 4 : 0, a.strides[nd - 2] / 4,
                a.strides[nd - 1] / 4, (const float*)b.data, nd == 3 ? b.strides[0] / 4 : 0, b.strides[nd - 2] / 4,
                b.strides[nd - 1] / 4, (float*)c.data, nthreads);
    return 0;
}

// out = a @ B with B [K, N] packed by ember_sgemm_pack_b into the numpy array po; a 2-d, out
// C-contiguous [M, N]. 0 when done, 1 as ember_sgemm_np.
extern "C" int ember_sgemm_packed_np(const void* ao, const void* po, void* co, int64_t K, int64_t N,
                                     int nthreads, int64_t min_macs) {
    if (NP_OFF[0] < 0) return 1;
    const NpArr a = np_arr(ao), pk = np_arr(po), c = np_arr(co);
    if (a.nd != 2 || c.nd != 2 || a.dims[1] != K || c.dims[0] != a.dims[0] || c.dims[1] != N || !np_contiguous(c))
        return 1;
    if (a.strides[0] % 4 || a.strides[1] % 4) return 1;
    const int64_t M = a.dims[0];
    if (M * N * K < min_macs) return 1;
    ember_sgemm_packed(M, N, K, (const float*)a.data, a.strides[0] / 4, a.strides[1] / 4, (const float*)pk.data,
                       (float*)c.data, nthreads);
    return 0;
}

#endif  // the shared driver
