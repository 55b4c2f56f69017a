// The elementwise part of an LSTMP timestep over contiguous rows: the math of
// spacy_elmo/bilm/lstm.py::cell_step. exp is written out (Cody-Waite reduction, Cephes' degree-6
// polynomial, within 1-2 ulp) so that the compiler vectorizes the loop without -ffast-math or a
// vector math library; tanh is within about 1 ulp as well (tanh_near_ulp), not 2 * sigmoid(2x) - 1,
// whose absolute error of about 1e-7 near 0 is a large relative one: on random inputs the step's
// hidden state is then as close to float64 as torch's own ops (mean error 1.5e-8, against 2.4e-8
// through sigmoid), so the error this loop adds over a long sentence and a deep stack is no more
// than the reference loop's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

inline float exp_poly(float x) {
  x = std::min(std::max(x, -87.0f), 87.0f);  // 2^n stays a normal float; sigmoid is 0 or 1 beyond
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;  // ln 2 in two parts: the high one exact in float
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + exp_poly(-x)); }

// An odd polynomial near 0 (Cephes' tanhf, |x| < 0.625), 1 - 2 / (exp(2|x|) + 1) elsewhere; both
// computed and one selected, so that the loop stays branch-free and vectorizes.
inline float tanh_near_ulp(float x) {
  const float a = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float large = 1.0f - 2.0f / (exp_poly(2.0f * a) + 1.0f);
  return a < 0.625f ? small : std::copysign(large, x);
}

// One row: gates [i, j, f, o] (4 * dim), its cell (updated) and the hidden state before the projection.
void cell_row(const float* __restrict i_, const float* __restrict j_, const float* __restrict f_,
              const float* __restrict o_, float* __restrict c_, float* __restrict h_, int64_t dim, float limit) {
  for (int64_t k = 0; k < dim; ++k) {
    float c = sigmoid(f_[k]) * c_[k] + sigmoid(i_[k]) * tanh_near_ulp(j_[k]);
    c = std::min(std::max(c, -limit), limit);
    c_[k] = c;
    h_[k] = sigmoid(o_[k]) * tanh_near_ulp(c);
  }
}

}  // namespace

extern "C" void spacy_elmo_cell_rows(
    const float* gates, float* cell, float* hidden, int64_t rows, int64_t dim, float cell_clip, int clip_cell) {
  const float limit = clip_cell ? cell_clip : std::numeric_limits<float>::max();
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gates + r * 4 * dim;
    cell_row(g, g + dim, g + 2 * dim, g + 3 * dim, cell + r * dim, hidden + r * dim, dim, limit);
  }
}

extern "C" void spacy_elmo_clip_rows(float* x, int64_t rows, int64_t width, int64_t row_stride, float limit) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * row_stride;
    for (int64_t k = 0; k < width; ++k) row[k] = std::min(std::max(row[k], -limit), limit);
  }
}

namespace {

// float32 to bfloat16, rounded to nearest even (NaN kept a quiet NaN), as torch rounds
inline uint16_t to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// One row of the training step's forward (spacy_elmo_train_cell_rows says what each array holds).
void train_row(float* __restrict i_, float* __restrict j_, float* __restrict f_, float* __restrict o_,
               float* __restrict c_, float* __restrict raw, float* __restrict tc, float* __restrict h, int64_t dim,
               float limit) {
  for (int64_t k = 0; k < dim; ++k) {
    const float i = sigmoid(i_[k]), j = tanh_near_ulp(j_[k]), f = sigmoid(f_[k]), o = sigmoid(o_[k]);
    i_[k] = i;
    j_[k] = j;
    f_[k] = f;
    o_[k] = o;
    const float c = f * c_[k] + i * j;
    raw[k] = c;
    const float clipped = std::min(std::max(c, -limit), limit);
    c_[k] = clipped;
    const float t = tanh_near_ulp(clipped);
    tc[k] = t;
    h[k] = o * t;
  }
}

void round_row(const float* __restrict x, uint16_t* __restrict y, int64_t dim) {
  for (int64_t k = 0; k < dim; ++k) y[k] = to_bf16(x[k]);
}

inline float from_bf16(uint16_t x) {
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float y;
  std::memcpy(&y, &bits, sizeof y);
  return y;
}

void widen_row(const uint16_t* __restrict x, float* __restrict y, int64_t dim) {
  for (int64_t k = 0; k < dim; ++k) y[k] = from_bf16(x[k]);
}

// y = x + bfloat16 a, a row
void sum_row(const float* __restrict x, const uint16_t* __restrict a, float* __restrict y, int64_t width) {
  for (int64_t k = 0; k < width; ++k) y[k] = x[k] + from_bf16(a[k]);
}

// y += x, a row of floats
void add_row(const float* __restrict x, float* __restrict y, int64_t width) {
  for (int64_t k = 0; k < width; ++k) y[k] += x[k];
}

// y = bfloat16 x + bfloat16 a, a row, summed in float
void sum_row_bf16(const uint16_t* __restrict x, const uint16_t* __restrict a, float* __restrict y, int64_t width) {
  for (int64_t k = 0; k < width; ++k) y[k] = from_bf16(x[k]) + from_bf16(a[k]);
}

// One row of the reduced precisions' inference cells (spacy_elmo_cell_rows_sum): cell_row's math on
// the gates first + product (bfloat16), summed in float and never stored.
void cell_row_sum(const float* __restrict first, const uint16_t* __restrict product, float* __restrict c_,
                  float* __restrict h_, int64_t dim, float limit) {
  for (int64_t k = 0; k < dim; ++k) {
    const float i = first[k] + from_bf16(product[k]), j = first[dim + k] + from_bf16(product[dim + k]);
    const float f = first[2 * dim + k] + from_bf16(product[2 * dim + k]);
    const float o = first[3 * dim + k] + from_bf16(product[3 * dim + k]);
    float c = sigmoid(f) * c_[k] + sigmoid(i) * tanh_near_ulp(j);
    c = std::min(std::max(c, -limit), limit);
    c_[k] = c;
    h_[k] = sigmoid(o) * tanh_near_ulp(c);
  }
}

// One row of its backward (spacy_elmo_train_cell_backward_rows says what each array holds).
void train_backward_row(const float* __restrict i_, const float* __restrict j_, const float* __restrict f_,
                        const float* __restrict o_, const float* __restrict raw, const float* __restrict tc,
                        const float* __restrict prev, const float* __restrict dh, float* __restrict dc,
                        float* __restrict d_i, float* __restrict d_j, float* __restrict d_f, float* __restrict d_o,
                        int64_t dim, float limit, float previous_limit) {
  for (int64_t k = 0; k < dim; ++k) {
    const float i = i_[k], j = j_[k], f = f_[k], o = o_[k], t = tc[k];
    float d = dc[k] + (dh[k] * o) * (1.0f - t * t);
    d = std::fabs(raw[k]) <= limit ? d : 0.0f;
    const float p = std::min(std::max(prev[k], -previous_limit), previous_limit);
    d_i[k] = (d * j) * (i - i * i);
    d_j[k] = (d * i) * (1.0f - j * j);
    d_f[k] = (d * p) * (f - f * f);
    d_o[k] = (dh[k] * t) * (o - o * o);
    dc[k] = d * f;
  }
}

}  // namespace

// The cells of rows of one timestep where the recurrent product ran in bfloat16 (spacy_elmo/fast/
// in_place.py): the gates are first (float, 4 * dim a row) + product (bfloat16), summed in float;
// cell (dim a row) holds the running cell and gets the new one; hidden (float, or bfloat16 where
// hidden_bf16, rounded to nearest even) gets the hidden state before the projection. scratch holds dim floats.
extern "C" void spacy_elmo_cell_rows_sum(const float* first, const uint16_t* product, float* cell, void* hidden,
                                         int hidden_bf16, float* scratch, int64_t rows, int64_t dim, float cell_clip,
                                         int clip_cell) {
  const float limit = clip_cell ? cell_clip : std::numeric_limits<float>::max();
  for (int64_t r = 0; r < rows; ++r) {
    float* h = hidden_bf16 ? scratch : static_cast<float*>(hidden) + r * dim;
    cell_row_sum(first + r * 4 * dim, product + r * 4 * dim, cell + r * dim, h, dim, limit);
    if (hidden_bf16) round_row(scratch, static_cast<uint16_t*>(hidden) + r * dim, dim);
  }
}

// The training step's forward for rows of one timestep (spacy_elmo/fast/train_step.py). gates (4 * dim
// a row) hold the gates before their activations, or where product is given (bfloat16, a product
// run in bfloat16) get first (float, or bfloat16 where first_bf16) + product, summed in float; they end as sigmoid(i), tanh(j), sigmoid(f), sigmoid(o). cell
// holds the running (clipped) cell and gets the new one; cell_raw the new cell before its clip;
// tanh_cell the tanh of the clipped cell; hidden (float, or bfloat16 where hidden_bf16) o * tanh_cell.
// Rows are contiguous, dim apart (4 * dim for gates, first and product); scratch holds dim floats.
extern "C" void spacy_elmo_train_cell_rows(float* gates, const void* first, int first_bf16, const uint16_t* product,
                                           float* cell,
                                           float* cell_raw, float* tanh_cell, void* hidden, int hidden_bf16,
                                           float* scratch, int64_t rows, int64_t dim, float cell_clip, int clip_cell) {
  const float limit = clip_cell ? cell_clip : std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* g = gates + r * 4 * dim;
    if (product != nullptr && first_bf16) {
      sum_row_bf16(static_cast<const uint16_t*>(first) + r * 4 * dim, product + r * 4 * dim, g, 4 * dim);
    } else if (product != nullptr) {
      sum_row(static_cast<const float*>(first) + r * 4 * dim, product + r * 4 * dim, g, 4 * dim);
    } else if (first != nullptr) {  // a float32 product in gates: the input products added to it
      add_row(static_cast<const float*>(first) + r * 4 * dim, g, 4 * dim);
    }
    float* h = hidden_bf16 ? scratch : static_cast<float*>(hidden) + r * dim;
    train_row(g, g + dim, g + 2 * dim, g + 3 * dim, cell + r * dim, cell_raw + r * dim, tanh_cell + r * dim, h, dim,
              limit);
    if (hidden_bf16) round_row(scratch, static_cast<uint16_t*>(hidden) + r * dim, dim);
  }
}

// Its backward for the same rows (train_step.py::_backward_step): from the step's activations, its
// cell before the clip, the tanh of its clipped cell, the cell it started from (clipped here where
// clip_previous: a step's output cell, not the initial state), the gradient of the hidden state
// (float, or bfloat16 where d_hidden_bf16) and of the clipped cell (dc), writes the gradient of the
// gates before their activations (float, or bfloat16 where d_gates_bf16) and turns dc into the
// gradient of the cell the step started from. scratch holds 5 * dim floats.
extern "C" void spacy_elmo_train_cell_backward_rows(const float* acts, const float* cell_raw, const float* tanh_cell,
                                                    const float* previous, int clip_previous, const void* d_hidden,
                                                    int d_hidden_bf16, float* dc, void* d_gates, int d_gates_bf16,
                                                    float* scratch, int64_t rows, int64_t dim, float cell_clip,
                                                    int clip_cell) {
  const float limit = clip_cell ? cell_clip : std::numeric_limits<float>::infinity();
  const float previous_limit = clip_previous ? limit : std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = acts + r * 4 * dim;
    const float* dh = static_cast<const float*>(d_hidden) + r * dim;
    if (d_hidden_bf16) {
      widen_row(static_cast<const uint16_t*>(d_hidden) + r * dim, scratch + 4 * dim, dim);
      dh = scratch + 4 * dim;
    }
    float* dg = d_gates_bf16 ? scratch : static_cast<float*>(d_gates) + r * 4 * dim;
    train_backward_row(a, a + dim, a + 2 * dim, a + 3 * dim, cell_raw + r * dim, tanh_cell + r * dim, previous + r * dim,
                       dh, dc + r * dim, dg, dg + dim, dg + 2 * dim, dg + 3 * dim, dim, limit, previous_limit);
    if (d_gates_bf16) round_row(scratch, static_cast<uint16_t*>(d_gates) + r * 4 * dim, 4 * dim);
  }
}

// Dropout for training (spacy_elmo/fast/dropout.py): element i of a call is kept where a hash of
// (i, seed) falls below ``threshold`` (keep probability times 2^32), and kept values are scaled by
// ``scale`` (1 / keep). The mask is a function of the index and the seed alone: the same for any
// split between threads, for float32 and bfloat16, and again in the backward pass, which calls the
// same rows with the same seed on the gradient instead of storing the mask.
//
// The hash is two rounds of a 32-bit integer finalizer (shifts, xors and multiplies that the
// compiler vectorizes) over the index's two halves and the seed's: consecutive indices give
// unrelated bits, so neighbouring elements are dropped independently.
namespace {

inline uint32_t finalize(uint32_t x) {
  x ^= x >> 16;
  x *= 0x21f0aaadu;
  x ^= x >> 15;
  x *= 0x735a2d97u;
  x ^= x >> 15;
  return x;
}

inline uint32_t bits_of(uint64_t index, uint64_t seed) {
  const uint32_t low = static_cast<uint32_t>(index) + static_cast<uint32_t>(seed);
  const uint32_t high = static_cast<uint32_t>(index >> 32) ^ static_cast<uint32_t>(seed >> 32);
  return finalize(finalize(low) ^ (high * 0x9e3779b9u));
}

}  // namespace

// Elements [first, first + count) of a contiguous float32 (bf16 = 0) or bfloat16 (bf16 = 1) array:
// y[i] = x[i] * scale where bits_of(i, seed) < threshold, else 0. x and y may be the same array.
extern "C" void spacy_elmo_dropout_rows(const void* x, void* y, int bf16, int64_t first, int64_t count,
                                        uint64_t seed, uint32_t threshold, float scale) {
  if (bf16) {
    const uint16_t* in = static_cast<const uint16_t*>(x) + first;
    uint16_t* out = static_cast<uint16_t*>(y) + first;
    for (int64_t k = 0; k < count; ++k) {
      const bool keep = bits_of(static_cast<uint64_t>(first + k), seed) < threshold;
      out[k] = keep ? to_bf16(from_bf16(in[k]) * scale) : static_cast<uint16_t>(0);
    }
  } else {
    const float* in = static_cast<const float*>(x) + first;
    float* out = static_cast<float*>(y) + first;
    for (int64_t k = 0; k < count; ++k) {
      const bool keep = bits_of(static_cast<uint64_t>(first + k), seed) < threshold;
      out[k] = keep ? in[k] * scale : 0.0f;
    }
  }
}
