// Products of a few float32 rows with bfloat16 weights, for the LSTM's one-sentence timesteps:
// y = bf16(bf16(x) @ W) (+ add), the contract of torch's bf16 products (inputs and weights rounded
// to bfloat16 to nearest even, sums in float32, the product rounded to bfloat16), read at the
// memory's rate. torch's one-row bf16 products on a CPU without AMX read the weights slower than
// its float32 ones (docs/speed.md), so a one-sentence timestep in bf16 was slower than in fp32.
//
// W is packed (spacy_elmo/fast/bf16_rows.py::pack): blocks of 64 outputs; in a block, for each pair
// of inputs (2k, 2k+1), the 64 outputs' two weights side by side: one 256-byte line per pair, the
// block's lines one after the other, so the weights stream once per call. With AVX512-BF16 each
// line is four vdpbf16ps (16 outputs, two inputs each); elsewhere a portable loop does the same sums.
#include <cstdint>
#include <cstring>

#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h>
#define SPACY_ELMO_VDPBF16PS 1
#endif

namespace {

constexpr int64_t kBlock = 64;

inline uint16_t to_bf16(float value) {  // round to nearest even, as c10::BFloat16 does
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float from_bf16(uint32_t half) {
  const uint32_t bits = half << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// One block's 64 sums for one row of input pairs.
void block_sums(const uint16_t* __restrict w, const uint32_t* __restrict pairs, int64_t n_pairs, float* __restrict sums) {
#ifdef SPACY_ELMO_VDPBF16PS
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  for (int64_t k = 0; k < n_pairs; ++k) {
    const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(pairs[k]));
    const uint16_t* line = w + k * 2 * kBlock;
    a0 = _mm512_dpbf16_ps(a0, x, (__m512bh)_mm512_loadu_si512(line));
    a1 = _mm512_dpbf16_ps(a1, x, (__m512bh)_mm512_loadu_si512(line + 32));
    a2 = _mm512_dpbf16_ps(a2, x, (__m512bh)_mm512_loadu_si512(line + 64));
    a3 = _mm512_dpbf16_ps(a3, x, (__m512bh)_mm512_loadu_si512(line + 96));
  }
  _mm512_storeu_ps(sums, a0);
  _mm512_storeu_ps(sums + 16, a1);
  _mm512_storeu_ps(sums + 32, a2);
  _mm512_storeu_ps(sums + 48, a3);
#else
  for (int64_t o = 0; o < kBlock; ++o) sums[o] = 0.0f;
  for (int64_t k = 0; k < n_pairs; ++k) {
    const float lo = from_bf16(pairs[k] & 0xffffu), hi = from_bf16(pairs[k] >> 16);
    const uint16_t* line = w + k * 2 * kBlock;
    for (int64_t o = 0; o < kBlock; ++o) sums[o] += lo * from_bf16(line[2 * o]) + hi * from_bf16(line[2 * o + 1]);
  }
#endif
}

}  // namespace

extern "C" int spacy_elmo_bf16_native() {
#ifdef SPACY_ELMO_VDPBF16PS
  return 1;
#else
  return 0;
#endif
}

// A float32 row of ``width`` values as (bf16(x[2k]), bf16(x[2k + 1])) pairs, the last one padded with 0.
extern "C" void spacy_elmo_bf16_pairs(const float* x, int64_t width, uint32_t* pairs) {
  for (int64_t k = 0; 2 * k < width; ++k) {
    const uint32_t lo = to_bf16(x[2 * k]);
    const uint32_t hi = 2 * k + 1 < width ? to_bf16(x[2 * k + 1]) : 0u;
    pairs[k] = lo | (hi << 16);
  }
}

// Blocks [first, last) of one weight matrix for ``rows`` rows of input pairs (row r at
// pairs + r * n_pairs): y[r * y_stride + o] = bf16(sum) + (add ? add[r * add_stride + o] : 0),
// for the outputs o < out_features only (the last block may be padding).
extern "C" void spacy_elmo_bf16_rows(const uint16_t* packed, const uint32_t* pairs, int64_t rows, int64_t n_pairs,
                                     int64_t out_features, int64_t first, int64_t last, float* y, int64_t y_stride,
                                     const float* add, int64_t add_stride) {
  float sums[kBlock];
  for (int64_t b = first; b < last; ++b) {
    const uint16_t* w = packed + b * n_pairs * 2 * kBlock;
    const int64_t begin = b * kBlock;
    const int64_t count = out_features - begin < kBlock ? out_features - begin : kBlock;
    for (int64_t r = 0; r < rows; ++r) {
      block_sums(w, pairs + r * n_pairs, n_pairs, sums);
      float* dest = y + r * y_stride + begin;
      const float* plus = add ? add + r * add_stride + begin : nullptr;
      for (int64_t o = 0; o < count; ++o) {
        const float rounded = from_bf16(to_bf16(sums[o]));
        dest[o] = plus ? rounded + plus[o] : rounded;
      }
    }
  }
}
