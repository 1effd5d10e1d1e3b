#pragma once
// The input pipeline: stages composed with `|`, from a source to the batches a training step takes.
//
//   namespace td = tessel::data;
//   const auto key = tessel::random::key_from_seed(0);
//   auto train = td::from_idx<tessel::shape<28, 28>>(images_path, labels_path, {.scale = 1.0f / 255, .classes = 10})
//                | td::shard(process_index, process_count)     // this process's examples
//                | td::shuffle(key)                             // a new order every epoch, from the key
//                | td::batch<128>(td::drop_remainder)           // labeled_batch: f32[128,28,28], s32[128]
//                | td::prefetch(2);                             // built on another thread, two ahead
//   while (auto b = train.next()) step(b->data.features, b->data.labels);   // one epoch, then nullopt
//   std::string saved = train.position().to_json();             // and later, in a new process:
//   train.restore(td::stream_position::from_json(saved));       // continues with the same batches
//
// Datasets (random access; dataset.hpp, source.hpp): from_indices, from_vector, from_span, from_idx,
// map, shard, shuffle. Streams (pulled; a dataset becomes one when a stream stage follows it): map,
// batch (batch.hpp), bucket_by_length (bucket.hpp), prefetch (prefetch.hpp). Each header documents its
// stage's contract; dataset.hpp documents positions and the rules every stage follows.

#include "tessel/data/batch.hpp"
#include "tessel/data/bucket.hpp"
#include "tessel/data/dataset.hpp"
#include "tessel/data/prefetch.hpp"
#include "tessel/data/source.hpp"
