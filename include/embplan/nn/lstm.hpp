#pragma once
// nn.LSTM (unidirectional, no projection, no dropout), with PyTorch's gate
// order and state names: per layer k, weight_ih_l{k} [4H, in_k],
// weight_hh_l{k} [4H, H], bias_ih_l{k} [4H], bias_hh_l{k} [4H], rows in the
// gate order i, f, g, o:
//   i = s(x W_ii^T + b_ii + h W_hi^T + b_hi)   f = s(...)   g = tanh(...)   o = s(...)
//   c' = f * c + i * g                          h' = o * tanh(c')
// AutoShard's policy (§4.3, App. "Architecture of the policy-value network")
// is a two-layer LSTM with hidden size 64 that reads one table per step.
//
// Two forwards: step() advances a batch by one time step (inference, rollouts),
// forward() runs a whole sequence and records a tape for backpropagation
// through time over every step (backward()).
// A sequence is one matrix [T * batch, features], time-major: row t * batch + b
// is step t of sequence b — the memory layout of PyTorch's [T, batch, features].
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/init.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

struct lstm_layer {
  matrix weight_ih;  // [4H, in]
  matrix weight_hh;  // [4H, H]
  matrix bias_ih;    // [1, 4H]
  matrix bias_hh;    // [1, 4H]
};

// (h, c) of every layer, each [batch, H]: PyTorch's (h_n, c_n) split by layer.
struct lstm_state {
  std::vector<matrix> h;
  std::vector<matrix> c;
};

// Scratch of step(); reused, it allocates nothing once sized.
struct lstm_workspace {
  matrix gates;
  matrix recurrent;
};

// Forward record of one sequence, read by backward().
struct lstm_tape {
  Eigen::Index batch = 0;
  Eigen::Index steps = 0;
  std::vector<matrix> h0, c0;  // initial state per layer [batch, H]
  std::vector<matrix> gates;   // per layer [T*batch, 4H], after the activations (i, f, g, o)
  std::vector<matrix> c, h;    // per layer [T*batch, H]
  matrix recurrent;            // forward scratch [batch, 4H]
  matrix dgates, dseq_a, dseq_b, dh, dc, h_prev;  // backward scratch

  // The top layer's h at every step [T*batch, H] (PyTorch's `output`).
  const matrix& output() const { return h.back(); }

  // (h, c) after the last step (PyTorch's (h_n, c_n)).
  template <class = void>
  lstm_state final_state() const {
    lstm_state s;
    for (std::size_t k = 0; k < h.size(); ++k) {
      if (steps == 0) {
        s.h.push_back(h0[k]);
        s.c.push_back(c0[k]);
      } else {
        s.h.push_back(h[k].bottomRows(batch));
        s.c.push_back(c[k].bottomRows(batch));
      }
    }
    return s;
  }
};

namespace detail {

// gates: [batch, 4H] pre-activations in, activations (i, f, g, o) out;
// then c = f * c_prev + i * g and h = o * tanh(c). c may alias c_prev.
template <class = void>
void lstm_cell(Eigen::Ref<matrix> gates, const Eigen::Ref<const matrix>& c_prev,
               Eigen::Ref<matrix> c, Eigen::Ref<matrix> h) {
  const Eigen::Index hidden = c.cols();
  auto if_gates = gates.leftCols(2 * hidden).array();
  if_gates = ((-if_gates).exp() + 1.0f).inverse();
  auto g = gates.middleCols(2 * hidden, hidden).array();
  g = g.tanh();
  auto o = gates.rightCols(hidden).array();
  o = ((-o).exp() + 1.0f).inverse();
  c.array() = gates.middleCols(hidden, hidden).array() * c_prev.array() +
              gates.leftCols(hidden).array() * g;
  h.array() = o * c.array().tanh();
}

}  // namespace detail

struct lstm {
  std::vector<lstm_layer> layers;

  lstm() = default;

  // All zeros.
  lstm(Eigen::Index input_size, Eigen::Index hidden_size, Eigen::Index num_layers) {
    embplan::nn::detail::require_positive(input_size, "lstm.input_size");
    embplan::nn::detail::require_positive(hidden_size, "lstm.hidden_size");
    embplan::nn::detail::require_positive(num_layers, "lstm.num_layers");
    for (Eigen::Index k = 0; k < num_layers; ++k) {
      const Eigen::Index in = k == 0 ? input_size : hidden_size;
      layers.push_back({.weight_ih = matrix::Zero(4 * hidden_size, in),
                        .weight_hh = matrix::Zero(4 * hidden_size, hidden_size),
                        .bias_ih = matrix::Zero(1, 4 * hidden_size),
                        .bias_hh = matrix::Zero(1, 4 * hidden_size)});
    }
  }

  // PyTorch's default init: every parameter, in state_dict order, from
  // U(-1/sqrt(H), 1/sqrt(H)).
  lstm(Eigen::Index input_size, Eigen::Index hidden_size, Eigen::Index num_layers, rng& gen)
      : lstm(input_size, hidden_size, num_layers) {
    const double bound = default_init_bound(hidden_size);
    for (auto& [name, p] : named_parameters())
      init_uniform(*p, bound, gen);
  }

  Eigen::Index input_size() const noexcept {
    return layers.empty() ? 0 : layers[0].weight_ih.cols();
  }
  Eigen::Index hidden_size() const noexcept {
    return layers.empty() ? 0 : layers[0].weight_hh.cols();
  }
  Eigen::Index num_layers() const noexcept { return static_cast<Eigen::Index>(layers.size()); }

  // Zero (h, c) for a batch: PyTorch's default initial state.
  lstm_state initial_state(Eigen::Index batch) const {
    embplan::nn::detail::require_positive(batch, "lstm.batch");
    lstm_state s;
    for (std::size_t k = 0; k < layers.size(); ++k) {
      s.h.push_back(matrix::Zero(batch, hidden_size()));
      s.c.push_back(matrix::Zero(batch, hidden_size()));
    }
    return s;
  }

  // One time step: x [batch, input_size]; state advances in place and the top
  // layer's output is state.h.back().
  template <class = void>
  void step(const Eigen::Ref<const matrix>& x, lstm_state& state, lstm_workspace& ws) const {
    require_layers();
    embplan::nn::detail::require_cols(x, input_size(), "lstm.input", "input_size");
    require_state(state, x.rows(), "lstm.state");
    for (std::size_t k = 0; k < layers.size(); ++k) {
      const auto& l = layers[k];
      // Layer k's input is layer k-1's new h.
      if (k == 0) {
        ws.gates.noalias() = x * l.weight_ih.transpose();
      } else {
        ws.gates.noalias() = state.h[k - 1] * l.weight_ih.transpose();
      }
      ws.gates.rowwise() += l.bias_ih.row(0);
      ws.recurrent.noalias() = state.h[k] * l.weight_hh.transpose();
      ws.recurrent.rowwise() += l.bias_hh.row(0);
      ws.gates += ws.recurrent;
      detail::lstm_cell(ws.gates, state.c[k], state.c[k], state.h[k]);
    }
  }

  // A sequence x [T * batch, input_size] from `initial` (zeros when null); the
  // outputs are tape.output() and tape.final_state().
  template <class = void>
  void forward(const Eigen::Ref<const matrix>& x, Eigen::Index batch, const lstm_state* initial,
               lstm_tape& tape) const {
    require_layers();
    embplan::nn::detail::require_positive(batch, "lstm.batch");
    embplan::nn::detail::require_cols(x, input_size(), "lstm.input", "input_size");
    if (x.rows() % batch != 0) {
      embplan::detail::fail("lstm.input.rows", x.rows(),
                            "a multiple of the batch size " + std::to_string(batch) +
                                " (time-major [T * batch, input_size])");
    }
    if (initial != nullptr) require_state(*initial, batch, "lstm.initial_state");
    const Eigen::Index hidden = hidden_size();
    const std::size_t n = layers.size();
    tape.batch = batch;
    tape.steps = x.rows() / batch;
    tape.h0.resize(n);
    tape.c0.resize(n);
    tape.gates.resize(n);
    tape.c.resize(n);
    tape.h.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      const auto& l = layers[k];
      if (initial != nullptr) {
        tape.h0[k] = initial->h[k];
        tape.c0[k] = initial->c[k];
      } else {
        tape.h0[k].setZero(batch, hidden);
        tape.c0[k].setZero(batch, hidden);
      }
      // The input projection of all steps at once, as PyTorch's CPU LSTM does.
      auto& gates = tape.gates[k];
      if (k == 0) {
        gates.noalias() = x * l.weight_ih.transpose();
      } else {
        gates.noalias() = tape.h[k - 1] * l.weight_ih.transpose();
      }
      gates.rowwise() += l.bias_ih.row(0);
      tape.c[k].resize(x.rows(), hidden);
      tape.h[k].resize(x.rows(), hidden);
      for (Eigen::Index t = 0; t < tape.steps; ++t) {
        const Eigen::Index r = t * batch;
        if (t == 0) {
          tape.recurrent.noalias() = tape.h0[k] * l.weight_hh.transpose();
        } else {
          tape.recurrent.noalias() =
              tape.h[k].middleRows(r - batch, batch) * l.weight_hh.transpose();
        }
        tape.recurrent.rowwise() += l.bias_hh.row(0);
        gates.middleRows(r, batch) += tape.recurrent;
        if (t == 0) {
          detail::lstm_cell(gates.middleRows(r, batch), tape.c0[k], tape.c[k].middleRows(r, batch),
                            tape.h[k].middleRows(r, batch));
        } else {
          detail::lstm_cell(gates.middleRows(r, batch), tape.c[k].middleRows(r - batch, batch),
                            tape.c[k].middleRows(r, batch), tape.h[k].middleRows(r, batch));
        }
      }
    }
  }

  // Backpropagation through time over the whole sequence recorded in tape.
  // x: the forward input; dy [T * batch, H]: dL/d output; dfinal: dL/d (h_n,
  // c_n) or null (zero). Accumulates parameter gradients into grad; writes dL/dx
  // into *dx and dL/d initial state into *dinitial when given.
  template <class = void>
  void backward(const Eigen::Ref<const matrix>& x, lstm_tape& tape,
                const Eigen::Ref<const matrix>& dy, const lstm_state* dfinal, lstm& grad,
                matrix* dx, lstm_state* dinitial) const {
    require_layers();
    const std::size_t n = layers.size();
    if (tape.gates.size() != n || grad.layers.size() != n || tape.steps * tape.batch != x.rows()) {
      embplan::detail::fail("lstm.backward.tape", tape.gates.size(),
                            "a tape filled by forward on this lstm and this input, with a "
                            "gradient of the lstm's shape");
    }
    for (std::size_t k = 0; k < n; ++k) {
      const auto& mine = layers[k];
      const auto& theirs = grad.layers[k];
      const std::string field = embplan::detail::path("lstm.grad.layers", k);
      embplan::nn::detail::require_shape(theirs.weight_ih, mine.weight_ih.rows(),
                                         mine.weight_ih.cols(), field + ".weight_ih",
                                         "the lstm's shape");
      embplan::nn::detail::require_shape(theirs.weight_hh, mine.weight_hh.rows(),
                                         mine.weight_hh.cols(), field + ".weight_hh",
                                         "the lstm's shape");
      embplan::nn::detail::require_shape(theirs.bias_ih, 1, mine.bias_ih.cols(), field + ".bias_ih",
                                         "the lstm's shape");
      embplan::nn::detail::require_shape(theirs.bias_hh, 1, mine.bias_hh.cols(), field + ".bias_hh",
                                         "the lstm's shape");
    }
    const Eigen::Index hidden = hidden_size();
    const Eigen::Index batch = tape.batch;
    const Eigen::Index steps = tape.steps;
    embplan::nn::detail::require_shape(dy, x.rows(), hidden, "lstm.output_grad",
                                       "[T * batch, hidden_size]");
    if (dfinal != nullptr) require_state(*dfinal, batch, "lstm.final_state_grad");
    if (dinitial != nullptr) {
      dinitial->h.resize(n);
      dinitial->c.resize(n);
    }
    // dseq: dL/d (this layer's h sequence); starts as dy, then layer k's dx.
    matrix* dseq = &tape.dseq_a;
    matrix* dseq_below = &tape.dseq_b;
    *dseq = dy;
    for (std::size_t k = n; k-- > 0;) {
      const auto& l = layers[k];
      auto& g = grad.layers[k];
      const auto& gates = tape.gates[k];
      const auto& c = tape.c[k];
      const auto& h = tape.h[k];
      if (dfinal != nullptr) {
        tape.dh = dfinal->h[k];
        tape.dc = dfinal->c[k];
      } else {
        tape.dh.setZero(batch, hidden);
        tape.dc.setZero(batch, hidden);
      }
      tape.dgates.resize(x.rows(), 4 * hidden);
      for (Eigen::Index t = steps; t-- > 0;) {
        const Eigen::Index r = t * batch;
        tape.dh += dseq->middleRows(r, batch);
        const auto i = gates.middleRows(r, batch).leftCols(hidden).array();
        const auto f = gates.middleRows(r, batch).middleCols(hidden, hidden).array();
        const auto gg = gates.middleRows(r, batch).middleCols(2 * hidden, hidden).array();
        const auto o = gates.middleRows(r, batch).rightCols(hidden).array();
        const auto tanh_c = c.middleRows(r, batch).array().tanh().eval();
        const Eigen::Map<const matrix> c_prev_m(
            t == 0 ? tape.c0[k].data() : c.row(r - batch).data(), batch, hidden);
        const auto c_prev = c_prev_m.array();
        auto dg = tape.dgates.middleRows(r, batch);
        tape.dc.array() += tape.dh.array() * o * (1.0f - tanh_c.square());
        dg.leftCols(hidden).array() = tape.dc.array() * gg * i * (1.0f - i);
        dg.middleCols(hidden, hidden).array() = tape.dc.array() * c_prev * f * (1.0f - f);
        dg.middleCols(2 * hidden, hidden).array() = tape.dc.array() * i * (1.0f - gg.square());
        dg.rightCols(hidden).array() = tape.dh.array() * tanh_c * o * (1.0f - o);
        tape.dc.array() *= f;
        tape.dh.noalias() = dg * l.weight_hh;
      }
      // dW_hh = sum_t dgates_t^T h_{t-1}: one product with the shifted h sequence.
      tape.h_prev.resize(x.rows(), hidden);
      if (steps > 0) {
        tape.h_prev.topRows(batch) = tape.h0[k];
        tape.h_prev.bottomRows(x.rows() - batch) = h.topRows(x.rows() - batch);
      }
      g.weight_hh.noalias() += tape.dgates.transpose() * tape.h_prev;
      if (k == 0) {
        g.weight_ih.noalias() += tape.dgates.transpose() * x;
      } else {
        g.weight_ih.noalias() += tape.dgates.transpose() * tape.h[k - 1];
      }
      g.bias_ih.row(0) += tape.dgates.colwise().sum();
      g.bias_hh.row(0) += tape.dgates.colwise().sum();
      if (dinitial != nullptr) {
        dinitial->h[k] = tape.dh;
        dinitial->c[k] = tape.dc;
      }
      if (k > 0) {
        dseq_below->noalias() = tape.dgates * l.weight_ih;
        std::swap(dseq, dseq_below);
      } else if (dx != nullptr) {
        dx->noalias() = tape.dgates * l.weight_ih;
      }
    }
  }

  parameter_list named_parameters(std::string_view prefix = {}) {
    return collect<parameter_list>(*this, prefix);
  }
  const_parameter_list named_parameters(std::string_view prefix = {}) const {
    return collect<const_parameter_list>(*this, prefix);
  }

 private:
  // State_dict names and order of torch.nn.LSTM, for the const and non-const lists.
  template <class List, class Self>
  static List collect(Self& self, std::string_view prefix) {
    List out;
    for (std::size_t k = 0; k < self.layers.size(); ++k) {
      const std::string s = std::to_string(k);
      auto& l = self.layers[k];
      out.emplace_back(embplan::detail::path(prefix, "weight_ih_l" + s), &l.weight_ih);
      out.emplace_back(embplan::detail::path(prefix, "weight_hh_l" + s), &l.weight_hh);
      out.emplace_back(embplan::detail::path(prefix, "bias_ih_l" + s), &l.bias_ih);
      out.emplace_back(embplan::detail::path(prefix, "bias_hh_l" + s), &l.bias_hh);
    }
    return out;
  }

  void require_layers() const {
    if (layers.empty()) embplan::detail::fail("lstm.layers", 0, "at least one layer");
  }

  void require_state(const lstm_state& s, Eigen::Index batch, std::string_view field) const {
    const auto n = layers.size();
    if (s.h.size() != n || s.c.size() != n) {
      embplan::detail::fail(embplan::detail::path(field, "layers"), s.h.size(),
                            std::to_string(n) + " layers of (h, c)");
    }
    for (std::size_t k = 0; k < n; ++k) {
      embplan::nn::detail::require_shape(
          s.h[k], batch, hidden_size(), embplan::detail::path(embplan::detail::path(field, "h"), k),
          "[batch, hidden_size]");
      embplan::nn::detail::require_shape(
          s.c[k], batch, hidden_size(), embplan::detail::path(embplan::detail::path(field, "c"), k),
          "[batch, hidden_size]");
    }
  }
};
static_assert(model<lstm>);

}  // namespace embplan::inline EMBPLAN_ABI::nn
