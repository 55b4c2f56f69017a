"""What a published name promises of its files, checked on a file placed by hand in the download
cache before its digest is recorded as trusted.

AllenNLP names each model by its shape (``2x1024_128_2048cnn_1xhighway``: LSTM layers x cells,
projection, char-CNN filters in all, highway layers), and the registry gives the weights' size
(their float32 parameters). A file copied into ``small/`` must have that shape: its options say
it, and its HDF5 datasets have the shapes it implies (read from the file's metadata, no tensor is
read and no model is built, so a file that declares a huge model costs nothing). Its size must be
the published size. What differs is refused in one line naming the file; the download record
(``download_record``) is written only after these checks pass.
"""
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Dict, List, Tuple

from .allennlp import read_options
from .errors import ModelFileError

_NAME = re.compile(r"(\d+)x(\d+)_(\d+)_(\d+)cnn_(\d+)xhighway(?:_\S+)?")
_CELL = "RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
# the registry's sizes are rounded to 0.1 MB; an HDF5 file adds a few kilobytes of its own
SIZE_ROUNDING = 50_000
HDF5_OVERHEAD = 1_000_000


@dataclass(frozen=True)
class PublishedShape:
    """The dimensions AllenNLP's name for a model gives, and where the options keep each.

    n_layers (int): LSTM layers per direction (``lstm.n_layers``).
    dim (int): LSTM cells (``lstm.dim``).
    projection_dim (int): LSTM outputs (``lstm.projection_dim``).
    n_filters (int): char-CNN filters of all widths together (``char_cnn.filters``).
    n_highway (int): highway layers (``char_cnn.n_highway``).
    """

    n_layers: int
    dim: int
    projection_dim: int
    n_filters: int
    n_highway: int

    @classmethod
    def parse(cls, name: str) -> "PublishedShape":
        """RETURNS (PublishedShape): the shape AllenNLP's name ``name`` says, e.g. "2x1024_128_2048cnn_1xhighway"."""
        found = _NAME.fullmatch(name)
        if found is None:
            raise ValueError(f"{name}: not an AllenNLP shape name (LAYERSxDIM_PROJECTION_FILTERScnn_Nxhighway)")
        layers, dim, projection, filters, highway = (int(group) for group in found.groups())
        return cls(layers, dim, projection, filters, highway)

    def differences(self, other: "PublishedShape") -> List[str]:
        """RETURNS (List[str]): each dimension where ``other`` is not this shape, as "lstm.dim 64 (published 1024)"."""
        return [f"{_OPTION[f.name]} {getattr(other, f.name)} (published {getattr(self, f.name)})"
                for f in fields(self) if getattr(other, f.name) != getattr(self, f.name)]

    def datasets(self) -> Dict[str, Tuple[int, ...]]:
        """RETURNS (Dict[str, Tuple[int, ...]]): the HDF5 datasets that fix this shape, with the shape each has."""
        four_gates, projection = 4 * self.dim, self.projection_dim
        shapes = {"CNN_proj/W_proj": (self.n_filters, projection)}
        for layer in range(self.n_highway):
            shapes[f"CNN_high_{layer}/W_carry"] = (self.n_filters, self.n_filters)
        for direction in (0, 1):
            for layer in range(self.n_layers):
                cell = _CELL.format(direction=direction, layer=layer)
                # the kernel stacks the layer's input (a projection) over the recurrent projection
                shapes[f"{cell}/W_0"] = (2 * projection, four_gates)
                shapes[f"{cell}/W_P_0"] = (self.dim, projection)
        return shapes

    def beyond(self) -> List[str]:
        """RETURNS (List[str]): groups a file of this shape lacks (one layer more of each kind)."""
        cells = [_CELL.format(direction=direction, layer=self.n_layers) for direction in (0, 1)]
        return [f"CNN_high_{self.n_highway}", *cells]


_OPTION = {"n_layers": "lstm.n_layers", "dim": "lstm.dim", "projection_dim": "lstm.projection_dim",
           "n_filters": "char_cnn filters", "n_highway": "char_cnn.n_highway"}


def check_placed_options(path: Path, name: str, shape: str) -> str:
    """Refuse an options file placed as ``name`` whose dimensions are not its published ``shape``.

    RETURNS (str): what was checked, for the download record.
    """
    published = PublishedShape.parse(shape)
    config = read_options(path)
    found = PublishedShape(config.n_layers, config.dim, config.projection_dim, config.n_filters, config.n_highway)
    differences = published.differences(found)
    if differences:
        raise ModelFileError(path, f"{_placed(name, shape)}, but its options give {', '.join(differences)}; {_WHAT_TO_DO}")
    return f"the shape {shape}"


def check_placed_weights(path: Path, name: str, shape: str, size_mb: float) -> str:
    """Refuse an HDF5 weights file placed as ``name`` whose datasets are not those of its published
    ``shape``, or whose size is not about ``size_mb`` megabytes (10^6 bytes), before a tensor is read.

    RETURNS (str): what was checked, for the download record.
    """
    import h5py

    published = PublishedShape.parse(shape)
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        raise ModelFileError(path, f"not a readable HDF5 file, perhaps truncated or damaged ({err})") from err
    with handle:
        for dataset, expected in published.datasets().items():
            node = _stored(handle, dataset)
            found = tuple(node.shape) if isinstance(node, h5py.Dataset) else None
            if found != expected:
                what = "no dataset" if found is None else f"shape {found}"
                raise ModelFileError(path, f"{_placed(name, shape)}, but it has {what} at {dataset!r} where that "
                                           f"shape has {expected}; {_WHAT_TO_DO}")
        extra = [group for group in published.beyond() if _stored(handle, group) is not None]
        if extra:
            raise ModelFileError(path, f"{_placed(name, shape)}, but it holds {extra[0]!r}, a layer more than that "
                                       f"shape has; {_WHAT_TO_DO}")
    size = path.stat().st_size
    smallest = size_mb * 1e6 - SIZE_ROUNDING
    if not smallest <= size <= smallest + 2 * SIZE_ROUNDING + HDF5_OVERHEAD:
        raise ModelFileError(path, f"{_placed(name, shape)}, but it holds {size:,} bytes where the published file "
                                   f"holds about {size_mb:,.1f} MB (its parameters as float32); {_WHAT_TO_DO}")
    return f"the shape {shape} and the published size (about {size_mb:,.1f} MB)"


_WHAT_TO_DO = "delete it to download the published file, or give your own model by its path"


def _stored(handle, name: str):
    """The group or dataset at ``name`` reached through hard links alone (None otherwise): a link
    out of the file is not followed here; the reader refuses it by name when the model loads."""
    import h5py

    node = handle
    for part in name.split("/"):
        if not isinstance(node, h5py.Group) or not isinstance(node.get(part, getlink=True), h5py.HardLink):
            return None
        node = node[part]
    return node


def _placed(name: str, shape: str) -> str:
    return f"placed by hand as `{name}`, published as {shape}"
