"""Write tests/data/bilm_tf/: a tiny biLM trained by bilm-tf's own training code, shipped in every
TensorFlow layout users download, with references computed by bilm-tf's own graphs.

Runs in a side environment with TensorFlow (never needed by the package or its tests):

    python3 -m venv SIDEENV && SIDEENV/bin/pip install 'tensorflow-cpu==2.21.*' 'tf-keras==2.21.*' \
        simple-elmo==0.9.2 h5py
    TF_USE_LEGACY_KERAS=1 SIDEENV/bin/python scripts/make_bilm_tf_fixtures.py tests/data/bilm_tf

simple-elmo packages bilm-tf's graph code (training.py, model.py, data.py) for TensorFlow 2's
``compat.v1``; bilm-tf's training graph needs reference variables, hence
``disable_resource_variables``. What each output holds is described in tests/data/bilm_tf/README.md.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import h5py
import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
tf.compat.v1.disable_resource_variables()

from simple_elmo import data as bilm_data  # noqa: E402  (after TF's mode is set)
from simple_elmo import elmo as bilm_elmo  # noqa: E402
from simple_elmo import model as bilm_model  # noqa: E402
from simple_elmo import training as bilm_training  # noqa: E402

SEED = 20181
random.seed(SEED)
TRAIN = """the cat sat on the mat .
the dog sat on the log .
a cat and a dog ran to the river bank .
the bank by the river holds money .
she put money in the bank .
the river ran past the old mill .
a dog sat by the cat .
the old man sat on the bank of the river .
he ran to the bank with money .
the mat is on the floor .""".splitlines()
# held out: the references' sentences (one with words outside the vocabulary)
HELD_OUT = [
    "the cat ran to the bank .",
    "a dog sat on the old mat .",
    "the zebra swam past the mill .",
]
OPTIONS = {
    "bidirectional": True,
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 4},
        "filters": [[1, 4], [2, 6], [3, 6]],
        "max_characters_per_token": 50,
        "n_characters": 261,  # bilm-tf's training code refuses anything else
        "n_highway": 1,
    },
    "dropout": 0.1,
    "lstm": {
        "cell_clip": 3,
        "dim": 12,
        "n_layers": 2,
        "proj_clip": 3,
        "projection_dim": 6,
        "use_skip_connections": True,
    },
    "all_clip_norm_val": 10.0,
    "n_epochs": 1,
    "batch_size": 2,
    "unroll_steps": 4,
    "n_negative_samples_batch": 8,
}
TRAIN_STEPS = 24
TOP_K = 5


def write_corpus(work: Path) -> Path:
    """The training text and bilm-tf's vocabulary file (<S>, </S>, <UNK>, then by frequency)."""
    (work / "train.txt").write_text("\n".join(TRAIN) + "\n", encoding="utf-8")
    counts = {}
    for line in TRAIN:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))
    vocab = work / "vocab.txt"
    vocab.write_text("\n".join(["<S>", "</S>", "<UNK>", *words]) + "\n", encoding="utf-8")
    for i, sentence in enumerate(HELD_OUT):
        (work / f"heldout_{i}.txt").write_text(sentence + "\n", encoding="utf-8")
    (work / "heldout_all.txt").write_text("\n".join(HELD_OUT) + "\n", encoding="utf-8")
    return vocab


def train(work: Path, vocab_path: Path) -> Path:
    """Train with bilm-tf's ``train`` for TRAIN_STEPS batches. RETURNS the checkpoint folder."""
    vocab = bilm_data.UnicodeCharsVocabulary(str(vocab_path), 50)
    options = json.loads(json.dumps(OPTIONS))
    options["n_tokens_vocab"] = vocab.size
    options["n_train_tokens"] = TRAIN_STEPS * options["batch_size"] * options["unroll_steps"]
    dataset = bilm_data.BidirectionalLMDataset(str(work / "train.txt"), vocab, test=False, shuffle_on_load=False)
    save_dir, log_dir = work / "checkpoint", work / "log"
    save_dir.mkdir()
    log_dir.mkdir()
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(SEED)
        np.random.seed(SEED)
        bilm_training.train(options, dataset, 1, str(save_dir), str(log_dir))
    return save_dir


def checkpoint_variables(ckpt: str) -> dict:
    """Every tensor in a checkpoint, read with TensorFlow's own reader."""
    reader = tf.compat.v1.train.NewCheckpointReader(ckpt)
    return {name: reader.get_tensor(name) for name in sorted(reader.get_variable_to_shape_map())}


def language_model_session(options: dict, ckpt: str, *, unroll_steps: int):
    """bilm-tf's test-time training graph (batch 1) restored from ``ckpt``."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.compat.v1.variable_scope("lm"):
            test_options = dict(options, batch_size=1, unroll_steps=unroll_steps)
            model = bilm_training.LanguageModel(test_options, False)
        session = tf.compat.v1.Session(graph=graph)
        tf.compat.v1.train.Saver().restore(session, ckpt)
    return graph, session, model


def write_test_meta_graph(options: dict, ckpt: str, path: Path) -> None:
    """The MetaGraphDef of bilm-tf's test-time graph (unroll 1, batch 1) with its saver: a real
    ``.meta`` a quarter the size of the training graph's (1.5 MB with its unrolled steps,
    optimizer and summaries), which no reader of the weights needs."""
    graph, session, model = language_model_session(options, ckpt, unroll_steps=1)
    with graph.as_default():
        saver = tf.compat.v1.train.Saver()
        tf.compat.v1.train.export_meta_graph(str(path), graph=graph, saver_def=saver.as_saver_def(), clear_devices=True)
    session.close()


def token_losses(options: dict, ckpt: str, vocab: "bilm_data.UnicodeCharsVocabulary") -> dict:
    """Per-token forward and backward NLL of the held-out sentences, by bilm-tf's test graph
    (unroll 1, batch 1, as ``test`` runs it): with a fresh zero state per sentence, and with the
    state carried from sentence to sentence as ``test`` carries it."""
    graph, session, model = language_model_session(options, ckpt, unroll_steps=1)
    with graph.as_default():
        zero_feed = {
            model.tokens_characters: np.zeros([1, 1, 50], np.int32),
            model.tokens_characters_reverse: np.zeros([1, 1, 50], np.int32),
        }
        zero_state = session.run(model.init_lstm_state, feed_dict=zero_feed)
        out = {}
        for mode in ("fresh", "carried"):
            state = zero_state
            forward, backward = [], []
            for sentence in HELD_OUT:
                if mode == "fresh":
                    state = zero_state
                words = sentence.split()
                ids_f, chars_f = vocab.encode(sentence), vocab.encode_chars(sentence)
                rev = " ".join(reversed(words))
                ids_b, chars_b = vocab.encode(rev, reverse=True), vocab.encode_chars(rev, reverse=True)
                for step in range(len(ids_f) - 1):
                    feed = {t: v for t, v in zip(_flat(model.init_lstm_state), _flat(state))}
                    feed[model.tokens_characters] = chars_f[step][None, None]
                    feed[model.tokens_characters_reverse] = chars_b[step][None, None]
                    feed[model.next_token_id] = np.array([[ids_f[step + 1]]], np.int32)
                    feed[model.next_token_id_reverse] = np.array([[ids_b[step + 1]]], np.int32)
                    losses, state = session.run([model.individual_losses, model.final_lstm_state], feed_dict=feed)
                    forward.append(float(losses[0]))
                    backward.append(float(losses[1]))
            out[mode] = {"forward": forward, "backward": backward}
    session.close()
    return out


def _flat(structure):
    return tf.nest.flatten(structure)


def substitutes(options: dict, ckpt: str, vocab) -> dict:
    """Log-probabilities of every vocabulary word at every word of each held-out sentence, from
    bilm-tf's top LSTM layer (with context, zero initial state) times the softmax in the
    checkpoint: forward from the state before the word, backward from the state after it."""
    result = {}
    for index, sentence in enumerate(HELD_OUT):
        words = sentence.split()
        n = len(words)
        graph, session, model = language_model_session(options, ckpt, unroll_steps=n + 1)
        with graph.as_default():
            rev = " ".join(reversed(words))
            feed = {
                model.tokens_characters: vocab.encode_chars(sentence)[: n + 1][None],
                model.tokens_characters_reverse: vocab.encode_chars(rev, reverse=True)[: n + 1][None],
            }
            outputs = tf.compat.v1.get_collection("lstm_output_embeddings")
            forward_steps, backward_steps = outputs[0], outputs[1]
            forward = tf.concat(forward_steps, axis=0)  # (n + 1, P): inputs <S>, w1..wn
            backward = tf.concat(backward_steps, axis=0)  # inputs </S>, wn..w1
            log_softmax = lambda h: tf.nn.log_softmax(tf.matmul(h, model.softmax_W, transpose_b=True) + model.softmax_b)
            fwd = log_softmax(forward[:n])  # state at <S>, w1..w(n-1) predicts w1..wn
            bwd = tf.reverse(log_softmax(backward[:n]), axis=[0])  # state at w(t+1) predicts wt
            combined = 0.5 * (fwd + bwd)
            ops = [fwd, bwd, combined] + [tf.nn.top_k(x, k=TOP_K) for x in (fwd, bwd, combined)]
            values = session.run(ops, feed_dict=feed)
        session.close()
        result[f"forward_{index}"], result[f"backward_{index}"], result[f"combined_{index}"] = values[:3]
        for name, top in zip(("forward", "backward", "combined"), values[3:]):
            result[f"top_{name}_{index}"] = top.indices.astype(np.int64)
    return result


def layers_and_char_ids(options_262: dict, weights: Path, vocab_path: Path) -> dict:
    """All three layers for the held-out sentences by bilm-tf's inference graph
    (``BidirectionalLanguageModel`` over the dumped HDF5), in one batch from the graph's zero
    initial state, and the character ids its ``Batcher`` makes."""
    batcher = bilm_data.Batcher(str(vocab_path), 50)
    sentences = [s.split() for s in HELD_OUT]
    char_ids = batcher.batch_sentences(sentences)
    with tf.Graph().as_default():
        ids = tf.compat.v1.placeholder("int32", shape=(None, None, 50))
        bilm = bilm_model.BidirectionalLanguageModel(options_262, str(weights), max_batch_size=8)
        ops = bilm(ids)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            embeddings, mask = session.run([ops["lm_embeddings"], ops["mask"]], feed_dict={ids: char_ids})
    return {"char_ids": char_ids.astype(np.int64), "lm_embeddings": embeddings, "mask": mask}


def write_saved_model(options_262: dict, weights: Path, target: Path) -> None:
    """A TF1-Hub-style SavedModel of the inference graph (as google/elmo and DeepPavlov's
    elmo2tfhub export it): variables named by bilm-tf's graph under ``bilm/``, written by TF's saver."""
    with tf.Graph().as_default():
        tokens = tf.compat.v1.placeholder("int32", shape=(None, None, 50), name="char_ids")
        bilm = bilm_model.BidirectionalLanguageModel(options_262, str(weights), max_batch_size=8)
        ops = bilm(tokens)
        elmo = bilm_elmo.weight_layers("elmo_output", ops, l2_coef=0.0)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            builder = tf.compat.v1.saved_model.Builder(str(target))
            signature = tf.compat.v1.saved_model.predict_signature_def(
                {"char_ids": tokens}, {"elmo": elmo["weighted_op"]}
            )
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={"default": signature})
            builder.save()
    (target / "tfhub_module.pb").write_bytes(b"\x08\x03")  # ModuleDef{format: FORMAT_V3}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bilm-tf-fixtures-") as tmp:
        work = Path(tmp)
        vocab_path = write_corpus(work)
        save_dir = train(work, vocab_path)
        ckpt = tf.train.latest_checkpoint(str(save_dir))
        step = ckpt.rsplit("-", 1)[1]
        options = json.loads((save_dir / "options.json").read_text())
        vocab = bilm_data.UnicodeCharsVocabulary(str(vocab_path), 50)

        weights = work / "model.hdf5"
        bilm_training.dump_weights(str(save_dir), str(weights))
        options_262 = json.loads(json.dumps(options))
        options_262["char_cnn"]["n_characters"] = 262

        # bilm-tf's own ``test``: one stream, batch 1, LSTM state carried across sentences
        bilm_data.LMDataset.get_sentence = _get_sentence_ending
        with tf.Graph().as_default():
            test_data = bilm_data.BidirectionalLMDataset(
                str(work / "heldout_all.txt"), vocab, test=True, shuffle_on_load=False
            )
            test_perplexity = float(bilm_training.test(options, ckpt, test_data, batch_size=1))
        losses = token_losses(options, ckpt, vocab)

        variables = checkpoint_variables(ckpt)
        layers = layers_and_char_ids(options_262, weights, vocab_path)
        subs = substitutes(options, ckpt, vocab)

        # the AllenNLP-style softmax file and vocabulary, as published beside "original"
        with h5py.File(out / "tiny_softmax_weights.hdf5", "w") as handle:
            handle.create_dataset("softmax/W", data=variables["lm/softmax/W"])
            handle.create_dataset("softmax/b", data=variables["lm/softmax/b"])
        shutil.copy(vocab_path, out / "vocab.txt")
        shutil.copy(weights, out / "model.hdf5")
        (out / "options.json").write_text(json.dumps(options_262, indent=2) + "\n")

        np.savez(
            out / "reference.npz",
            **layers,
            **subs,
            softmax_W=variables["lm/softmax/W"],
            softmax_b=variables["lm/softmax/b"],
        )
        reference = {
            "sentences": HELD_OUT,
            "checkpoint_step": int(step),
            "variables": {name: list(value.shape) for name, value in variables.items()},
            "test_perplexity_carried": test_perplexity,
            "token_nll": losses,
            "top_k": TOP_K,
            "versions": {
                "tensorflow": tf.__version__,
                "simple_elmo": _version("simple_elmo"),
                "h5py": h5py.__version__,
                "numpy": np.__version__,
            },
        }
        (out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")

        # 1. bilm-tf's training checkpoint folder, as ``train`` leaves it
        folder = out / "checkpoint_folder"
        _fresh(folder)
        for path in save_dir.iterdir():
            if path.name.startswith(f"model.ckpt-{step}.") or path.name == "options.json":
                shutil.copy(path, folder / path.name)
        write_test_meta_graph(options, ckpt, folder / f"model.ckpt-{step}.meta")
        # TF writes the absolute path of the training machine; keep one that exists nowhere here
        (folder / "checkpoint").write_text(
            f'model_checkpoint_path: "/data/elmo/tiny/model.ckpt-{step}"\n'
            f'all_model_checkpoint_paths: "/data/elmo/tiny/model.ckpt-{step}"\n'
        )
        shutil.copy(vocab_path, folder / "vocab.txt")

        # 2. NLPL "full" zip: model.hdf5, options.json, vocab.txt and the checkpoint beside them
        with zipfile.ZipFile(out / "nlpl_full.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(weights, "model.hdf5")
            archive.writestr("options.json", json.dumps(options_262))
            archive.write(vocab_path, "vocab.txt")
            archive.writestr("meta.json", json.dumps({"corpus": [{"language": "eng"}]}))
            for name in ("checkpoint", f"model.ckpt-{step}.index", f"model.ckpt-{step}.data-00000-of-00001",
                         f"model.ckpt-{step}.meta"):
                archive.write(folder / name, name)
        # 3. NLPL zip without vocab.txt (the plain ELMo entries)
        with zipfile.ZipFile(out / "nlpl_no_vocab.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(weights, "model.hdf5")
            archive.writestr("options.json", json.dumps(options_262))

        # 4. TF-Hub-style SavedModel folder
        hub = out / "tfhub_module"
        _fresh(hub, create=False)
        write_saved_model(options_262, weights, hub)

        # 5. DeepPavlov's LM tar.gz (elmo-lm-ready4fine-tuning-*: options, vocab, saves/model.*)
        root = "elmo-lm-ready4fine-tuning-tiny"
        with tarfile.open(out / "deeppavlov_lm.tar.gz", "w:gz") as archive:
            archive.add(folder / "options.json", f"{root}/options.json")
            archive.add(vocab_path, f"{root}/vocab.txt")
            for suffix in ("index", "data-00000-of-00001", "meta"):
                archive.add(folder / f"model.ckpt-{step}.{suffix}", f"{root}/saves/model.{suffix}")
            info = tarfile.TarInfo(f"{root}/saves/checkpoint")
            text = b'model_checkpoint_path: "model"\nall_model_checkpoint_paths: "model"\n'
            info.size = len(text)
            import io

            archive.addfile(info, io.BytesIO(text))
        # 6. DeepPavlov's TF-Hub module tar.gz (elmo_ru-news_*.tar.gz: a hub module, no softmax)
        with tarfile.open(out / "deeppavlov_hub.tar.gz", "w:gz") as archive:
            for path in sorted(hub.rglob("*")):
                archive.add(path, path.relative_to(hub).as_posix(), recursive=False)
    print(json.dumps({"test_perplexity_carried": test_perplexity}, indent=1))


def _get_sentence_ending(self):
    """bilm-tf's ``LMDataset.get_sentence``, ending with ``return`` where the original lets a
    StopIteration escape the generator (a RuntimeError since Python 3.7, PEP 479, which ends
    ``test`` before it reports its perplexity)."""
    while True:
        if self._i == self._nids:
            try:
                self._ids = self._load_random_shard()
            except StopIteration:
                return
        ret = self._ids[self._i]
        self._i += 1
        yield ret


def _fresh(path: Path, *, create: bool = True) -> None:
    if path.exists():
        shutil.rmtree(path)
    if create:
        path.mkdir(parents=True)


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name.replace("_", "-"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="output folder (tests/data/bilm_tf)")
    main(parser.parse_args().out)
