"""bilm-tf's inference graph (simple-elmo 0.9.2) on TensorFlow, timed on request: the peer that
``bench/bench_tf_peer.py`` starts in TensorFlow's own environment and runs beside ours.

    TF_USE_LEGACY_KERAS=1 TF_VENV/bin/python bench/tf_peer.py OPTIONS.json WEIGHTS.hdf5 THREADS MAX_BATCH

It imports neither torch nor spacy_elmo (TensorFlow's environment has neither). It reads one JSON
request a line from stdin and answers one JSON line on stdout:

- ``{"load": NAME, "ids": PATH}``: char ids (B, T, 50) from a ``.npy`` file, kept as ``NAME``.
- ``{"run": NAME}``: one ``session.run`` of every layer for them, timed; answers ``{"seconds": S}``.
  The graph's LSTMs are stateful (each call starts from the last one's final state), so their state
  variables are set to zero before every call, outside the timed span.
- ``{"layers": NAME}``: the layers (3, B, T, 1024) written to ``PATH.layers.npy`` beside the ids.
- ``{"quit": true}``.
"""
import json
import os
from importlib import metadata
import sys
import time

import numpy as np


def main(options_path: str, weights_path: str, threads: int, max_batch: int) -> None:
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    from simple_elmo import model as bilm_model

    with open(options_path, encoding="utf-8") as handle:
        options = json.load(handle)
    ids = tf.compat.v1.placeholder("int32", shape=(None, None, options["char_cnn"]["max_characters_per_token"]))
    bilm = bilm_model.BidirectionalLanguageModel(options, weights_path, max_batch_size=max_batch)
    ops = bilm(ids)
    graph = bilm._graphs[ids]  # the state variables are not exposed otherwise
    states = [v for direction in graph.lstm_init_states.values() for layer in direction for v in layer]
    reset = tf.compat.v1.variables_initializer(states)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=1)
    session = tf.compat.v1.Session(config=config)
    session.run(tf.compat.v1.global_variables_initializer())
    inputs = {}
    say({"ready": True, "tensorflow": tf.__version__, "simple_elmo": metadata.version("simple_elmo"), "threads": threads,
         "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on for x86-64 Linux)")})
    for line in sys.stdin:
        request = json.loads(line)
        if "load" in request:
            inputs[request["load"]] = (np.load(request["ids"]).astype(np.int32), request["ids"])
            say({"loaded": request["load"]})
        elif "run" in request:
            session.run(reset)
            start = time.perf_counter()
            session.run(ops["lm_embeddings"], feed_dict={ids: inputs[request["run"]][0]})
            say({"seconds": time.perf_counter() - start})
        elif "layers" in request:
            session.run(reset)
            char_ids, path = inputs[request["layers"]]
            np.save(path + ".layers.npy", session.run(ops["lm_embeddings"], feed_dict={ids: char_ids}))
            say({"written": path + ".layers.npy"})
        elif request.get("quit"):
            break


def say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
