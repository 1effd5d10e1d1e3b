#pragma once
// Sources: the datasets a pipeline starts from. Each has a size and random access; none depends on the
// epoch (shuffle and shard, dataset.hpp, reorder them).
//
//   namespace td = tessel::data;
//   td::from_indices(60000)                                  // 0, 1, ..., 59999
//   td::from_vector(std::vector<std::vector<int>>{...})      // owns the examples; get() copies one
//   td::from_span(std::span<const float>(xs))                // refers to the caller's examples
//   td::from_idx<tessel::shape<28, 28>>("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
//                                       {.scale = 1.0f / 255, .classes = 10})
//       // labeled<float, shape<28, 28>>{features, label}

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tessel/core/bfloat16.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/data/dataset.hpp"
#include "tessel/data/idx.hpp"

namespace tessel::data {

namespace detail {
[[noreturn]] inline void out_of_range(const char* who, std::size_t i, std::size_t n) {
  throw std::out_of_range(std::string(who) + ": index " + std::to_string(i) + " is out of range for " +
                          std::to_string(n) + " elements");
}
}  // namespace detail

// 0, 1, ..., n-1: a pipeline over indices, which `map` turns into examples.
class index_dataset {
 public:
  using value_type = std::size_t;
  explicit index_dataset(std::size_t n) : n_(n) {}
  std::size_t size() const noexcept { return n_; }
  // Throws std::out_of_range if i >= size().
  std::size_t get(std::uint64_t, std::size_t i) const {
    if (i >= n_) detail::out_of_range("tessel::data::from_indices", i, n_);
    return i;
  }

 private:
  std::size_t n_;
};

inline index_dataset from_indices(std::size_t n) { return index_dataset(n); }

// Examples held in memory, owned (vector) or borrowed (span: the caller keeps them alive and unchanged).
template <class T>
class vector_dataset {
 public:
  using value_type = T;
  explicit vector_dataset(std::vector<T> examples) : examples_(std::make_shared<const std::vector<T>>(std::move(examples))) {}
  std::size_t size() const noexcept { return examples_->size(); }
  // A copy of example i. Throws std::out_of_range if i >= size().
  T get(std::uint64_t, std::size_t i) const {
    if (i >= examples_->size()) detail::out_of_range("tessel::data::from_vector", i, examples_->size());
    return (*examples_)[i];
  }

 private:
  std::shared_ptr<const std::vector<T>> examples_;  // shared: copies of the pipeline do not copy the data
};

template <class T>
class span_dataset {
 public:
  using value_type = std::remove_cv_t<T>;
  explicit span_dataset(std::span<T> examples) : examples_(examples) {}
  std::size_t size() const noexcept { return examples_.size(); }
  value_type get(std::uint64_t, std::size_t i) const {
    if (i >= examples_.size()) detail::out_of_range("tessel::data::from_span", i, examples_.size());
    return examples_[i];
  }

 private:
  std::span<T> examples_;
};

template <class T>
vector_dataset<T> from_vector(std::vector<T> examples) {
  return vector_dataset<T>(std::move(examples));
}

template <class T, std::size_t N>
span_dataset<const T> from_span(std::span<T, N> examples) {
  return span_dataset<const T>(std::span<const T>(examples.data(), examples.size()));
}

// ---- IDX images + labels ---------------------------------------------------------------------------

// One example of a classification set: features of static shape S and an integer class.
template <class T, Shape S>
struct labeled {
  tensor<T, S> features;
  int32 label = 0;
};

struct idx_options {
  float scale = 1.0f;                   // features = element * scale (1/255 maps u8 pixels to [0, 1])
  std::optional<std::int64_t> classes;  // if set, every label must be in [0, classes)
};

// The examples of an images IDX array [N, dims of S...] and a labels IDX array [N]; both are read once
// and shared by copies of the dataset. get(i) converts image i to T (times options.scale).
template <Shape S, DType T = float>
class idx_dataset {
 public:
  using value_type = labeled<T, S>;

  // Throws format_error (naming `images_name` / `labels_name`) if the images are not [N, dims of S...],
  // the labels are not an integer [N], or a label is outside [0, classes).
  idx_dataset(idx_array images, idx_array labels, idx_options options, const std::string& images_name = "images",
              const std::string& labels_name = "labels")
      : images_(std::make_shared<const idx_array>(std::move(images))), options_(options) {
    const auto fail = [](const std::string& name, const std::string& what) {
      throw format_error("tessel::data::from_idx: " + name + ": " + what);
    };
    const idx_array& im = *images_;
    bool fits = im.dims.size() == S::rank + 1;
    for (std::size_t i = 0; fits && i < S::rank; ++i) fits = im.dims[i + 1] == S::dims[i];
    if (!fits)
      fail(images_name, "expected images [N" + (S::rank ? "," + io::dims_text(S::dims).substr(1) : "]") + ", found " +
                            idx_type_name(im.type) + " " + io::dims_text(im.dims));
    if (labels.dims.size() != 1 || labels.dims[0] != im.dims[0] || labels.type == idx_type::f32 ||
        labels.type == idx_type::f64)
      fail(labels_name, "expected integer labels [" + std::to_string(im.dims[0]) + "] (one per image), found " +
                            idx_type_name(labels.type) + " " + io::dims_text(labels.dims));
    std::visit(
        [&](const auto& values) {
          labels_.reserve(values.size());
          for (std::size_t i = 0; i < values.size(); ++i) {
            const auto label = static_cast<std::int64_t>(values[i]);
            if (options.classes && (label < 0 || label >= *options.classes))
              fail(labels_name, "label " + std::to_string(label) + " at index " + std::to_string(i) +
                                    " is not a class (expected 0 to " + std::to_string(*options.classes - 1) + ")");
            labels_.push_back(static_cast<int32>(label));
          }
        },
        labels.values);
  }

  std::size_t size() const noexcept { return labels_.size(); }

  // Example i. Throws std::out_of_range if i >= size().
  value_type get(std::uint64_t, std::size_t i) const {
    if (i >= labels_.size()) detail::out_of_range("tessel::data::from_idx", i, labels_.size());
    value_type out{tensor<T, S>(), labels_[i]};
    std::visit(
        [&](const auto& values) {
          const auto* first = values.data() + i * S::size;
          for (std::size_t k = 0; k < S::size; ++k) {
            const float x = static_cast<float>(first[k]) * options_.scale;
            if constexpr (std::is_same_v<T, bfloat16>)
              out.features[k] = bfloat16(x);
            else
              out.features[k] = static_cast<T>(x);
          }
        },
        images_->values);
    return out;
  }

 private:
  std::shared_ptr<const idx_array> images_;
  std::vector<int32> labels_;
  idx_options options_;
};

// Images and labels read from two IDX files (gzip or raw, data/idx.hpp): the reader's format_errors
// (missing, truncated, corrupted) and idx_dataset's checks, each naming its file.
template <Shape S, DType T = float>
idx_dataset<S, T> from_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                           idx_options options = {}) {
  return idx_dataset<S, T>(read_idx(images), read_idx(labels), options, io::quoted(images), io::quoted(labels));
}

// The same from arrays already read (e.g. the members of load_fashion_mnist()).
template <Shape S, DType T = float>
idx_dataset<S, T> from_idx(idx_array images, idx_array labels, idx_options options = {}) {
  return idx_dataset<S, T>(std::move(images), std::move(labels), options);
}

}  // namespace tessel::data
