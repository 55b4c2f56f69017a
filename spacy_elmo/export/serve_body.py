"""What the served pipeline reads and writes: a request's body, read within its limit and checked, and
a response's body in the format the client asked for.

Requests: ``{"text": "..."}`` or ``{"texts": ["...", ...]}``, with ``"layers": true`` for every layer
besides the mixed vector and ``"encoding": "numbers"`` for JSON numbers instead of base64. The body is
refused from its ``Content-Length`` when that is over the limit (413, before a byte of it is read),
and while it streams in otherwise; bytes that are not UTF-8 and JSON that is not this shape get 400
and 422, each with the one error shape ``{"error": "one line", "status": N, "request_id": "..."}``.

Responses: an array is ``{"dtype": "float32", "shape": [...], "data": ...}``, its values little-endian
float32: in JSON ``data`` is their base64 (the default: 4/3 of the raw bytes, exact) or, with
``"encoding": "numbers"``, nested lists of numbers written with 9 significant digits (exact for
float32, about three times the raw bytes); in msgpack (``Accept: application/msgpack``) ``data`` is
the raw bytes. ``Accept-Encoding: gzip`` compresses the body. A response whose arrays would encode
to more than the response limit is refused with 413 before it is encoded (``answer_tokens``: the
most tokens an answer holds within it).

Beside the arrays, a result holds what the pipeline's other components set on its Doc, where the
Doc has it (``doc_annotations``): ``tags``, ``pos``, ``morphs``, ``lemmas`` (a string a token),
``heads`` (a token's head, its index in the text) and ``deps``, ``ents`` (``[start, end, label]``,
token offsets, the end exclusive), ``sents`` (``[start, end]``) and ``cats`` (a text classifier's
scores).
"""
import base64
import gzip
import json
import re
from dataclasses import dataclass
from typing import Any, AsyncIterator, Collection, Dict, List, Mapping, Optional, Sequence

import numpy as np

JSON = "application/json"
MSGPACK = "application/msgpack"
MSGPACK_TYPES = (MSGPACK, "application/x-msgpack")
ENCODINGS = ("base64", "numbers")
# bytes of body per byte of float32 values, each format (numbers: 9 significant digits, a sign, a
# point or an exponent and a comma: at most 16 characters a value, about 11 for the shipped model's)
BODY_FACTOR = {"msgpack": 1.0, "base64": 4 / 3, "numbers": 4.0}
# most bytes a character of a text takes in a JSON body (an astral character escaped as two \uXXXX)
JSON_BYTES_PER_CHAR = 12
GZIP_LEVEL = 5
GZIP_MIN_BYTES = 1024  # below this, gzip's header costs about what it saves
# what a pipeline's components may set on a Doc (``Doc.has_annotation``), each answered beside the
# arrays where the Doc has it; CATS: a text classifier's ``doc.cats``
ANNOTATIONS = ("TAG", "POS", "MORPH", "LEMMA", "DEP", "ENT_IOB", "SENT_START", "CATS")
# the keys an answer holds each annotation under
ANSWER_KEYS = {"TAG": "tags", "POS": "pos", "MORPH": "morphs", "LEMMA": "lemmas", "DEP": "heads, deps",
               "ENT_IOB": "ents", "SENT_START": "sents", "CATS": "cats"}
_LONE_SURROGATES = re.compile("[\ud800-\udfff]")
# a body refused unread: the connection closes after the 413, else the server would go on reading
# (and dropping) the rest of it, and the client would wait on a connection that answers nothing more
CLOSE = {"Connection": "close"}


class RequestError(Exception):
    """A request the server answers with a 4xx or 5xx and a one-line message, the others unharmed."""

    def __init__(self, status: int, message: str, headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass(frozen=True)
class EmbedRequest:
    """A checked request: its texts (lone surrogates dropped), whether it asked for one text
    (``{"text": ...}``, answered with one result) or a list, and what to answer with."""

    texts: List[str]
    single: bool
    layers: bool
    encoding: str
    dropped_characters: int
    relies_on_defaults: bool  # neither layers nor encoding given: the defaults changed in 0.10


def drop_lone_surrogates(text: str) -> str:
    """``text`` without the code points U+D800..U+DFFF, which no UTF-8 can hold: JSON's ``"\\ud800"``
    escapes one into a Python str, and spaCy refuses such a text when it builds the Doc (a pair of
    escapes that makes one character is decoded to that character by the JSON parser, and stays)."""
    return _LONE_SURROGATES.sub("", text)


def error_body(status: int, message: str, request_id: str) -> bytes:
    """The one error shape of every 4xx and 5xx answer."""
    return json.dumps({"error": message, "status": status, "request_id": request_id}).encode("utf-8")


def body_limit(max_chars: int, max_texts: int) -> int:
    """The most bytes a request body may have: ``max_texts`` texts of ``max_chars`` characters each,
    every character escaped, and room for the rest of the JSON."""
    return max_texts * max_chars * JSON_BYTES_PER_CHAR + 65536


async def read_body(headers: Mapping[str, str], stream: AsyncIterator[bytes], limit: int) -> bytes:
    """The body, refused with 413 from its ``Content-Length`` before any of it is read when that is
    over ``limit``, or as soon as more than ``limit`` bytes have streamed in (a chunked body)."""
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise RequestError(400, f"Content-Length {declared!r} is not a number of bytes")
        if int(declared) > limit:
            raise RequestError(413, f"a body of {int(declared)} bytes is over the limit of {limit} bytes", CLOSE)
    chunks: List[bytes] = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"a body of more than {limit} bytes is over the limit of {limit} bytes", CLOSE)
        chunks.append(chunk)
    return b"".join(chunks)


def parse_request(body: bytes, *, max_chars: int, max_texts: int) -> EmbedRequest:
    """The request a body holds, checked: 400 for bytes that are not UTF-8 JSON, 422 for JSON that is
    not ``{"text": str}`` or ``{"texts": [str, ...]}`` with optional ``layers`` (bool) and ``encoding``,
    413 for a text over ``max_chars`` or more than ``max_texts`` texts."""
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise RequestError(400, f"the body is not UTF-8 (byte {err.start}); send UTF-8 JSON") from None
    except json.JSONDecodeError as err:
        raise RequestError(422, f"malformed request: the body is not JSON ({err.msg} at character {err.pos}); "
                                'send {"text": "..."}') from None
    except RecursionError:  # arrays or objects nested deeper than the parser recurses: not a request
        raise RequestError(422, 'malformed request: the body nests too deep; send {"text": "..."}') from None
    if not isinstance(data, dict) or ("text" in data) == ("texts" in data):
        raise RequestError(422, 'malformed request: send an object with "text" (a string) or "texts" (a list of '
                                "strings), one of them")
    unknown = sorted(set(data) - {"text", "texts", "layers", "encoding"})
    if unknown:
        raise RequestError(422, f"malformed request: unknown field {unknown[0]!r} (text, texts, layers, encoding)")
    single = "text" in data
    texts = [data["text"]] if single else data["texts"]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        where = "text" if single else "texts"
        raise RequestError(422, f"malformed request: {where}: must be {'a string' if single else 'a list of strings'}")
    if not texts:
        raise RequestError(422, "malformed request: texts: the list is empty")
    layers = data.get("layers", False)
    encoding = data.get("encoding", "base64")
    if not isinstance(layers, bool):
        raise RequestError(422, "malformed request: layers: must be true or false")
    if encoding not in ENCODINGS:
        raise RequestError(422, f"malformed request: encoding: must be one of {', '.join(ENCODINGS)}")
    if len(texts) > max_texts:
        raise RequestError(413, f"{len(texts)} texts are over the limit of {max_texts} a request")
    longest = max(len(t) for t in texts)
    if longest > max_chars:
        raise RequestError(413, f"text of {longest} characters is over the limit of {max_chars}")
    cleaned = [drop_lone_surrogates(t) for t in texts]
    dropped = sum(len(t) - len(c) for t, c in zip(texts, cleaned))
    return EmbedRequest(cleaned, single, layers, encoding, dropped, not ({"layers", "encoding"} & set(data)))


def response_format(accept: Optional[str]) -> str:
    """``msgpack`` where the Accept header names msgpack, else ``json``."""
    if accept and any(kind in accept.lower() for kind in MSGPACK_TYPES):
        return "msgpack"
    return "json"


def accepts_gzip(accept_encoding: Optional[str]) -> bool:
    """Whether Accept-Encoding allows gzip (and does not give it q=0)."""
    for part in (accept_encoding or "").lower().split(","):
        name, _, params = part.strip().partition(";")
        if name.strip() in ("gzip", "*"):
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def doc_arrays(doc: Any, layers: bool) -> Dict[str, Any]:
    """A Doc's tokens and arrays: ``doc._.elmo.mixed`` (n_tokens, width) and, with ``layers``,
    ``doc._.elmo.layers`` (L+1, n_tokens, width)."""
    elmo = doc._.elmo
    arrays: Dict[str, Any] = {"tokens": [t.text for t in doc], "mixed": np.asarray(elmo.mixed, dtype=np.float32)}
    if layers:
        arrays["layers"] = np.asarray(elmo.layers, dtype=np.float32)
    return arrays


def annotations_of(doc: Any) -> List[str]:
    """The ``ANNOTATIONS`` a Doc has (a pipeline's components set them)."""
    return [kind for kind in ANNOTATIONS if (bool(doc.cats) if kind == "CATS" else doc.has_annotation(kind))]


def doc_annotations(doc: Any, kinds: Collection[str]) -> Dict[str, Any]:
    """Those of ``kinds`` (``ANNOTATIONS``) the Doc has, as an answer holds them: a list a token
    (``tags``, ``pos``, ``morphs``, ``lemmas``; ``heads``, the index of each token's head, and
    ``deps``), ``ents`` and ``sents`` as token offsets (``[start, end, label]``, ``[start, end]``,
    the end exclusive) and ``cats`` as the Doc's scores."""
    found: Dict[str, Any] = {}
    for kind in kinds:
        if kind == "CATS":
            if doc.cats:
                found["cats"] = {str(label): float(score) for label, score in doc.cats.items()}
        elif not doc.has_annotation(kind):
            continue
        elif kind == "TAG":
            found["tags"] = [token.tag_ for token in doc]
        elif kind == "POS":
            found["pos"] = [token.pos_ for token in doc]
        elif kind == "MORPH":
            found["morphs"] = [str(token.morph) for token in doc]
        elif kind == "LEMMA":
            found["lemmas"] = [token.lemma_ for token in doc]
        elif kind == "DEP":
            found["heads"] = [token.head.i for token in doc]
            found["deps"] = [token.dep_ for token in doc]
        elif kind == "ENT_IOB":
            found["ents"] = [[ent.start, ent.end, ent.label_] for ent in doc.ents]
        elif kind == "SENT_START":
            found["sents"] = [[sent.start, sent.end] for sent in doc.sents]
    return found


def answer_tokens(width: int, n_layers: int, max_bytes: int) -> Dict[str, Dict[str, int]]:
    """The most tokens an answer holds within ``max_bytes`` by ``check_response_size``'s estimate,
    per body (``base64``, ``numbers``: JSON; ``msgpack``), of the mixed vector alone (``mixed``) and
    with the layers (``layers``): ``width`` floats a token, and ``n_layers`` (L+1) x ``width`` more
    with the layers."""
    tokens: Dict[str, Dict[str, int]] = {}
    for body in ("base64", "numbers", "msgpack"):
        tokens[body] = {}
        for arrays, floats in (("mixed", width), ("layers", (1 + n_layers) * width)):
            fits = int(max_bytes // (4 * floats * BODY_FACTOR[body]))
            while int(4 * floats * (fits + 1) * BODY_FACTOR[body]) <= max_bytes:
                fits += 1
            while fits and int(4 * floats * fits * BODY_FACTOR[body]) > max_bytes:
                fits -= 1
            tokens[body][arrays] = fits
    return tokens


def check_response_size(value_bytes: int, *, fmt: str, encoding: str, layers: bool, max_bytes: int) -> None:
    """413 when arrays of ``value_bytes`` float32 bytes would take more than ``max_bytes`` in the body
    asked for; the message names only the ways out that would fit."""
    estimate = int(value_bytes * BODY_FACTOR["msgpack" if fmt == "msgpack" else encoding])
    if estimate <= max_bytes:
        return
    ways = (["without layers"] if layers else []) + ["for fewer or shorter texts"]
    if fmt != "msgpack" and value_bytes * BODY_FACTOR["msgpack"] <= max_bytes:
        ways.append("in msgpack")
    raise RequestError(413, f"the response would take about {estimate} bytes, over the limit of {max_bytes}: ask "
                            + (", ".join(ways[:-1]) + ", or " if len(ways) > 1 else "") + ways[-1])


def encode_response(results: Sequence[Dict[str, Any]], *, single: bool, fmt: str, encoding: str,
                    max_bytes: int) -> bytes:
    """The body of ``results`` (``doc_arrays`` of each text): one result for ``{"text": ...}``,
    ``{"results": [...]}`` for ``{"texts": [...]}``; 413 before encoding when the arrays would take
    more than ``max_bytes``."""
    values = sum(v.nbytes for r in results for v in r.values() if isinstance(v, np.ndarray))
    check_response_size(values, fmt=fmt, encoding=encoding, layers=any("layers" in r for r in results),
                        max_bytes=max_bytes)
    if fmt == "msgpack":
        import srsly

        payloads = [{k: _raw_array(v) if isinstance(v, np.ndarray) else v for k, v in r.items()} for r in results]
        return srsly.msgpack_dumps(payloads[0] if single else {"results": payloads})
    texts = [_json_result(r, encoding) for r in results]
    return (texts[0] if single else '{"results":[' + ",".join(texts) + "]}").encode("utf-8")


def maybe_gzip(body: bytes, wanted: bool) -> Optional[bytes]:
    """The body gzipped where the client accepts gzip and the body is large enough to gain; else None."""
    if not wanted or len(body) < GZIP_MIN_BYTES:
        return None
    return gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)


def decode_array(encoded: Dict[str, Any]) -> np.ndarray:
    """An array of a response, JSON (base64 or numbers) or msgpack, as float32 numpy."""
    data = encoded["data"]
    if isinstance(data, bytes):
        flat = np.frombuffer(data, dtype="<f4")
    elif isinstance(data, str):
        flat = np.frombuffer(base64.b64decode(data), dtype="<f4")
    else:
        return np.asarray(data, dtype=np.float32).reshape(encoded["shape"])
    return flat.astype(np.float32).reshape(encoded["shape"])


def _raw_array(array: np.ndarray) -> Dict[str, Any]:
    return {"dtype": "float32", "shape": list(array.shape), "data": np.ascontiguousarray(array, dtype="<f4").tobytes()}


def _json_result(result: Dict[str, Any], encoding: str) -> str:
    parts = []
    for key, value in result.items():
        if isinstance(value, np.ndarray):
            data = _numbers(value) if encoding == "numbers" else json.dumps(
                base64.b64encode(np.ascontiguousarray(value, dtype="<f4").tobytes()).decode("ascii"))
            value_text = f'{{"dtype":"float32","shape":{json.dumps(list(value.shape))},"data":{data}}}'
        else:
            value_text = json.dumps(value)
        parts.append(f"{json.dumps(key)}:{value_text}")
    return "{" + ",".join(parts) + "}"


def _numbers(array: np.ndarray) -> str:
    """Nested JSON lists of the values, 9 significant digits each: every float32 read back exactly."""
    if not np.isfinite(array).all():
        raise ValueError("the layers hold NaN or infinite values, which JSON numbers cannot carry")
    if array.ndim == 1:
        return "[" + ",".join(f"{x:.9g}" for x in array.tolist()) + "]"
    return "[" + ",".join(_numbers(row) for row in array) + "]"
