#pragma once
// Pipeline parallelism: the layers of a model cut into stages along a mesh axis, the batch into
// microbatches, activations passed forward between neighbouring stages and their cotangents back, the
// gradient accumulated over the microbatches, in an order a schedule type fixes at compile time.
//
//   using M = tessel::mesh<tessel::axis<"stage", 4>>;              // or mesh<axis<"data", 2>, axis<"stage", 4>>
//   auto stage = [](auto layers, auto x) { ... };                   // layers: the stage's block [L/V, ...] of params
//   auto loss = [](auto y, auto targets) { return tessel::mean(...); };
//   auto step = tessel::pipeline<M, "stage", tessel::schedules::one_f_one_b, 8>(stage, loss);
//   auto [value, grads] = step(params, x, targets);                 // params: leaves [L, ...]; grads like params
//
// params is a tree whose every leaf is stacked [L, ...] over L layers; virtual stage v (of V = S x R, R the
// schedule's repeats) holds layers [v L/V, (v+1) L/V) and runs on device v mod S of the axis. stage(block,
// x) maps a microbatch's activations to the next stage's, of the same type; the last virtual stage's
// output goes to loss(y, targets), a scalar mean over the microbatch. x and targets are split along their
// first axis over the mesh's other axes (data parallel) and then into M microbatches. The result equals
// accumulate_gradients<M>(full model) (transform/accumulate.hpp) bit for bit: the loss's value and the
// gradient summed over microbatches in order from zero, then scaled by 1/M (with a data axis of D, each
// replica's sum is added in replica order and scaled by 1/(D M)).
//
// Each device is a thread (run/mesh.hpp) that runs its schedule's sequence of steps
// (transform/pipeline_schedule.hpp) as it is: a forward F runs the stage's jitted program and sends its
// output to the next stage; a backward B recomputes the stage's forward from the kept input (GPipe's
// re-materialization: a stage keeps only its inputs) and takes the cotangents, sending the input's back;
// a split backward (zero bubble) leaves the weights' to W. A transfer is a hand-off through memory shared
// by the threads (a device waits for its input, never more than `options::timeout_seconds`), or, where the
// mesh spans processes (one device each, mpirun), a message of the process transport (kernels/
// collective.hpp), after which every process gathers every device's sums and adds them as one would.
// pipeline(first, stage, last) adds parameters outside the stacked layers (an embedding on the first
// stage, an output layer on the last) and inputs every stage reads (a mask): see it below.
//
// Checked at compile time, each as one error naming the numbers: layers that the virtual stages do not
// divide, fewer microbatches than the schedule needs, a batch the replicas x microbatches do not divide,
// a stage whose output is not its input's type, and activations in flight over BudgetBytes (when not 0).
// dump(params, x, targets) gives the schedule as text: per device, the timeline at unit costs, the bubble
// and the bytes kept; run(...) also returns what happened (pipeline_report: every step's times, the
// bubble measured, the bytes each device kept).

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/core/error.hpp"
#include "tessel/core/fingerprint.hpp"
#include "tessel/core/mesh.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/jit.hpp"
#include "tessel/kernels/collective.hpp"
#include "tessel/ops/reductions.hpp"
#include "tessel/run/mesh.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/transform/pipeline_schedule.hpp"

namespace tessel {

// What one call did: each device's steps with their times (steady-clock nanoseconds), and the most bytes
// of activations and cotangents each device kept at once.
struct pipeline_report {
  struct event {
    pipeline_schedule::work kind;
    std::uint16_t stage, microbatch;
    std::int64_t begin_ns, end_ns;
  };
  std::vector<std::vector<event>> devices;  // mesh order; over processes, only this process's device has steps
  std::vector<std::size_t> peak_kept_bytes;  // every device's

  // The idle share of the devices with steps among `first` .. `first + count` (those of one data replica,
  // say; all by default) between the first step any of them began and the last one any ended: what the
  // schedule's bubble predicts.
  double bubble(std::size_t first = 0, std::size_t count = 0) const {
    if (count == 0) count = devices.size() - first;
    std::int64_t begin = INT64_MAX, end = INT64_MIN, busy = 0;
    std::size_t working = 0;
    for (std::size_t d = first; d < first + count; ++d) {
      working += devices[d].empty() ? 0 : 1;
      for (const event& e : devices[d]) begin = std::min(begin, e.begin_ns), end = std::max(end, e.end_ns), busy += e.end_ns - e.begin_ns;
    }
    if (working == 0 || end <= begin) return 0;
    return 1.0 - static_cast<double>(busy) / (static_cast<double>(working) * static_cast<double>(end - begin));
  }
};

namespace pipeline_detail {

template <std::size_t V, class S>
struct block_shape {
  using type = S;
};
template <std::size_t V, std::size_t L, std::size_t... D>
struct block_shape<V, shape<L, D...>> {
  using type = shape<L / V, D...>;
};
// The block a virtual stage holds of a leaf stacked [L, ...]: [L / V, ...].
template <std::size_t V>
struct block_family {
  template <class T, class S>
  using type = tensor<T, typename block_shape<V, S>::type>;
};

// A batch's microbatch: every leaf [B, ...] as [B / Parts, ...] (a tensor, or a std::tuple of them).
template <std::size_t Parts, class X>
struct micro;
template <std::size_t Parts, class T, std::size_t B, std::size_t... D>
struct micro<Parts, tensor<T, shape<B, D...>>> {
  using type = tensor<T, shape<B / Parts, D...>>;
};
template <std::size_t Parts, class... X>
struct micro<Parts, std::tuple<X...>> {
  using type = std::tuple<typename micro<Parts, X>::type...>;
};

template <class Leaf>
constexpr std::size_t leading_of() {
  if constexpr (Leaf::shape_type::rank == 0) return 0;
  else return Leaf::shape_type::dims[0];
}
// Every leaf's leading dimension when they agree (and no leaf is a scalar); 0 otherwise.
template <class P>
consteval std::size_t layers_of() {
  return []<class... Leaf>(std::type_identity<std::tuple<Leaf...>>) {
    constexpr std::array<std::size_t, sizeof...(Leaf)> dims{leading_of<Leaf>()...};
    for (std::size_t d : dims)
      if (d == 0 || d != dims[0]) return std::size_t{0};
    return sizeof...(Leaf) == 0 ? std::size_t{0} : dims[0];
  }(std::type_identity<tree::leaf_types_t<P>>{});
}

// The rows of a batch: the leading dimension of its leaves (a tensor, or a std::tuple of them), when they
// agree; 0 otherwise.
template <class X>
inline constexpr std::size_t batch_rows_v = 0;
template <class T, std::size_t B, std::size_t... D>
inline constexpr std::size_t batch_rows_v<tensor<T, shape<B, D...>>> = B;
template <class X, class... Xs>
inline constexpr std::size_t batch_rows_v<std::tuple<X, Xs...>> =
    ((batch_rows_v<X> == batch_rows_v<Xs>) && ...) ? batch_rows_v<X> : 0;

template <class X>
constexpr std::size_t bytes_of() {
  std::size_t n = 0;
  [&]<class... Leaf>(std::type_identity<std::tuple<Leaf...>>) {
    ((n += Leaf::size * sizeof(typename Leaf::value_type)), ...);
  }(std::type_identity<tree::leaf_types_t<X>>{});
  return n;
}

// The plain form's parts: x is the first stage's input and the loss sees only the last output and targets.
struct pass_input {
  constexpr auto operator()(const auto&, const auto& in) const { return in; }
};
template <class Stage>
struct stage_alone {
  constexpr auto operator()(const auto& p, const auto& a, const auto&) const { return Stage{}(p, a); }
};
template <class Loss>
struct loss_alone {
  constexpr auto operator()(const auto&, const auto& y, const auto&, const auto& t) const { return Loss{}(y, t); }
};

// Copies rows [first, first + rows) of every leaf of `from` to rows [at, at + rows) of the same leaf of `to`
// (leaves in tree order; a leaf's row is its size over its leading dimension).
template <class From, class To>
void copy_rows(const From& from, std::size_t first, To& to, std::size_t at, std::size_t rows) {
  std::vector<std::pair<const std::byte*, std::size_t>> sources;  // data, bytes of one row
  tree::for_each(from, [&](const auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    sources.emplace_back(reinterpret_cast<const std::byte*>(leaf.data()), L::size / L::shape_type::dims[0] * sizeof(typename L::value_type));
  });
  std::size_t i = 0;
  tree::for_each(to, [&](auto& leaf) {
    const auto [data, row] = sources[i++];
    std::memcpy(reinterpret_cast<std::byte*>(leaf.data()) + at * row, data + first * row, rows * row);
  });
}

// A tree's leaves as consecutive bytes, in tree order, and back.
template <class X>
void pack(const X& x, std::byte* out) {
  tree::for_each(x, [&](const auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    std::memcpy(out, leaf.data(), L::size * sizeof(typename L::value_type));
    out += L::size * sizeof(typename L::value_type);
  });
}
template <class X>
void unpack(const std::byte* in, X& x) {
  tree::for_each(x, [&](auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    std::memcpy(leaf.data(), in, L::size * sizeof(typename L::value_type));
    in += L::size * sizeof(typename L::value_type);
  });
}

// acc += g, leaf by leaf (trees of the same leaves), and every leaf of acc times `scale`: each the one
// rounding of its leaf's dtype, as a traced a + b or a * s computes it.
template <class A, class G>
void add_into(A& acc, const G& g) {
  std::vector<const void*> from;
  tree::for_each(g, [&](const auto& leaf) { from.push_back(leaf.data()); });
  std::size_t i = 0;
  tree::for_each(acc, [&](auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    const auto* b = static_cast<const typename L::value_type*>(from[i++]);
    for (std::size_t k = 0; k < L::size; ++k) leaf.data()[k] = leaf.data()[k] + b[k];
  });
}
template <class A>
void scale_by(A& acc, float scale) {
  tree::for_each(acc, [&](auto& leaf) {
    using E = typename std::remove_cvref_t<decltype(leaf)>::value_type;
    for (auto& e : leaf) e = e * static_cast<E>(scale);
  });
}

// The programs of the stages, the same for every schedule, mesh and number of microbatches (so each is
// traced and planned once per block type). <output, dy> is the function whose gradient is a stage's
// pullback of dy; the first virtual stage also runs First, the last one Last, and one stage both.
template <class First, class Stage, class Last>
struct programs {
  struct first_objective {
    constexpr auto operator()(const auto& ob, const auto& in, const auto& dy) const {
      return sum(Stage{}(std::get<1>(ob), First{}(std::get<0>(ob), in), in) * dy);
    }
  };
  struct middle_objective {
    constexpr auto operator()(const auto& p, const auto& a, const auto& in, const auto& dy) const { return sum(Stage{}(p, a, in) * dy); }
  };
  struct last_objective {
    constexpr auto operator()(const auto& ob, const auto& a, const auto& in, const auto& t) const {
      return Last{}(std::get<0>(ob), Stage{}(std::get<1>(ob), a, in), in, t);
    }
  };
  struct only_objective {
    constexpr auto operator()(const auto& ob, const auto& in, const auto& t) const {
      return Last{}(std::get<0>(ob), Stage{}(std::get<1>(ob), First{}(std::get<0>(ob), in), in), in, t);
    }
  };
  struct first_forward {
    constexpr auto operator()(const auto& ob, const auto& in) const { return Stage{}(std::get<1>(ob), First{}(std::get<0>(ob), in), in); }
  };
  struct middle_forward {
    constexpr auto operator()(const auto& p, const auto& a, const auto& in) const { return Stage{}(p, a, in); }
  };
};

}  // namespace pipeline_detail

struct pipeline_options {
  // The longest a device waits for a neighbour's activation or cotangent on this process (between
  // processes, distributed::options::timeout_seconds bounds every wait).
  double timeout_seconds = 120;
};

// Plain: the first stage's input is x and the loss sees (last output, targets); the call takes
// (layers, x, targets) and its gradient is the layers'. Otherwise the call takes (outer, layers, inputs,
// targets) and returns the gradients (outer's, the layers').
template <class M, axis_name Axis, schedules::Schedule Sched, std::size_t Microbatches, std::size_t BudgetBytes, class First, class Stage,
          class Last, bool Plain>
class pipeline_fn {
 public:
  static constexpr int axis_index = M::index_of(Axis);
  static constexpr std::size_t S = axis_index < 0 ? 1 : M::sizes[static_cast<std::size_t>(axis_index)];
  static constexpr std::size_t R = Sched::repeats, V = S * R, D = M::devices / S;
  static constexpr auto table = pipeline_schedule::make<Sched, S, Microbatches>();
  static_assert(table.complete, "tessel::pipeline: the schedule's sequences wait on each other (a bug in pipeline_schedule.hpp)");

  pipeline_options options{};

  // (loss value, gradient): the layers' (plain), or (outer's, the layers').
  template <class... A>
  auto operator()(const A&... args) const {
    if constexpr (sizeof...(A) != (Plain ? 3 : 4)) {
      raise<"tessel::pipeline: called with the wrong number of arguments; fix: pass (layers, x, targets), or, where "
            "the pipeline has first and last parts, (outer, layers, inputs, targets)", A...>();
      return 0;
    } else {
      auto r = run(args...);
      if constexpr (std::is_same_v<decltype(r), int>) return 0;
      else if constexpr (Plain) return std::make_tuple(std::move(r.value), std::move(r.grads));
      else return std::make_tuple(std::move(r.value), std::make_tuple(std::move(r.outer_grads), std::move(r.grads)));
    }
  }

  // The same, with what happened (pipeline_report).
  template <class P, class X, class T>
    requires Plain
  auto run(const P& layers, const X& x, const T& targets) const {
    static const std::tuple<> none{};
    return run_with(none, layers, x, targets);
  }
  template <class O, class P, class X, class T>
    requires(!Plain)
  auto run(const O& outer, const P& layers, const X& inputs, const T& targets) const {
    return run_with(outer, layers, inputs, targets);
  }

  // The schedule this pipeline runs on arguments of these types, as text.
  template <class... A>
  std::string dump(const A&... args) const {
    if constexpr (Plain) return dump_of(std::tuple<>{}, args...);
    else return dump_of(args...);
  }

 private:
  template <class O, class P, class X, class T>
  auto run_with(const O& outer, const P& layers, const X& inputs, const T& targets) const {
    if constexpr (checked<O, P, X, T>()) return job<O, P, X, T>(outer, layers, inputs, targets, options).run();
    else return 0;
  }

  template <class O, class P, class X, class T>
  std::string dump_of(const O&, const P&, const X&, const T&) const {
    if constexpr (!checked<O, P, X, T>()) {
      return {};
    } else {
      using j = types<O, P, X, T>;
      std::string out = "pipeline: schedule " + std::string(Sched::name) + ", " + std::to_string(S) + " stages over axis '" +
                        std::string(Axis.text) + "'";
      if constexpr (R > 1) out += " x " + std::to_string(R) + " repeats (" + std::to_string(V) + " virtual stages)";
      out += ", " + std::to_string(Microbatches) + " microbatches of " + std::to_string(j::act_bytes) + " bytes";
      if constexpr (D > 1) out += ", " + std::to_string(D) + " data replicas";
      out += "\n  timeline at unit costs (F 1, B " + std::to_string(pipeline_schedule::cost_of(pipeline_schedule::work::backward, table.split)) +
             (table.split ? ", W 2" : "") + "; a backward recomputes its stage's forward):\n" + pipeline_schedule::timeline(table);
      out += "  bubble " + std::to_string(table.bubble());
      if constexpr (!Sched::one_forward_one_backward)
        out += " = (S-1)/(R M+S-1) = " + std::to_string(S - 1) + "/" + std::to_string(R * Microbatches + S - 1);
      if constexpr (V > 1)
        out += "\n  transfers: each F of virtual stage v < " + std::to_string(V - 1) + " sends its output (" + std::to_string(j::act_bytes) +
               " bytes) to the device of v+1, each B of v > 0 the input's cotangent back to the device of v-1: " +
               std::to_string(D * (V - 1) * Microbatches) + " each way per call";
      out += "\n  in flight (inputs kept, and split backwards' cotangents), per device:";
      for (std::size_t d = 0; d < S; ++d)
        out += " " + std::to_string(table.peak_on(d)) + " (" + std::to_string(table.peak_on(d, j::in_bytes, j::act_bytes)) + " bytes)";
      return out + "\n";
    }
  }

  // The rules, each one error naming its numbers; true when all hold.
  template <class O, class P, class X, class T>
  static consteval bool checked() {
    constexpr std::size_t layers = pipeline_detail::layers_of<P>();
    constexpr std::size_t rows = pipeline_detail::batch_rows_v<X>;
    if constexpr (axis_index < 0) {
      raise<fit<[] {
        message_builder m;
        m << "tessel::pipeline: the stage axis '" << Axis.text << "' is not an axis of the ";
        return M::append(m) << "; fix: name one of the mesh's axes";
      }>()>();
      return false;
    } else if constexpr (M::process_axes != 0 && M::local_devices != 1) {
      raise<fit<[] {
        message_builder m;
        m << "tessel::pipeline: over processes, each process runs one device (the thread that makes its MPI calls), but the ";
        return M::append(m) << " gives each of its " << M::processes << " processes " << M::local_devices
                            << " devices; fix: put every axis of the mesh over processes, or run it in one process";
      }>()>();
      return false;
    } else if constexpr (layers == 0) {
      raise<fit<[] {
        message_builder m;
        m << "tessel::pipeline: every leaf of the layers' parameters must be stacked over the layers, with one leading "
             "dimension L, but the leaves are ";
        std::size_t i = 0;
        [&]<class... Leaf>(std::type_identity<std::tuple<Leaf...>>) {
          ((m << (i++ ? ", " : ""), append_type<Leaf>(m)), ...);
        }(std::type_identity<tree::leaf_types_t<P>>{});
        return m << "; fix: stack each parameter over the layers ([L, ...])";
      }>()>();
      return false;
    } else if constexpr (layers % V != 0) {
      raise<fit<[] {
        message_builder m;
        m << "tessel::pipeline: " << layers << " layers do not divide into " << S << " stages";
        if (1 < R) m << " x " << R << " repeats = " << V << " virtual stages";
        return m << "; fix: choose a number of stages" << (1 < R ? " x repeats" : "") << " that divides " << layers
                 << ", or pad the model to a multiple of " << V << " layers";
      }>()>();
      return false;
    } else if constexpr (Microbatches == 0 || Microbatches < Sched::min_microbatches_per_stage * S) {
      raise<fit<[] {
        message_builder m;
        return m << "tessel::pipeline: schedule " << Sched::name << " over " << S << " stages needs at least "
                 << std::max<std::size_t>(1, Sched::min_microbatches_per_stage * S) << " microbatches, and has " << Microbatches
                 << "; fix: use at least " << std::max<std::size_t>(1, Sched::min_microbatches_per_stage * S)
                 << " microbatches, or the gpipe schedule";
      }>()>();
      return false;
    } else if constexpr (rows == 0 || pipeline_detail::batch_rows_v<T> == 0) {
      raise<"tessel::pipeline: the inputs and the targets must each be a tensor, or a std::tuple of tensors, with one "
            "leading batch dimension; fix: pass tensors of shape [B, ...]", X>();
      return false;
    } else if constexpr (rows % (D * Microbatches) != 0 || pipeline_detail::batch_rows_v<T> != rows) {
      raise<fit<[] {
        message_builder m;
        m << "tessel::pipeline: the batch of " << rows << " rows (inputs of " << rows << ", targets of "
          << pipeline_detail::batch_rows_v<T> << ") must be the same for both and divide into " << D << " data replicas x "
          << Microbatches << " microbatches = " << D * Microbatches << "; fix: choose a batch that is a multiple of "
          << D * Microbatches << ", or fewer microbatches";
        return m;
      }>()>();
      return false;
    } else {
      using j = types<O, P, X, T>;
      using in = tree::rebind_t<typename j::act, tracer>;
      using out = std::remove_cvref_t<decltype(Stage{}(std::declval<tree::rebind_t<typename j::block, tracer>>(), std::declval<in>(),
                                                       std::declval<tree::rebind_t<typename j::in_t, tracer>>()))>;
      constexpr std::size_t peak = table.peak_in_flight(j::in_bytes, j::act_bytes);
      if constexpr (!std::is_same_v<out, in>) {
        raise<fit<[] {
          message_builder m;
          m << "tessel::pipeline: the stage function maps ";
          append_type<in>(m) << " to ";
          append_type<out>(m) << ", but its output is the next stage's input and must be of the same type; fix: make "
                                 "every stage return its input's dtype and shape (move other layers into the loss)";
          return m;
        }>()>();
        return false;
      } else if constexpr (BudgetBytes != 0 && peak > BudgetBytes) {
        raise<fit<[] {
          message_builder m;
          m << "tessel::pipeline: schedule " << Sched::name << " over " << S << " stages and " << Microbatches
            << " microbatches keeps up to " << table.peak_in_flight() << " activations of ";
          append_type<typename j::act>(m) << " on one device (" << peak << " bytes), over the budget of " << BudgetBytes
                                          << " bytes; fix: use 1f1b (at most " << S
                                          << " in flight), fewer or smaller microbatches, or a larger budget";
          return m;
        }>()>();
        return false;
      } else {
        return true;
      }
    }
  }

  // The types of a call, found by tracing nothing but First (the checks use them before any stage is traced).
  template <class O, class P, class X, class T>
  struct types {
    using block = tree::rebind_t<P, pipeline_detail::block_family<V>::template type>;
    using pair = std::tuple<O, block>;  // what the first and last virtual stages differentiate
    using in_t = typename pipeline_detail::micro<D * Microbatches, X>::type;
    using target = typename pipeline_detail::micro<D * Microbatches, T>::type;
    using act = tree::rebind_t<decltype(First{}(std::declval<tree::rebind_t<O, tracer>>(), std::declval<tree::rebind_t<in_t, tracer>>())), tensor>;
    static constexpr std::size_t act_bytes = pipeline_detail::bytes_of<act>(), in_bytes = pipeline_detail::bytes_of<in_t>();
  };

  // One call: every device's state, the transfers between them, and what happened.
  template <class O, class P, class X, class T>
  struct job : types<O, P, X, T> {
    using typename types<O, P, X, T>::block, typename types<O, P, X, T>::pair, typename types<O, P, X, T>::in_t,
        typename types<O, P, X, T>::target, typename types<O, P, X, T>::act;
    static constexpr std::size_t K = pipeline_detail::layers_of<P>() / V, rows = pipeline_detail::batch_rows_v<X> / (D * Microbatches);

    using first_objective = typename pipeline_detail::programs<First, Stage, Last>::first_objective;
    using middle_objective = typename pipeline_detail::programs<First, Stage, Last>::middle_objective;
    using last_objective = typename pipeline_detail::programs<First, Stage, Last>::last_objective;
    using only_objective = typename pipeline_detail::programs<First, Stage, Last>::only_objective;
    static constexpr auto first_forward = jit(typename pipeline_detail::programs<First, Stage, Last>::first_forward{});
    static constexpr auto middle_forward = jit(typename pipeline_detail::programs<First, Stage, Last>::middle_forward{});

    static constexpr float scale = 1.0f / static_cast<float>(D * Microbatches);
    using value_t = std::remove_cvref_t<decltype(jit(last_objective{})(std::declval<const pair&>(), std::declval<const act&>(),
                                                                       std::declval<const in_t&>(), std::declval<const target&>()))>;
    // Gradients, in the tree types jit returns: a block's, and (outer's, a block's).
    using block_grad = std::remove_cvref_t<decltype(grad<0>(middle_objective{})(
        std::declval<const block&>(), std::declval<const act&>(), std::declval<const in_t&>(), std::declval<const act&>()))>;
    using pair_grad = std::remove_cvref_t<decltype(grad<0>(first_objective{})(std::declval<const pair&>(), std::declval<const in_t&>(),
                                                                              std::declval<const act&>()))>;
    using outer_grad = std::remove_cvref_t<std::tuple_element_t<0, pair_grad>>;

    struct device_state {
      std::vector<block> params;  // its virtual stages' blocks, v = s, s + S, ... (the first's and last's in the pairs)
      std::optional<pair> first, last;
      std::vector<block_grad> grads;  // the blocks' sums over the microbatches, from zero
      outer_grad outer{};             // outer's, from the first and the last stage
      std::vector<std::optional<in_t>> kept_inputs;                   // [microbatch]: the first stage's
      std::vector<std::optional<act>> kept, kept_cotangent;           // [local stage][microbatch]
      value_t loss{};                 // the sum of its microbatches' losses (last stage), from zero
      std::vector<pipeline_report::event> events;
      std::size_t kept_bytes = 0, peak = 0;
    };

    const O& outer;
    const P& params;
    const X& inputs;
    const T& targets;
    pipeline_options options;
    std::vector<device_state> devices{M::devices};
    // Transfers, [replica][boundary v -> v + 1][microbatch]: activations forward, cotangents back.
    std::vector<std::optional<act>> activations{D * (V - 1) * Microbatches}, cotangents{D * (V - 1) * Microbatches};
    std::mutex mutex;
    std::condition_variable arrived;
    std::string failure;

    // What processes compare before their stages exchange anything: the schedule, the mesh, the shapes
    // and the build (kernels::add_build).
    std::uint64_t program = [] {
      fingerprint f;
      f.add(std::string_view("tessel::pipeline"));
      f.add(Sched::name);
      for (const std::uint64_t n : {std::uint64_t{S}, std::uint64_t{R}, std::uint64_t{D}, std::uint64_t{Microbatches}, std::uint64_t{K},
                                    std::uint64_t{rows}, std::uint64_t{job::act_bytes}, std::uint64_t{job::in_bytes}})
        f.add(n);
      kernels::add_build(f);
      return f.value;
    }();

    job(const O& o, const P& p, const X& xs, const T& ts, pipeline_options opt) : outer(o), params(p), inputs(xs), targets(ts), options(opt) {}

    static std::size_t stage_of(std::size_t device) { return M::coordinates(device)[static_cast<std::size_t>(axis_index)]; }
    static std::size_t replica_of(std::size_t device) {
      std::size_t r = 0;
      const auto c = M::coordinates(device);
      for (std::size_t a = 0; a < M::rank; ++a)
        if (static_cast<int>(a) != axis_index) r = r * M::sizes[a] + c[a];
      return r;
    }
    static std::size_t slot(std::size_t replica, std::size_t boundary, std::size_t m) { return (replica * (V - 1) + boundary) * Microbatches + m; }
    static std::int64_t now() {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
    }

    // The device of a replica's stage, and the process that runs it (one device per process over processes).
    static std::size_t device_of(std::size_t replica, std::size_t stage) {
      for (std::size_t d = 0; d < M::devices; ++d)
        if (replica_of(d) == replica && stage_of(d) == stage) return d;
      return 0;
    }
    bool remote(std::size_t device) const { return M::process_axes != 0 && device != kernels::processes().index; }
    std::uint64_t tag(const std::vector<std::optional<act>>& box, std::size_t at) const {
      return (&box == &cotangents ? activations.size() : 0) + at;
    }

    // A transfer to device `to`: into the mailbox on this process, or sent to its process.
    void send(std::vector<std::optional<act>>& box, std::size_t at, std::size_t to, act value) {
      if (remote(to)) {
        std::vector<std::byte> bytes(job::act_bytes);
        pipeline_detail::pack(value, bytes.data());
        kernels::processes().send(program, to, tag(box, at), bytes.data(), job::act_bytes);
        return;
      }
      {
        std::lock_guard lock(mutex);
        box[at].emplace(std::move(value));
      }
      arrived.notify_all();
    }
    std::optional<act> receive(std::vector<std::optional<act>>& box, std::size_t at, std::size_t device, std::size_t from, const char* what) {
      if (remote(from)) {  // the transport waits, with the run's deadline, and ends the run on a failure
        std::vector<std::byte> bytes(job::act_bytes);
        const std::string text = std::string("tessel::pipeline: ") + what + " of microbatch " + std::to_string(at % Microbatches) +
                                 " for device " + std::to_string(device);
        kernels::processes().receive(program, from, tag(box, at), bytes.data(), job::act_bytes, text.c_str());
        act value = tree::build<act>([](auto leaf) { return typename decltype(leaf)::type(uninitialized); });
        pipeline_detail::unpack(bytes.data(), value);
        return value;
      }
      std::unique_lock lock(mutex);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.timeout_seconds);
      if (!arrived.wait_until(lock, deadline, [&] { return box[at].has_value() || !failure.empty(); })) {
        failure = "tessel::pipeline: device " + std::to_string(device) + " waited " + std::to_string(options.timeout_seconds) +
                  " s for " + what + " of microbatch " + std::to_string(at % Microbatches) + " and none came";
        arrived.notify_all();
      }
      if (!failure.empty()) return std::nullopt;
      std::optional<act> v = std::move(box[at]);
      box[at].reset();
      return v;
    }
    template <class A>
    void keep(device_state& st, std::optional<A>& into, A value) {
      into.emplace(std::move(value));
      st.kept_bytes += pipeline_detail::bytes_of<A>();
      st.peak = std::max(st.peak, st.kept_bytes);
    }
    template <class A>
    void let_go(device_state& st, std::optional<A>& v) {
      v.reset();
      st.kept_bytes -= pipeline_detail::bytes_of<A>();
    }
    template <class G>
    void add_pair(device_state& st, std::size_t local, const G& g) {  // (outer's, the block's)
      pipeline_detail::add_into(st.outer, std::get<0>(g));
      pipeline_detail::add_into(st.grads[local], std::get<1>(g));
    }

    void run_device(std::size_t device) {
      device_state& st = devices[device];
      const std::size_t s = stage_of(device), replica = replica_of(device);
      for (std::size_t i = 0; i < table.count[s]; ++i) {
        const pipeline_schedule::step& step = table.steps[s][i];
        const std::size_t v = step.stage, m = step.microbatch, local = v / S, at = local * Microbatches + m;
        const bool first = v == 0, last = v + 1 == V;
        const std::size_t row = (replica * Microbatches + m) * rows;
        const std::size_t next = device_of(replica, (v + 1) % S), previous = device_of(replica, (v + S - 1) % S);
        // What the step waits for from a neighbour, received before its time starts: a wait is idle.
        std::optional<act> received;
        const bool forward_step = step.kind == pipeline_schedule::work::forward;
        if (forward_step ? !first : step.kind == pipeline_schedule::work::backward && !last) {
          received = forward_step ? receive(activations, slot(replica, v - 1, m), device, device_of(replica, (v - 1) % S), "the activation")
                                  : receive(cotangents, slot(replica, v, m), device, device_of(replica, (v + 1) % S), "the cotangent");
          if (!received) return;
        }
        const std::int64_t begin = now();
        auto in_of = [&] {  // this microbatch's inputs, which every stage may read
          in_t in = tree::build<in_t>([](auto leaf) { return typename decltype(leaf)::type(uninitialized); });
          pipeline_detail::copy_rows(inputs, row, in, 0, rows);
          return in;
        };
        auto target_of = [&] {
          target t = tree::build<target>([](auto leaf) { return typename decltype(leaf)::type(uninitialized); });
          pipeline_detail::copy_rows(targets, row, t, 0, rows);
          return t;
        };
        // Which program a step runs is known at compile time where the schedule decides it (split or not,
        // one virtual stage or more, middle stages or none), so only those are traced.
        constexpr bool one = V == 1, middles = V > 2;
        if (step.kind == pipeline_schedule::work::forward) {
          if (first) keep(st, st.kept_inputs[m], in_of());
          else keep(st, st.kept[at], std::move(*received));
          if constexpr (one) {
            pipeline_detail::add_into(st.loss, jit(only_objective{})(*st.last, *st.kept_inputs[m], target_of()));
          } else {
            if (first) send(activations, slot(replica, v, m), next, first_forward(*st.first, *st.kept_inputs[m]));
            else if (last) pipeline_detail::add_into(st.loss, jit(last_objective{})(*st.last, *st.kept[at], in_of(), target_of()));
            else if constexpr (middles) send(activations, slot(replica, v, m), next, middle_forward(st.params[local], *st.kept[at], in_of()));
          }
        } else if (step.kind == pipeline_schedule::work::backward) {
          std::optional<act>& dy = received;
          if constexpr (!table.split) {
            if constexpr (one) {
              add_pair(st, local, grad<0>(only_objective{})(*st.last, *st.kept_inputs[m], target_of()));
            } else if (first) {
              add_pair(st, local, grad<0>(first_objective{})(*st.first, *st.kept_inputs[m], *dy));
            } else if (last) {
              auto [g, da] = grad<0, 1>(last_objective{})(*st.last, *st.kept[at], in_of(), target_of());
              add_pair(st, local, g);
              send(cotangents, slot(replica, v - 1, m), previous, std::move(da));
            } else if constexpr (middles) {
              auto [g, da] = grad<0, 1>(middle_objective{})(st.params[local], *st.kept[at], in_of(), *dy);
              pipeline_detail::add_into(st.grads[local], g);
              send(cotangents, slot(replica, v - 1, m), previous, std::move(da));
            }
            if (first) let_go(st, st.kept_inputs[m]);
            else let_go(st, st.kept[at]);
          } else if constexpr (!one) {  // the input's cotangent only; the weights' wait for W
            if (!first && last) send(cotangents, slot(replica, v - 1, m), previous, grad<1>(last_objective{})(*st.last, *st.kept[at], in_of(), target_of()));
            if constexpr (middles)
              if (!first && !last) send(cotangents, slot(replica, v - 1, m), previous, grad<1>(middle_objective{})(st.params[local], *st.kept[at], in_of(), *dy));
            if (!last) keep(st, st.kept_cotangent[at], std::move(*dy));
          }
        } else if constexpr (table.split) {  // the weights' cotangent of a split backward
          if constexpr (one) {
            add_pair(st, local, grad<0>(only_objective{})(*st.last, *st.kept_inputs[m], target_of()));
          } else {
            if (first) add_pair(st, local, grad<0>(first_objective{})(*st.first, *st.kept_inputs[m], *st.kept_cotangent[at]));
            else if (last) add_pair(st, local, grad<0>(last_objective{})(*st.last, *st.kept[at], in_of(), target_of()));
            else if constexpr (middles)
              pipeline_detail::add_into(st.grads[local], grad<0>(middle_objective{})(st.params[local], *st.kept[at], in_of(), *st.kept_cotangent[at]));
          }
          if (!last) let_go(st, st.kept_cotangent[at]);
          if (first) let_go(st, st.kept_inputs[m]);
          else let_go(st, st.kept[at]);
        }
        st.events.push_back({step.kind, step.stage, step.microbatch, begin, now()});
      }
    }

    // Over processes, each ran its own device: every process gets every device's sums (loss, outer's,
    // its blocks') and kept bytes, so that each adds them up as one process would.
    void gather_from_processes() {
      const kernels::process_transport& t = kernels::processes();
      t.flush();
      constexpr std::size_t share = pipeline_detail::bytes_of<value_t>() + pipeline_detail::bytes_of<outer_grad>() +
                                    R * pipeline_detail::bytes_of<block_grad>() + sizeof(std::uint64_t);
      auto at = [](std::byte* p, std::size_t i) { return p + i * share; };
      std::vector<std::byte> mine(share), all(share * M::devices);
      const std::size_t here = t.index;
      std::byte* w = mine.data();
      pipeline_detail::pack(devices[here].loss, w), w += pipeline_detail::bytes_of<value_t>();
      pipeline_detail::pack(devices[here].outer, w), w += pipeline_detail::bytes_of<outer_grad>();
      for (const block_grad& g : devices[here].grads) pipeline_detail::pack(g, w), w += pipeline_detail::bytes_of<block_grad>();
      const std::uint64_t peak = devices[here].peak;
      std::memcpy(w, &peak, sizeof peak);
      t.all_gather(program, mine.data(), share, all.data());
      for (std::size_t d = 0; d < M::devices; ++d) {
        if (d == here) continue;
        const std::byte* r = at(all.data(), d);
        pipeline_detail::unpack(r, devices[d].loss), r += pipeline_detail::bytes_of<value_t>();
        pipeline_detail::unpack(r, devices[d].outer), r += pipeline_detail::bytes_of<outer_grad>();
        for (block_grad& g : devices[d].grads) pipeline_detail::unpack(r, g), r += pipeline_detail::bytes_of<block_grad>();
        std::uint64_t p = 0;
        std::memcpy(&p, r, sizeof p);
        devices[d].peak = p;
      }
    }

    struct result {
      value_t value;
      outer_grad outer_grads;
      P grads;
      pipeline_report report;
    };

    result run() {
      for (std::size_t d = 0; d < M::devices; ++d) {
        device_state& st = devices[d];
        st.grads.resize(R);  // zeros; filled here or, for another process's device, by gather_from_processes
        if (remote(d)) continue;
        for (std::size_t v = stage_of(d); v < V; v += S) {
          block b(tree::build<block>([](auto leaf) { return typename decltype(leaf)::type(uninitialized); }));
          pipeline_detail::copy_rows(params, v * K, b, 0, K);
          // The first and last virtual stages hold theirs with outer (V = 1: one pair, in `last`).
          if (v + 1 == V) st.last.emplace(outer, std::move(b));
          else if (v == 0) st.first.emplace(outer, std::move(b));
          st.params.push_back(std::move(b));  // moved from (empty) where a pair holds it
        }
        st.kept_inputs.resize(Microbatches);
        st.kept.resize(R * Microbatches);
        st.kept_cotangent.resize(R * Microbatches);
      }
      run::on_devices(M::sizes.data(), M::rank, M::process_axes, program, [](void* self, std::size_t d) { static_cast<job*>(self)->run_device(d); },
                      this);
      if (!failure.empty()) throw std::runtime_error(failure);
      if constexpr (M::process_axes != 0) gather_from_processes();
      // The sums, replica by replica in order (for outer: its first stage's, then its last stage's), scaled once.
      result out{value_t{}, outer_grad{}, P{}, {}};
      for (std::size_t d = 0; d < M::devices; ++d)
        if (stage_of(d) == (V - 1) % S) pipeline_detail::add_into(out.value, devices[d].loss);
      pipeline_detail::scale_by(out.value, scale);
      for (std::size_t d = 0; d < M::devices; ++d)
        if (stage_of(d) == 0 || stage_of(d) == (V - 1) % S) pipeline_detail::add_into(out.outer_grads, devices[d].outer);
      pipeline_detail::scale_by(out.outer_grads, scale);
      for (std::size_t v = 0; v < V; ++v) {
        block_grad sum{};
        for (std::size_t d = 0; d < M::devices; ++d)
          if (stage_of(d) == v % S) pipeline_detail::add_into(sum, devices[d].grads[v / S]);
        pipeline_detail::scale_by(sum, scale);
        pipeline_detail::copy_rows(sum, 0, out.grads, v * K, K);
      }
      for (device_state& st : devices) {
        out.report.devices.push_back(std::move(st.events));
        out.report.peak_kept_bytes.push_back(st.peak);
      }
      return out;
    }
  };
};

// A pipeline over the mesh axis Axis of M with the schedule Sched and Microbatches microbatches; BudgetBytes
// (0: none) bounds the activations a device keeps at once, checked at compile time.
//   pipeline<...>(stage, loss): stage(block, x) -> x, loss(y, targets) -> f32[]; called (layers, x, targets).
//   pipeline<...>(first, stage, last): first(outer, inputs) -> a on the first stage, stage(block, a, inputs)
//   -> a on every stage, last(outer, a, inputs, targets) -> f32[] on the last; called (outer, layers,
//   inputs, targets), inputs a tensor or a std::tuple of them (each stage reads its microbatch's: a
//   transformer's mask), the gradient (outer's, the layers'). outer's is summed from the first stage's and
//   the last's (an embedding tied to the output layer gets both, so it is not bit for bit one device's).
template <class M, axis_name Axis, schedules::Schedule Sched, std::size_t Microbatches, std::size_t BudgetBytes = 0, class Stage, class Loss>
constexpr auto pipeline(Stage, Loss) {
  return pipeline_fn<M, Axis, Sched, Microbatches, BudgetBytes, pipeline_detail::pass_input, pipeline_detail::stage_alone<Stage>,
                     pipeline_detail::loss_alone<Loss>, true>{};
}
template <class M, axis_name Axis, schedules::Schedule Sched, std::size_t Microbatches, std::size_t BudgetBytes = 0, class First, class Stage,
          class Last>
constexpr auto pipeline(First, Stage, Last) {
  return pipeline_fn<M, Axis, Sched, Microbatches, BudgetBytes, First, Stage, Last, false>{};
}

}  // namespace tessel
