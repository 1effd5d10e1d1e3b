#pragma once
// bucket_by_length: variable-length sequences grouped by length into buckets of static shape, so that a
// jitted step compiles once per bucket rather than once per length.
//
//   using namespace tessel::data;
//   auto s = from_vector(sentences)   // std::vector<std::vector<int32>>
//            | bucket_by_length<bucket<128, 64>, bucket<256, 32>, bucket<512, 16>>();
//   while (auto b = s.next())
//     std::visit([&](auto& batch) { step(batch.tokens, batch.mask); }, *b);   // one instantiation per bucket
//
// A sequence of length n goes to the first bucket with n <= length. Each bucket collects its batch
// size of sequences and is delivered as soon as it is full, as a sequence_batch<T, B, L>. At the end of
// an epoch the incomplete buckets are delivered padded, shortest length first (remainder::pad), or
// dropped (remainder::drop); then next() gives the end-of-epoch nullopt.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tessel/core/dtype.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/data/batch.hpp"
#include "tessel/data/dataset.hpp"

namespace tessel::data {

// One bucket: sequences up to `Length` elements, delivered `BatchSize` at a time.
template <std::size_t Length, std::size_t BatchSize>
struct bucket {
  static constexpr std::size_t length = Length;
  static constexpr std::size_t batch_size = BatchSize;
};

// The batch of one bucket. Row r holds a sequence of lengths[r] elements followed by zeros.
template <class T, std::size_t B, std::size_t L>
struct sequence_batch {
  static constexpr std::size_t batch_size = B;
  static constexpr std::size_t length = L;
  tensor<T, shape<B, L>> tokens;
  tensor<bool, shape<B, L>> mask;   // true at the real elements: (r, j) with j < lengths[r]
  tensor<int32, shape<B>> lengths;  // 0 for padding rows
  tensor<bool, shape<B>> row_mask;  // true for the first `count` rows, the real ones
  std::size_t count = 0;
};

// What to do with a sequence longer than the largest bucket.
enum class too_long {
  error,     // throw std::length_error naming its index, its length and the largest bucket
  truncate,  // keep its first L elements, L the largest bucket's length
};

struct bucket_options {
  remainder rem = remainder::pad;
  too_long overlong = too_long::error;
};

// A sized range of dtype elements (std::vector<int32>, std::span<const float>, ...).
template <class E>
concept Sequence = std::ranges::sized_range<const E> && std::ranges::input_range<const E> &&
                   DType<std::remove_cv_t<std::ranges::range_value_t<const E>>>;

template <Stream Up, class... Buckets>
class bucket_stream {
  using sequence = typename Up::value_type;
  using T = std::remove_cv_t<std::ranges::range_value_t<const sequence>>;
  static constexpr std::size_t count_ = sizeof...(Buckets);
  static constexpr std::array<std::size_t, count_> lengths_{Buckets::length...};
  static constexpr std::array<std::size_t, count_> sizes_{Buckets::batch_size...};

  struct held {
    std::uint64_t index;  // in this epoch's order
    std::vector<T> values;
  };

 public:
  using value_type = std::variant<sequence_batch<T, Buckets::batch_size, Buckets::length>...>;

  bucket_stream(Up up, bucket_options options) : up_(std::move(up)), options_(options) {}

  // The next full bucket, or at the end of an epoch the incomplete ones, or nullopt (the end of the
  // epoch; the next call starts the next epoch). Throws std::length_error for a sequence longer than
  // the largest bucket under too_long::error; exceptions from upstream propagate.
  std::optional<value_type> next() {
    if (flushing_) return flush_one();
    while (true) {
      stream_position before = up_.position();
      std::optional<sequence> x = up_.next();
      if (!x) {
        if (options_.rem == remainder::drop) {
          for (auto& b : buffers_) b.clear();
          return std::nullopt;
        }
        flushing_ = true;
        end_position_ = std::move(before);
        return flush_one();
      }
      const std::size_t b = place(*x, before);
      if (buffers_[b].size() == sizes_[b]) return deliver(b);
    }
  }

  // Upstream's position, plus the indices held in incomplete buckets as `pending`.
  stream_position position() const {
    stream_position p = flushing_ ? end_position_ : up_.position();
    for (const auto& b : buffers_)
      for (const held& h : b) p.pending.push_back(h.index);
    std::sort(p.pending.begin(), p.pending.end());
    return p;
  }

  // Refills the buckets by replaying upstream from the first pending index (each element again through
  // the stages before, which must be deterministic), then continues from p.index. Throws
  // std::invalid_argument if p cannot have come from this pipeline.
  void restore(const stream_position& p) {
    for (auto& b : buffers_) b.clear();
    flushing_ = false;
    if (p.pending.empty()) {
      up_.restore(p);
      return;
    }
    const auto bad = [&](const char* why) {
      throw std::invalid_argument("tessel::data::bucket_by_length: cannot restore position " + p.to_json() + ": " + why);
    };
    if (!std::is_sorted(p.pending.begin(), p.pending.end()) || p.pending.back() >= p.index)
      bad("pending indices must be sorted and below index");
    up_.restore({p.epoch, p.pending.front(), {}});
    while (true) {
      stream_position before = up_.position();
      if (before.epoch != p.epoch || before.index >= p.index) break;
      std::optional<sequence> x = up_.next();
      if (!x) bad("the epoch ends before index");
      if (!std::binary_search(p.pending.begin(), p.pending.end(), before.index)) continue;
      const std::size_t b = place(*x, before);
      if (buffers_[b].size() >= sizes_[b]) bad("a bucket would be full");
    }
  }

 private:
  std::size_t place(const sequence& x, const stream_position& at) {
    const std::size_t n = std::ranges::size(x);
    std::size_t b = 0;
    while (b < count_ && n > lengths_[b]) ++b;
    if (b == count_) {
      if (options_.overlong == too_long::error)
        throw std::length_error("tessel::data::bucket_by_length: the sequence at index " + std::to_string(at.index) +
                                " of epoch " + std::to_string(at.epoch) + " has length " + std::to_string(n) +
                                ", longer than the largest bucket (" + std::to_string(lengths_[count_ - 1]) +
                                "); fix: add a longer bucket, or pass {.overlong = too_long::truncate}");
      b = count_ - 1;
    }
    held h{at.index, {}};
    const std::size_t keep = std::min(n, lengths_[b]);
    h.values.reserve(keep);
    for (auto&& v : x) {
      if (h.values.size() == keep) break;
      h.values.push_back(static_cast<T>(v));
    }
    buffers_[b].push_back(std::move(h));
    return b;
  }

  std::optional<value_type> flush_one() {
    for (std::size_t b = 0; b < count_; ++b)
      if (!buffers_[b].empty()) return deliver(b);
    flushing_ = false;
    return std::nullopt;
  }

  template <std::size_t I>
  value_type make(std::vector<held>& rows) {
    using batch_t = std::variant_alternative_t<I, value_type>;
    value_type out(std::in_place_index<I>);
    batch_t& batch = std::get<I>(out);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::vector<T>& v = rows[r].values;
      std::copy(v.begin(), v.end(), batch.tokens.data() + r * batch_t::length);
      std::fill_n(batch.mask.data() + r * batch_t::length, v.size(), true);
      batch.lengths[r] = static_cast<int32>(v.size());
      batch.row_mask[r] = true;
    }
    batch.count = rows.size();
    return out;
  }

  value_type deliver(std::size_t b) {
    std::optional<value_type> out;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (void)((b == I && (out.emplace(make<I>(buffers_[I])), true)) || ...);
    }(std::make_index_sequence<count_>{});
    buffers_[b].clear();
    return std::move(*out);
  }

  Up up_;
  bucket_options options_;
  std::array<std::vector<held>, count_> buffers_;
  bool flushing_ = false;
  stream_position end_position_;
};

namespace detail {
template <class... Buckets>
consteval bool valid_buckets() {
  constexpr std::array<std::size_t, sizeof...(Buckets)> lengths{Buckets::length...};
  for (std::size_t i = 1; i < lengths.size(); ++i)
    if (lengths[i] <= lengths[i - 1]) return false;
  return true;
}
}  // namespace detail

template <class... Buckets>
struct bucket_adaptor {
  using pipeline_adaptor = void;
  bucket_options options;
  template <class Up>
  auto operator()(Up up) && {
    using S = stream_of_t<Up>;
    static_assert(Sequence<typename S::value_type>,
                  "tessel::data::bucket_by_length: the elements must be sequences (a sized range of a dtype, such as "
                  "std::vector<tessel::int32>); fix: map each example to its sequence first");
    return bucket_stream<S, Buckets...>(iterate(std::move(up)), options);
  }
};

// bucket_by_length<bucket<L1, B1>, bucket<L2, B2>, ...>(options): lengths strictly increasing, batch sizes
// and lengths at least 1 (compile errors otherwise). The stream's elements are
// std::variant<sequence_batch<T, B1, L1>, ...>; visit them with a generic lambda. position() lists the
// sequences held in incomplete buckets, so that a restore delivers exactly the same batches.
template <class... Buckets>
bucket_adaptor<Buckets...> bucket_by_length(bucket_options options = {}) {
  static_assert(sizeof...(Buckets) >= 1, "tessel::data::bucket_by_length: give at least one bucket<Length, BatchSize>");
  static_assert(((Buckets::length >= 1 && Buckets::batch_size >= 1) && ...),
                "tessel::data::bucket_by_length: every bucket needs a length and a batch size of at least 1");
  static_assert(detail::valid_buckets<Buckets...>(),
                "tessel::data::bucket_by_length: bucket lengths must be strictly increasing (shortest first)");
  return {options};
}

}  // namespace tessel::data
