#pragma once
// Input pipelines: IDX files, TFRecord files and text corpora, datasets, buckets, batches and prefetch.
// Not included by tessel/tessel.hpp (it says why).
#include "tessel/data/idx.hpp"
#include "tessel/data/pipeline.hpp"
#include "tessel/data/text.hpp"
#include "tessel/data/tfrecord.hpp"
