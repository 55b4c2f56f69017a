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

}  // namespace

// The training step's forward for rows of one timestep (spacy_elmo/fast/train_step.py), in place:
// gates (4 * dim a row, before their activations) become sigmoid(i), tanh(j), sigmoid(f), sigmoid(o);
// cell holds the running (clipped) cell and gets the new one; cell_raw the new cell before its clip;
// tanh_cell the tanh of the clipped cell; hidden (float, or bfloat16 where hidden_bf16) o * tanh_cell.
// Rows are contiguous, dim apart (4 * dim for gates).
extern "C" void spacy_elmo_train_cell_rows(float* gates, float* cell, float* cell_raw, float* tanh_cell, void* hidden,
                                           int hidden_bf16, int64_t rows, int64_t dim, float cell_clip, int clip_cell) {
  const float limit = clip_cell ? cell_clip : std::numeric_limits<float>::max();
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict i_ = gates + r * 4 * dim;
    float* __restrict j_ = i_ + dim;
    float* __restrict f_ = j_ + dim;
    float* __restrict o_ = f_ + dim;
    float* __restrict c_ = cell + r * dim;
    float* __restrict raw = cell_raw + r * dim;
    float* __restrict tc = tanh_cell + r * dim;
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
      tc[k] = tanh_near_ulp(clipped);
    }
    if (hidden_bf16) {
      uint16_t* __restrict h = static_cast<uint16_t*>(hidden) + r * dim;
      for (int64_t k = 0; k < dim; ++k) h[k] = to_bf16(o_[k] * tc[k]);
    } else {
      float* __restrict h = static_cast<float*>(hidden) + r * dim;
      for (int64_t k = 0; k < dim; ++k) h[k] = o_[k] * tc[k];
    }
  }
}

// Its backward for the same rows (train_step.py::_backward_step): from the step's activations, its
// cell before the clip, the tanh of its clipped cell, the cell it started from (clipped here where
// clip_previous: a step's output cell, not the initial state), the gradient of the hidden state and
// of the clipped cell (dc), writes the gradient of the gates before their activations and turns dc
// into the gradient of the cell the step started from.
extern "C" void spacy_elmo_train_cell_backward_rows(const float* acts, const float* cell_raw, const float* tanh_cell,
                                                    const float* previous, int clip_previous, const float* d_hidden,
                                                    float* dc, float* d_gates, int64_t rows, int64_t dim,
                                                    float cell_clip, int clip_cell) {
  const float limit = clip_cell ? cell_clip : std::numeric_limits<float>::max();
  const float previous_limit = clip_previous ? limit : std::numeric_limits<float>::max();
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict a = acts + r * 4 * dim;
    const float* __restrict raw = cell_raw + r * dim;
    const float* __restrict tc = tanh_cell + r * dim;
    const float* __restrict prev = previous + r * dim;
    const float* __restrict dh = d_hidden + r * dim;
    float* __restrict dc_ = dc + r * dim;
    float* __restrict dg = d_gates + r * 4 * dim;
    for (int64_t k = 0; k < dim; ++k) {
      const float i = a[k], j = a[dim + k], f = a[2 * dim + k], o = a[3 * dim + k];
      const float t = tc[k];
      float d = dc_[k] + (dh[k] * o) * (1.0f - t * t);
      d = (!clip_cell || std::fabs(raw[k]) <= limit) ? d : 0.0f;
      const float p = std::min(std::max(prev[k], -previous_limit), previous_limit);
      dg[k] = (d * j) * (i - i * i);
      dg[dim + k] = (d * i) * (1.0f - j * j);
      dg[2 * dim + k] = (d * p) * (f - f * f);
      dg[3 * dim + k] = (dh[k] * t) * (o - o * o);
      dc_[k] = d * f;
    }
  }
}
