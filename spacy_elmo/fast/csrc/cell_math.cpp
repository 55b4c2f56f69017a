// The elementwise part of an LSTMP timestep over contiguous rows: the math of
// spacy_elmo/bilm/lstm.py::cell_step in the fused form of spacy_elmo/fast/in_place.py (tanh(x) = 2 * sigmoid(2x) - 1).
// exp is written out (Cody-Waite reduction, Cephes' degree-6 polynomial, within 1-2 ulp) so
// that the compiler vectorizes the loop without -ffast-math or a vector math library.
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

// One row: gates [i, j, f, o] (4 * dim), its cell (updated) and the hidden state before the projection.
void cell_row(const float* __restrict i_, const float* __restrict j_, const float* __restrict f_,
              const float* __restrict o_, float* __restrict c_, float* __restrict h_, int64_t dim, float limit) {
  for (int64_t k = 0; k < dim; ++k) {
    float c = sigmoid(f_[k]) * c_[k] + sigmoid(i_[k]) * (2.0f * sigmoid(2.0f * j_[k]) - 1.0f);
    c = std::min(std::max(c, -limit), limit);
    c_[k] = c;
    h_[k] = sigmoid(o_[k]) * (2.0f * sigmoid(2.0f * c) - 1.0f);
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
