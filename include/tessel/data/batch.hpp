#pragma once
// batch<B>: B consecutive elements stacked into tensors of static shape [B, ...].
//
//   auto s = td::from_indices(10) | td::map([](std::size_t i) { return float(i); }) | td::batch<4>();
//   s.next()->data   // f32[4]{0, 1, 2, 3};  then {4..7};  then {8, 9, 0, 0} with mask {1, 1, 0, 0}, count 2
//   s.next()         // nullopt: the end of epoch 0; the next call starts epoch 1
//
// Stackable elements (batch_traits): a dtype scalar T -> tensor<T, shape<B>>; tensor<T, shape<D...>> ->
// tensor<T, shape<B, D...>>; labeled<T, S> -> labeled_batch<T, S, B>; std::pair / std::tuple of
// stackable elements -> a pair / tuple of their batches. Specialise tessel::data::batch_traits<E> for
// another element type (see the specialisations below for what it provides).

#include <algorithm>
#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessel/core/dtype.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/data/dataset.hpp"
#include "tessel/data/source.hpp"

namespace tessel::data {

// What batch and bucket_by_length do with the last, incomplete batch of an epoch.
enum class remainder {
  pad,   // deliver it padded with zeros; its mask marks the real rows
  drop,  // drop it: every batch is full, and up to B - 1 elements an epoch are not seen
};
inline constexpr remainder pad_remainder = remainder::pad;
inline constexpr remainder drop_remainder = remainder::drop;

// ---- stacking ----------------------------------------------------------------------------------

// For an element type E: `template <std::size_t B> using type = ...;` (the stacked batch of B, default
// constructible and zero-filled) and `template <std::size_t B> static void put(type<B>&, std::size_t row,
// const E&)`, which writes one element into row `row`.
template <class E>
struct batch_traits;

template <class E>
concept Batchable = requires { sizeof(typename batch_traits<E>::template type<1>); };  // g++ 12 rejects a type-requirement here

template <std::size_t B, class S>
struct prepend_dim;
template <std::size_t B, std::size_t... D>
struct prepend_dim<B, shape<D...>> {
  using type = shape<B, D...>;
};
// shape<B, D...> for S = shape<D...>.
template <std::size_t B, class S>
using prepend_dim_t = typename prepend_dim<B, S>::type;

template <class T>
  requires DType<T>
struct batch_traits<T> {
  template <std::size_t B>
  using type = tensor<T, shape<B>>;
  template <std::size_t B>
  static void put(type<B>& out, std::size_t row, const T& x) {
    out[row] = x;
  }
};

template <class T, class S>
struct batch_traits<tensor<T, S>> {
  template <std::size_t B>
  using type = tensor<T, prepend_dim_t<B, S>>;
  template <std::size_t B>
  static void put(type<B>& out, std::size_t row, const tensor<T, S>& x) {
    std::copy_n(x.data(), S::size, out.data() + row * S::size);
  }
};

// The batch of labeled<T, S>: features [B, dims of S...] and labels [B].
template <class T, class S, std::size_t B>
struct labeled_batch {
  tensor<T, prepend_dim_t<B, S>> features;
  tensor<int32, shape<B>> labels;
};

template <class T, class S>
struct batch_traits<labeled<T, S>> {
  template <std::size_t B>
  using type = labeled_batch<T, S, B>;
  template <std::size_t B>
  static void put(type<B>& out, std::size_t row, const labeled<T, S>& x) {
    batch_traits<tensor<T, S>>::template put<B>(out.features, row, x.features);
    out.labels[row] = x.label;
  }
};

template <Batchable... E>
struct batch_traits<std::tuple<E...>> {
  template <std::size_t B>
  using type = std::tuple<typename batch_traits<E>::template type<B>...>;
  template <std::size_t B>
  static void put(type<B>& out, std::size_t row, const std::tuple<E...>& x) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (batch_traits<E>::template put<B>(std::get<I>(out), row, std::get<I>(x)), ...);
    }(std::index_sequence_for<E...>{});
  }
};

template <Batchable A, Batchable C>
struct batch_traits<std::pair<A, C>> {
  template <std::size_t B>
  using type = std::pair<typename batch_traits<A>::template type<B>, typename batch_traits<C>::template type<B>>;
  template <std::size_t B>
  static void put(type<B>& out, std::size_t row, const std::pair<A, C>& x) {
    batch_traits<A>::template put<B>(out.first, row, x.first);
    batch_traits<C>::template put<B>(out.second, row, x.second);
  }
};

// B elements of type E, stacked. Rows at and after `count` are zeros and masked out (only the last
// batch of an epoch under remainder::pad has count < B). mask.astype<float>() weights a loss.
template <class E, std::size_t B>
struct batched {
  static constexpr std::size_t batch_size = B;
  typename batch_traits<E>::template type<B> data;
  tensor<bool, shape<B>> mask;
  std::size_t count = 0;
};

// ---- the stage -----------------------------------------------------------------------------------

template <std::size_t B, Stream Up>
class batch_stream {
 public:
  using element_type = typename Up::value_type;
  using value_type = batched<element_type, B>;

  batch_stream(Up up, remainder rem) : up_(std::move(up)), rem_(rem) {}

  // The next batch of this epoch, or nullopt at its end (then the next call starts the next epoch).
  // An exception from upstream propagates; the elements already taken for this batch are lost (restore
  // a saved position to retry exactly).
  std::optional<value_type> next() {
    if (end_pending_) {
      end_pending_ = false;
      return std::nullopt;
    }
    std::optional<value_type> out(std::in_place);
    std::size_t k = 0;
    while (k < B) {
      stream_position before;
      if (rem_ == remainder::pad && k > 0) before = up_.position();
      std::optional<element_type> x = up_.next();
      if (!x) {
        if (k == 0 || rem_ == remainder::drop) return std::nullopt;
        // Deliver the partial batch now and the end of the epoch on the next call; until then the
        // position is the one just before the end, so that a restore sees the end as well.
        end_pending_ = true;
        end_position_ = std::move(before);
        break;
      }
      batch_traits<element_type>::template put<B>(out->data, k, *x);
      out->mask[k] = true;
      ++k;
    }
    out->count = k;
    return out;
  }

  stream_position position() const { return end_pending_ ? end_position_ : up_.position(); }

  void restore(const stream_position& p) {
    end_pending_ = false;
    up_.restore(p);
  }

 private:
  Up up_;
  remainder rem_;
  bool end_pending_ = false;
  stream_position end_position_;
};

template <std::size_t B>
struct batch_adaptor {
  using pipeline_adaptor = void;
  remainder rem;
  template <class Up>
  auto operator()(Up up) && {
    using S = stream_of_t<Up>;
    static_assert(Batchable<typename S::value_type>,
                  "tessel::data::batch: cannot stack this element type; stackable are dtype scalars, tessel::tensor, "
                  "labeled<T, S>, and std::pair / std::tuple of them; fix: map the elements to one of these, or "
                  "specialise tessel::data::batch_traits<E>");
    return batch_stream<B, S>(iterate(std::move(up)), rem);
  }
};

// batch<B>(remainder): a stream of batched<E, B>, B >= 1 (a compile error otherwise). A dataset upstream
// becomes a stream first. Partial last batch: padded with a mask (pad_remainder, the default, so no
// element is lost) or dropped (drop_remainder: floor(n / B) batches an epoch).
template <std::size_t B>
batch_adaptor<B> batch(remainder rem = remainder::pad) {
  static_assert(B >= 1, "tessel::data::batch<B>: the batch size B must be at least 1");
  return {rem};
}

}  // namespace tessel::data
