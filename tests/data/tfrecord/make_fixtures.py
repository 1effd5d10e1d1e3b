"""Writes the TFRecord fixtures of tests/data/tfrecord_test.cpp with TensorFlow itself, so that tessel's
reader is judged by the writer it must read. Run from the project root, in a virtual environment with
tensorflow-cpu (not one of the pinned judges: it is needed only to write these files again):

    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0
    /tmp/tfvenv/bin/python tests/data/tfrecord/make_fixtures.py

examples.tfrecord and examples.tfrecord.gz: the three tf.train.Examples below (raw and GZIP).
shard-{0..4}.tfrecord: records "f<file>-r<record>", 3, 1, 0, 4 and 2 of them; interleave-c<C>.txt: the
order tf.data's interleave(cycle_length=C, block_length=1) reads them in, one record per line.
"""
import os

import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))


def feature(v):
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
    if isinstance(v, list) and v and isinstance(v[0], float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))
    if isinstance(v, list) and v and isinstance(v[0], int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    raise ValueError(v)


EXAMPLES = [
    {"image": [0.0, 0.5, 1.0, -2.25], "label": [7], "name": [b"first"]},
    {"image": [3.5e-3], "label": [-1, 2**40, -(2**62)], "name": [b"", b"\xff\x00bytes"]},
    {"label": [0], "empty": tf.train.Feature(float_list=tf.train.FloatList(value=[]))},
]


def example(d):
    features = {k: (v if isinstance(v, tf.train.Feature) else feature(v)) for k, v in d.items()}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def main():
    records = [example(d) for d in EXAMPLES]
    with tf.io.TFRecordWriter(os.path.join(HERE, "examples.tfrecord")) as w:
        for r in records:
            w.write(r)
    with tf.io.TFRecordWriter(os.path.join(HERE, "examples.tfrecord.gz"), options="GZIP") as w:
        for r in records:
            w.write(r)

    counts = [3, 1, 0, 4, 2]
    files = []
    for f, n in enumerate(counts):
        path = os.path.join(HERE, f"shard-{f}.tfrecord")
        files.append(path)
        with tf.io.TFRecordWriter(path) as w:
            for r in range(n):
                w.write(f"f{f}-r{r}".encode())
    for cycle in (1, 2, 3, 5):
        ds = tf.data.Dataset.from_tensor_slices(files).interleave(
            tf.data.TFRecordDataset, cycle_length=cycle, block_length=1, deterministic=True)
        with open(os.path.join(HERE, f"interleave-c{cycle}.txt"), "w") as out:
            for r in ds:
                out.write(r.numpy().decode() + "\n")


if __name__ == "__main__":
    main()
