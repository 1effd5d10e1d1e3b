#pragma once
// The two kinds of pipeline stage, composed with `|`, and the stages that keep random access.
//
// A *dataset* has a size and random access per epoch: `size()`, `get(epoch, i)`. Sources (source.hpp),
// `map`, `shard` and `shuffle` are datasets; they only compute indices, so shuffling and sharding never
// copy data. A *stream* is pulled: `next()` gives the next element of the current epoch, or nullopt
// once at the end of each epoch, after which it continues with the next epoch. `batch`, `bucket_by_length`
// and `prefetch` are streams; a dataset becomes a stream when a stream stage is applied to it (or by
// `iterate`). This is the split of grain's MapDataset / IterDataset, and it is what makes a position
// cheap to save and exact to restore: a stream's position is (epoch, index into that epoch's order).
//
//   namespace td = tessel::data;
//   auto s = td::from_indices(10) | td::shuffle(tessel::random::key_from_seed(0)) | td::shard(0, 2)
//            | td::map([](std::size_t i) { return float(i); });   // a dataset of 5 floats per epoch
//   auto it = td::iterate(std::move(s));
//   while (auto x = it.next()) use(*x);                            // one epoch; the next call starts epoch 1
//
// Every stage is used by one thread at a time (prefetch hands its upstream to its own thread), and
// every function given to `map` must be deterministic: a restored position replays elements through it.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessel/random/key.hpp"

namespace tessel::data {

// ---- position ----------------------------------------------------------------------------------

// Where a stream stands: the next element it delivers is element `index` of epoch `epoch` (in the order
// of that epoch after sharding and shuffling); `index == size` means the end-of-epoch nullopt is next.
// `pending` lists, sorted, the indices of this epoch that bucket_by_length has pulled but not yet
// delivered (empty for every other stage). Restoring a saved position into a pipeline built the same
// way (same sources, keys, stages and process index) continues with exactly the same elements.
struct stream_position {
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;
  std::vector<std::uint64_t> pending{};

  friend bool operator==(const stream_position&, const stream_position&) = default;

  // {"epoch":E,"index":I,"pending":[...]}: a string for a checkpoint's metadata.
  std::string to_json() const;

  // Reads what to_json writes. Throws io::format_error if a member is missing, is not a non-negative
  // integer, is unknown, or `pending` is not sorted, unique and below `index`.
  static stream_position from_json(std::string_view text);
};

// ---- concepts ----------------------------------------------------------------------------------

// Random access per epoch. get(epoch, i) requires i < size() and depends only on (epoch, i).
template <class D>
concept Dataset = std::move_constructible<D> && requires(D& d, const D& cd, std::uint64_t epoch, std::size_t i) {
  typename D::value_type;
  { cd.size() } -> std::convertible_to<std::size_t>;
  { d.get(epoch, i) } -> std::convertible_to<typename D::value_type>;
};

// Pulled one element at a time; position() and restore() as stream_position describes.
template <class S>
concept Stream = std::move_constructible<S> && requires(S& s, const S& cs, const stream_position& p) {
  typename S::value_type;
  { s.next() } -> std::same_as<std::optional<typename S::value_type>>;
  { cs.position() } -> std::convertible_to<stream_position>;
  s.restore(p);
};

// A stage's parameters, waiting for its upstream: `upstream | adaptor` is `adaptor(upstream)`.
template <class A>
concept Adaptor = requires { typename std::remove_cvref_t<A>::pipeline_adaptor; };

// The new stage owns its upstream: an rvalue is moved in, an lvalue copied (as is an lvalue adaptor).
template <class Up, Adaptor A>
  requires(Dataset<std::remove_cvref_t<Up>> || Stream<std::remove_cvref_t<Up>>)
auto operator|(Up&& upstream, A&& adaptor) {
  return std::remove_cvref_t<A>(std::forward<A>(adaptor))(std::remove_cvref_t<Up>(std::forward<Up>(upstream)));
}

// ---- a dataset as a stream -----------------------------------------------------------------------

// Walks a dataset epoch after epoch: elements 0..size-1 of epoch 0, nullopt, then epoch 1, ...
// A dataset of size 0 gives nullopt on every call (each call is one empty epoch).
template <Dataset D>
class dataset_stream {
 public:
  using value_type = typename D::value_type;

  explicit dataset_stream(D dataset) : dataset_(std::move(dataset)) {}

  std::optional<value_type> next() {
    if (index_ >= dataset_.size()) {
      ++epoch_;
      index_ = 0;
      return std::nullopt;
    }
    std::optional<value_type> out(dataset_.get(epoch_, index_));
    ++index_;  // after get: an element that throws is retried by the next call
    return out;
  }

  stream_position position() const { return {epoch_, index_, {}}; }

  // Throws std::invalid_argument if p has pending elements or an index beyond this epoch's size.
  void restore(const stream_position& p) {
    if (!p.pending.empty() || p.index > dataset_.size())
      throw std::invalid_argument("tessel::data::restore: position " + p.to_json() + " does not fit a dataset of " +
                                  std::to_string(dataset_.size()) + " elements per epoch");
    epoch_ = p.epoch;
    index_ = p.index;
  }

  const D& dataset() const noexcept { return dataset_; }

 private:
  D dataset_;
  std::uint64_t epoch_ = 0;
  std::size_t index_ = 0;
};

// The stream of a dataset (a stream is returned unchanged).
template <class X>
  requires(Dataset<std::remove_cvref_t<X>> || Stream<std::remove_cvref_t<X>>)
auto iterate(X&& x) {
  using U = std::remove_cvref_t<X>;
  if constexpr (Stream<U>)
    return U(std::forward<X>(x));
  else
    return dataset_stream<U>(U(std::forward<X>(x)));
}

template <class X>
using stream_of_t = decltype(iterate(std::declval<X>()));

// ---- map ---------------------------------------------------------------------------------------

template <Dataset D, class F>
class map_dataset {
 public:
  using value_type = std::decay_t<std::invoke_result_t<F&, typename D::value_type>>;
  map_dataset(D up, F f) : up_(std::move(up)), f_(std::move(f)) {}
  std::size_t size() const { return up_.size(); }
  value_type get(std::uint64_t epoch, std::size_t i) { return std::invoke(f_, up_.get(epoch, i)); }

 private:
  D up_;
  F f_;
};

template <Stream S, class F>
class map_stream {
 public:
  using value_type = std::decay_t<std::invoke_result_t<F&, typename S::value_type>>;
  map_stream(S up, F f) : up_(std::move(up)), f_(std::move(f)) {}
  std::optional<value_type> next() {
    auto x = up_.next();
    if (!x) return std::nullopt;
    return std::invoke(f_, std::move(*x));
  }
  stream_position position() const { return up_.position(); }
  void restore(const stream_position& p) { up_.restore(p); }

 private:
  S up_;
  F f_;
};

template <class F>
struct map_adaptor {
  using pipeline_adaptor = void;
  F f;
  template <class Up>
  auto operator()(Up up) && {
    using R = std::invoke_result_t<F&, typename Up::value_type>;
    static_assert(!std::is_void_v<R>, "tessel::data::map: the function returns void; it must return the new element");
    if constexpr (Dataset<Up>)
      return map_dataset<Up, F>(std::move(up), std::move(f));
    else
      return map_stream<Up, F>(std::move(up), std::move(f));
  }
};

// map(f): each element x becomes f(x) (a copy of f is kept). On a dataset the result is a dataset,
// on a stream a stream. f must be deterministic (a restored position calls it again for the same x);
// what it throws reaches the caller of next() (through prefetch too).
template <class F>
map_adaptor<std::decay_t<F>> map(F&& f) {
  return {std::forward<F>(f)};
}

// ---- shard ---------------------------------------------------------------------------------------

// What shard does with the n % count examples that would make shards unequal.
enum class shard_remainder {
  keep,  // every example goes to exactly one process; shards differ in size by at most one
  drop,  // every shard has n / count examples; the last n % count examples go to no process
};

template <Dataset D>
class shard_dataset {
 public:
  using value_type = typename D::value_type;
  shard_dataset(D up, std::size_t index, std::size_t count, shard_remainder rem)
      : up_(std::move(up)), index_(index), count_(count), rem_(rem) {}
  std::size_t size() const {
    const std::size_t n = up_.size();
    if (rem_ == shard_remainder::drop) return n / count_;
    return n > index_ ? (n - index_ + count_ - 1) / count_ : 0;
  }
  value_type get(std::uint64_t epoch, std::size_t i) { return up_.get(epoch, index_ + i * count_); }

 private:
  D up_;
  std::size_t index_, count_;
  shard_remainder rem_;
};

struct shard_adaptor {
  using pipeline_adaptor = void;
  std::size_t index, count;
  shard_remainder rem;
  template <class Up>
  shard_dataset<Up> operator()(Up up) && {
    static_assert(Dataset<Up>, "tessel::data::shard: needs a dataset (a source, map, shard or shuffle); "
                               "fix: shard before batch, bucket_by_length and prefetch");
    return {std::move(up), index, count, rem};
  }
};

// shard(process_index, process_count): this process's part of the dataset, as tf.data's shard: element
// i of the upstream (in its order for the epoch) goes to process i % process_count. With the same
// upstream on every process, each example of an epoch goes to exactly one process (none twice, none
// lost; shard_remainder::drop equalises the shards instead). Shuffling before sharding needs the same
// key on every process: then the processes split one global order, different every epoch; shuffling
// after sharding reorders a fixed partition within each process. Throws std::invalid_argument unless
// process_index < process_count.
shard_adaptor shard(std::size_t process_index, std::size_t process_count, shard_remainder rem = shard_remainder::keep);

// ---- shuffle -------------------------------------------------------------------------------------

namespace detail {
// random::permutation_rounds (random/distributions.hpp, which pulls in xsimd; data stays light):
// the least r with n^3 <= (2^32 - 1)^r. The tests check permutation_of against permutation<N>.
constexpr int shuffle_rounds(std::uint64_t n) noexcept {
  constexpr std::uint64_t m = 0xffffffffu;
  if (n <= 1) return 0;
  if (n * n <= m / n) return 1;
  if (n * n <= (m * m) / n) return 2;
  return 3;
}
}  // namespace detail

// jax.random.permutation(k, n) for n known at run time, bit-exact: the algorithm of
// tessel::random::permutation<N> (rounds of a stable sort by fresh 32-bit words). O(n log n) time and
// 8n bytes. Throws std::length_error if n > 2^31 - 1 (JAX permutes int32 indices).
std::vector<std::uint32_t> permutation_of(random::key k, std::size_t n);

template <Dataset D>
class shuffle_dataset {
 public:
  using value_type = typename D::value_type;
  shuffle_dataset(D up, random::key k) : up_(std::move(up)), key_(k) {}
  std::size_t size() const { return up_.size(); }
  value_type get(std::uint64_t epoch, std::size_t i) { return up_.get(epoch, order(epoch)[i]); }

  // The order of `epoch`: permutation_of(fold_in(key, epoch), size()); computed once per epoch.
  const std::vector<std::uint32_t>& order(std::uint64_t epoch) {
    if (!cached_ || *cached_ != epoch || order_.size() != up_.size()) {
      order_ = permutation_of(random::fold_in(key_, static_cast<std::uint32_t>(epoch)), up_.size());
      cached_ = epoch;
    }
    return order_;
  }

 private:
  D up_;
  random::key key_;
  std::optional<std::uint64_t> cached_;
  std::vector<std::uint32_t> order_;
};

struct shuffle_adaptor {
  using pipeline_adaptor = void;
  random::key key;
  template <class Up>
  shuffle_dataset<Up> operator()(Up up) && {
    static_assert(Dataset<Up>, "tessel::data::shuffle: needs a dataset (a source, map, shard or shuffle); "
                               "fix: shuffle before batch, bucket_by_length and prefetch");
    return {std::move(up), key};
  }
};

// shuffle(key): epoch e visits the upstream in the order jax.random.permutation(fold_in(key, e), n)
// (n the upstream's size, bit-exact with JAX, via permutation_of; the epoch is folded in as a uint32).
// Deterministic in (key, epoch): a resumed run sees the same order. A full shuffle, not a window.
inline shuffle_adaptor shuffle(random::key k) { return {k}; }

}  // namespace tessel::data

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/data/dataset-inl.hpp"
#endif
