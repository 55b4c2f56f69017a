// Products of float32 rows with int8 weights, for precision "int8": each row quantized on its own
// (symmetric, 8 bits: q = round(x / s), s = max|x| / 127), each weight row (output) with its own scale,
// sums exact in int32, y = float(sum) * s * w_scale[o] (+ bias[o]) (+ add). The quantization of a row
// depends on that row alone and integer sums do not depend on their order, so a sentence's results do
// not depend on what else is in the batch, nor on how many rows a call takes
// (spacy_elmo/fast/int8_rows.py holds the same math in torch, which the tests hold this to bit for bit).
//
// W is packed (int8_rows.py::pack): blocks of 64 outputs; in a block, for each group of four inputs,
// the 64 outputs' four weights side by side: one 256-byte line per group, the block's lines one after
// the other, so the weights stream once per call. With AVX512-VNNI each line is four vpdpbusd
// (u8 x s8, 16 outputs, four inputs each, int32 sums without saturation), on the row quantized and
// shifted by 128 to unsigned (the shift taken back by ``offsets``: 128 times each output's weight sum);
// elsewhere a portable loop does the same integer sums.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#include <immintrin.h>
#define SPACY_ELMO_VPDPBUSD 1
#endif

namespace {

constexpr int64_t kBlock = 64;
constexpr int kRows = 4;  // rows that share each line of weights once it is loaded

// R rows' 64 sums of one block (rows at q + r * q_stride, unsigned, four bytes per group).
template <int R>
void block_sums(const int8_t* __restrict w, const uint8_t* __restrict q, int64_t q_stride, int64_t n_quads,
                int32_t* __restrict sums) {
#ifdef SPACY_ELMO_VPDPBUSD
  __m512i acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_si512();
  for (int64_t k = 0; k < n_quads; ++k) {
    const int8_t* line = w + k * 4 * kBlock;
    const __m512i w0 = _mm512_loadu_si512(line), w1 = _mm512_loadu_si512(line + 64);
    const __m512i w2 = _mm512_loadu_si512(line + 128), w3 = _mm512_loadu_si512(line + 192);
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, q + r * q_stride + 4 * k, sizeof four);
      const __m512i x = _mm512_set1_epi32(four);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x, w0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x, w1);
      acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], x, w2);
      acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], x, w3);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) _mm512_storeu_si512(sums + r * kBlock + 16 * j, acc[r][j]);
#else
  std::fill(sums, sums + R * kBlock, 0);
  for (int64_t k = 0; k < n_quads; ++k) {
    const int8_t* line = w + k * 4 * kBlock;
    for (int r = 0; r < R; ++r) {
      const uint8_t* x = q + r * q_stride + 4 * k;
      int32_t* s = sums + r * kBlock;
      for (int64_t o = 0; o < kBlock; ++o) {
        const int8_t* wo = line + 4 * o;
        s[o] += x[0] * wo[0] + x[1] * wo[1] + x[2] * wo[2] + x[3] * wo[3];
      }
    }
  }
#endif
}

// For blocks [first, last) of packed weights and every row of q (row r at q + r * q_stride): the
// block's 64 sums of each row, given to ``each(block, row, sums)``; rows share each line of weights
// kRows at a time.
template <typename Each>
void for_block_rows(const int8_t* packed, const uint8_t* q, int64_t q_stride, int64_t rows, int64_t n_quads,
                    int64_t first, int64_t last, Each each) {
  int32_t sums[kRows * kBlock];
  for (int64_t b = first; b < last; ++b) {
    const int8_t* w = packed + b * n_quads * 4 * kBlock;
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t n = std::min<int64_t>(kRows, rows - r0);
      const uint8_t* qr = q + r0 * q_stride;
      switch (n) {
        case 4: block_sums<4>(w, qr, q_stride, n_quads, sums); break;
        case 3: block_sums<3>(w, qr, q_stride, n_quads, sums); break;
        case 2: block_sums<2>(w, qr, q_stride, n_quads, sums); break;
        default: block_sums<1>(w, qr, q_stride, n_quads, sums); break;
      }
      for (int64_t i = 0; i < n; ++i) each(b, r0 + i, sums + i * kBlock);
    }
  }
}

}  // namespace

// cell_math.cpp: the cells of rows of gates [i, j, f, o] (4 * dim each)
extern "C" void spacy_elmo_cell_rows(const float* gates, float* cell, float* hidden, int64_t rows, int64_t dim,
                                     float cell_clip, int clip_cell);

extern "C" int spacy_elmo_int8_native() {
#ifdef SPACY_ELMO_VPDPBUSD
  return 1;
#else
  return 0;
#endif
}

// One float32 row of ``width`` values, quantized: q[i] = round(x[i] / s) + 128 (ties to even, within
// 1..255), zero-padded (128) to ``padded`` values. RETURNS s = max|x| / 127, or 1 for a row of zeros.
extern "C" float spacy_elmo_int8_quantize(const float* x, int64_t width, int64_t padded, uint8_t* q) {
  float amax = 0.0f;
  for (int64_t i = 0; i < width; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax > 0.0f ? amax / 127.0f : 1.0f;
  for (int64_t i = 0; i < width; ++i) {
    const float level = std::nearbyint(x[i] / scale);
    q[i] = static_cast<uint8_t>(static_cast<int32_t>(std::min(127.0f, std::max(-127.0f, level))) + 128);
  }
  for (int64_t i = width; i < padded; ++i) q[i] = 128;
  return scale;
}

// Blocks [first, last) of one weight matrix for ``rows`` quantized rows (row r at q + r * q_stride,
// its scale x_scales[r]): y[r * y_stride + o] = float(sum - offsets[o]) * x_scales[r] * w_scales[o]
// (+ bias[o]) (+ add[r * add_stride + o]), for the outputs o < out_features only.
extern "C" void spacy_elmo_int8_rows(const int8_t* packed, const int32_t* offsets, const float* w_scales,
                                     const float* bias, const uint8_t* q, int64_t q_stride, const float* x_scales,
                                     int64_t rows, int64_t n_quads, int64_t out_features, int64_t first, int64_t last,
                                     float* y, int64_t y_stride, const float* add, int64_t add_stride) {
  for_block_rows(packed, q, q_stride, rows, n_quads, first, last, [&](int64_t b, int64_t r, const int32_t* sums) {
    const int64_t begin = b * kBlock;
    const int64_t count = std::min(kBlock, out_features - begin);
    const float sx = x_scales[r];
    float* dest = y + r * y_stride + begin;
    const float* plus = add ? add + r * add_stride + begin : nullptr;
    for (int64_t o = 0; o < count; ++o) {
      float value = static_cast<float>(sums[o] - offsets[begin + o]) * sx * w_scales[begin + o];
      if (bias) value += bias[begin + o];
      dest[o] = plus ? value + plus[o] : value;
    }
  });
}

// A timestep's recurrent product and its cells at once, for recurrent weights packed with their outputs
// interleaved by unit (int8_rows.py::pack_cells): block b holds the four gates of units [16b, 16b + 16),
// gate g of unit 16b + u at the block's output 16g + u. For each of ``rows`` quantized rows, blocks
// [first, last): the gates as spacy_elmo_int8_rows computes them, z = float(sum - offsets[o]) * x_scale *
// w_scales[o] (+ bias[o]) + add[g * dim + unit] (add: the row's input products, in the gates' own order),
// then the cells of those 16 units with lstm_cells' arithmetic (spacy_elmo_cell_rows): the row's cell
// (at cell + r * cell_stride) updated, its hidden state (at hidden + r * hidden_stride) written. The
// gates are never stored: each block's stay in a 64-float tile.
extern "C" void spacy_elmo_int8_cells(const int8_t* packed, const int32_t* offsets, const float* w_scales,
                                      const float* bias, const uint8_t* q, int64_t q_stride, const float* x_scales,
                                      int64_t rows, int64_t n_quads, int64_t dim, int64_t first, int64_t last,
                                      const float* add, int64_t add_stride, float* cell, int64_t cell_stride,
                                      float* hidden, int64_t hidden_stride, float cell_clip, int clip_cell) {
  constexpr int64_t kUnits = kBlock / 4;
  float gates[kBlock];
  for_block_rows(packed, q, q_stride, rows, n_quads, first, last, [&](int64_t b, int64_t r, const int32_t* sums) {
    const int64_t begin = b * kBlock, unit = b * kUnits;
    const float sx = x_scales[r];
    const float* plus = add + r * add_stride + unit;
    for (int64_t g = 0; g < 4; ++g) {
      for (int64_t u = 0; u < kUnits; ++u) {
        const int64_t o = g * kUnits + u;
        float value = static_cast<float>(sums[o] - offsets[begin + o]) * sx * w_scales[begin + o];
        if (bias) value += bias[begin + o];
        gates[o] = value + plus[g * dim + u];
      }
    }
    spacy_elmo_cell_rows(gates, cell + r * cell_stride + unit, hidden + r * hidden_stride + unit, 1, kUnits, cell_clip,
                         clip_cell);
  });
}
