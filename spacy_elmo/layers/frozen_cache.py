"""A frozen biLM's layers per segment, kept across calls: ``spacy train`` would otherwise recompute
the same layers every epoch and at every dev evaluation (see ``bilm_model.ElmoBiLM``).

Epochs read the corpus in a cycle, reshuffled each time. A cache that evicts its least recently
used entry to make room for every newcomer keeps, when the corpus is larger than its bound, the
segments read last, which the next epoch reads at random places: it hits almost never. A cache
that only stops admitting when full keeps whatever came first, under ``spacy train`` the dev set
of the evaluation at step 0, and the training epochs then hit little.

So a full cache keeps a sample of the segments that does not depend on their order: each segment
has a fixed rank (a hash of its words), and among segments looked up about as often a newcomer
takes the place of the stored entry of highest rank when its own rank is lower. Once every segment
has been seen, the cache holds those of lowest rank (a bottom-k sample, training and dev sentences
in their proportions), no epoch moves a segment in or out, and the lookups hit about bound /
working set. Frequency comes first: a segment looked up at least twice more than an entry takes its
place whatever their ranks, and an entry looked up twice more than a newcomer keeps its own (the
counts are TinyLFU's, kept per segment and halved after a while so that old traffic fades). Within
any run of epochs two segments' counts differ by at most one (each is read once an epoch), so there
only the ranks decide, while a segment that keeps coming back (a repeated text at prediction)
displaces one that does not.
"""
import hashlib
import heapq
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Dict, Hashable, List, Optional, Tuple

import torch
from thinc.api import Model
from thinc.model import deserialize_attr, serialize_attr

from ..fast.lru import LRUCache
from ..fast.versions import WeightsVersion, weights_version

# the share of the memory available when the cache is first used (the biLM's weights loaded by
# then) that a cache without an explicit bound may take
AUTO_SHARE = 0.25
# the bound when the available memory cannot be read
FALLBACK_BYTES = 512 * 2**20
# where Linux mounts the cgroup file systems; a limit at or above this many bytes is none (v1 writes
# 2**63 rounded down to a page)
CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED_CGROUP = 2**62
# lookups between two halvings of the counts: TinyLFU's sample, ten per stored entry, at least this many
MIN_SAMPLE = 10_000
SAMPLE_PER_ENTRY = 10
# a newcomer replaces an entry looked up at most this many times fewer whatever their ranks, and is
# turned away by one looked up this many times more: epochs never differ by more
MARGIN = 1
# entries looked up too often to give way that a newcomer passes over, highest rank first, before it
# is turned away
MAX_PASSED_OVER = 8
# the warning waits until fewer than half of the recent lookups (a moving average over about ten)
# are of new segments: a corpus's repeated sentences (CoNLL's datelines) come back in the first
# epoch, when the segments seen so far are a fraction of those the run reads
NEW_SHARE_DECAY = 0.9
NEW_SHARE_TO_WARN = 0.5


class FrozenCache:
    """Layers of a frozen biLM per segment (key: the segment's words), at most ``max_bytes`` of
    arrays in all; when full, a newcomer is admitted in place of the entries of highest rank (a
    hash of the words) where it ranks lower and is looked up about as often, or where it has been
    looked up at least twice more often (the module's docstring says why).

    Entries are valid for one state of the weights: ``check`` empties the cache when the
    module, its submodules' classes (and ``precision``), or any parameter or buffer (identity,
    storage, in-place version) is not what the entries were computed with. Weights changed in a way torch does not count (writes through
    ``.data`` or numpy views) need ``clear_frozen_cache``. Stored arrays are never handed out:
    callers get copies. Copies of the cache (``copy.deepcopy``, ``Model.copy``) and serialized
    models start empty.

    The first time a segment the cache turned away comes back while most recent lookups are of
    segments seen before (a second epoch, a repeated text), one warning names the size that would
    hold every distinct segment seen so far, at this biLM's bytes a token.

    A cache with the automatic bound (None) stores only once it has served a training pass
    (``note_pass(is_train=True)``): under ``spacy train`` it holds the epochs' segments and the dev
    set's, while a pipeline that only predicts (a service, a corpus embedded once) keeps its memory
    flat instead of filling a quarter of the machine with segments it will not see again. An
    explicit bound stores at prediction too (a text repeated at prediction).

    Two threads may run the same model at once (a server's lanes): every method that reads or
    changes the entries or the counts holds the cache's lock.

    bound (Optional[int]): the bound in bytes (0: no cache); None: ``AUTO_SHARE`` of the memory
        available when the cache is first used (``check``).
    """

    def __init__(self, bound: Optional[int]) -> None:
        self.bound = bound
        self.hits = 0
        self.misses = 0
        self.refused = 0
        self._entries = LRUCache(0 if bound is None else bound)  # each entry costs its arrays' bytes
        self._by_rank: List[Tuple[int, Hashable]] = []  # max-heap (negated ranks) of the stored keys
        self._module: Optional[torch.nn.Module] = None
        self._state: Tuple = ()
        # per segment (by hash: a collision only merges two counts): lookups, tokens
        self._counts: Dict[int, Tuple[int, int]] = {}
        self._lookups = 0
        self._aged = False
        self._layer_shape: Optional[Tuple[int, int, int]] = None  # layers, width, bytes a value
        self._warned = False
        self._new_share = 1.0  # moving average of the lookups that were of a new segment
        self.trained = False  # a training pass has used the cache (the automatic bound stores from then on)
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def max_bytes(self) -> int:
        """RETURNS (int): the bound in bytes (with ``bound`` None: 0 until the cache is first used)."""
        return int(self._entries.max_cost)

    @property
    def enabled(self) -> bool:
        """RETURNS (bool): whether the cache stores anything (a bound of 0 turns it off)."""
        return self.bound is None or self.bound > 0

    @property
    def stores(self) -> bool:
        """RETURNS (bool): whether ``put`` stores: an explicit bound always, the automatic one once a
        training pass has used the cache."""
        return self.bound is not None or self.trained

    def note_pass(self, is_train: bool) -> None:
        """Count a forward pass: a training pass lets the automatically bounded cache store."""
        with self._lock:
            self.trained = self.trained or is_train

    @property
    def n_bytes(self) -> int:
        return self._entries.cost

    def __deepcopy__(self, memo: dict) -> "FrozenCache":
        return FrozenCache(self.bound)

    def __reduce__(self) -> Tuple:
        """A pickled cache starts empty, as a copy does (its lock and entries stay behind)."""
        return (FrozenCache, (self.bound,))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_rank = []
            self._counts.clear()
            self._lookups = 0
            self._aged = False
            self._new_share = 1.0
            self._module = None
            self._state = ()

    def check(self, module: torch.nn.Module, state: WeightsVersion) -> None:
        """Empty the cache unless its entries were computed by this module in this state.

        state (WeightsVersion): ``weights_version(module)`` now (the forward pass takes it once).
        """
        with self._lock:
            if self.bound is None and not self._entries.max_cost:
                self._entries.max_cost = int(AUTO_SHARE * available_memory())
            if module is not self._module or state != self._state:
                self.clear()
                self._module = module
                self._state = state

    def get(self, key: Hashable) -> Optional[Any]:
        """The stored layers of a segment (the caller must copy them), or None."""
        with self._lock:
            seen_before = self._count(key)
            layers = self._entries.get(key)
            if layers is None:
                self.misses += 1
                if seen_before and self.refused and not self._warned and self._new_share < NEW_SHARE_TO_WARN:
                    self._warn_working_set()
                return None
            self.hits += 1
            return layers

    def put(self, key: Hashable, layers: Any) -> None:
        """Store a copy of a segment's layers if there is room, or in place of entries that give way
        to it (``_gives_way``), the highest ranked first."""
        with self._lock:
            cost = layers.nbytes
            if not self.stores or key in self._entries or cost > self.max_bytes:
                return
            if self._layer_shape is None and layers.shape[1]:
                self._layer_shape = (layers.shape[0], layers.shape[2], layers.itemsize)
            rank = segment_rank(key)
            needed = cost - (self.max_bytes - self._entries.cost)
            if needed > 0:
                victims = self._victims(needed, self._lookups_of(key), rank)
                if victims is None:
                    self.refused += 1
                    return
                for victim in victims:
                    self._entries.pop(victim)
            self._entries.put(key, layers.copy(), cost)
            heapq.heappush(self._by_rank, (-rank, key))

    def _victims(self, needed: int, lookups: int, rank: int) -> Optional[List[Hashable]]:
        """The entries, highest rank first, whose bytes make ``needed`` bytes of room for a newcomer
        looked up ``lookups`` times, of rank ``rank``; None where they will not give way. Entries
        too often looked up to give way are passed over (at most ``MAX_PASSED_OVER``); the heap
        keeps every entry it was given back."""
        victims: List[Tuple[int, Hashable]] = []
        passed: List[Tuple[int, Hashable]] = []
        while needed > 0 and self._by_rank and len(passed) <= MAX_PASSED_OVER:
            item = heapq.heappop(self._by_rank)
            victim = item[1]
            if victim not in self._entries:
                continue  # evicted or cleared since it was pushed
            victim_lookups = self._lookups_of(victim)
            if victim_lookups > lookups + MARGIN:
                passed.append(item)  # looked up too often to give way to this newcomer
                continue
            if lookups <= victim_lookups + MARGIN and -item[0] <= rank:
                passed.append(item)  # about as often looked up, and ranked lower: it stays, and so do all below it
                break
            victims.append(item)
            needed -= self._entries.cost_of(victim)
        for item in passed:
            heapq.heappush(self._by_rank, item)
        if needed > 0:
            for item in victims:
                heapq.heappush(self._by_rank, item)
            return None
        return [victim for _, victim in victims]

    def _lookups_of(self, key: Hashable) -> int:
        return self._counts.get(hash(key), (0, 0))[0]

    def _count(self, key: Hashable) -> bool:
        """Count a lookup of ``key``, halving every count once a sample of lookups has been made.
        RETURNS (bool): whether the key had been looked up before (since its count last faded)."""
        digest = hash(key)
        lookups, n_tokens = self._counts.get(digest, (0, len(key)))
        self._counts[digest] = (lookups + 1, n_tokens)
        self._lookups += 1
        self._new_share = NEW_SHARE_DECAY * self._new_share + (1 - NEW_SHARE_DECAY) * (lookups == 0)
        if self._lookups >= max(MIN_SAMPLE, SAMPLE_PER_ENTRY * len(self._entries)):
            self._counts = {d: (n // 2, t) for d, (n, t) in self._counts.items() if n >= 2}
            self._lookups = 0
            self._aged = True
        return lookups > 0

    def _warn_working_set(self) -> None:
        self._warned = True
        if self._layer_shape is None:
            return
        n_layers, width, itemsize = self._layer_shape
        per_token = n_layers * width * itemsize
        tokens = sum(t for _, t in self._counts.values())
        needed_mb = -(-tokens * per_token // 2**20)
        at_least = "at least " if self._aged else ""
        warnings.warn(
            f"The frozen biLM's layer cache (frozen_cache_mb = {self.max_bytes / 2**20:.4g}) is smaller than the "
            f"segments it is asked for: it keeps a fixed share of them and recomputes the rest. The "
            f"{len(self._counts):,} distinct segments seen so far ({tokens:,} tokens) take {at_least}{needed_mb:,} MB "
            f"at this biLM's {per_token / 1024:.1f} KB a token ({n_layers} layers x {width} values x {itemsize} bytes); "
            f"frozen_cache_mb = {needed_mb} of [components.NAME.model] would hold them all (a corpus not yet "
            f"read through, as before the first epoch ends, needs its training and dev tokens x {per_token / 1024:.1f} KB)",
            stacklevel=2,
        )


def segment_rank(key: Hashable) -> int:
    """RETURNS (int): a segment's fixed rank in the cache, a 64-bit hash of its words (the same in
    every process, unlike ``hash``, so that runs keep the same sample)."""
    text = "\x1f".join(key) if isinstance(key, tuple) else repr(key)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def frozen_weights_version(module: torch.nn.Module) -> WeightsVersion:
    """RETURNS (WeightsVersion): the key the cache's entries are valid for (``check``); it changes
    when the weights do, so a frozen biLM's layers, or files, made under one key stand for it."""
    return weights_version(module)


def available_memory(cgroup_root: Path = CGROUP_ROOT) -> int:
    """RETURNS (int): bytes of memory available to new allocations now (Linux's MemAvailable, else
    the free pages the OS reports), or ``FALLBACK_BYTES / AUTO_SHARE`` where neither can be read; at
    most what the process's memory cgroup (a container's limit) has left, which MemAvailable does
    not see: in a container it reports the host's memory.

    cgroup_root (Path): where the cgroup file systems are mounted.
    """
    available = None
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    names = os.sysconf_names if hasattr(os, "sysconf_names") else {}
    if available is None and "SC_AVPHYS_PAGES" in names and "SC_PAGE_SIZE" in names:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if available is None:
        available = int(FALLBACK_BYTES / AUTO_SHARE)
    headroom = cgroup_headroom(cgroup_root)
    return available if headroom is None else min(available, headroom)


def cgroup_headroom(root: Path = CGROUP_ROOT) -> Optional[int]:
    """The bytes the memory cgroup seen at ``root`` may still allocate: its limit less its usage, the
    page cache it can drop (inactive files) not counted as used, as container runtimes count it.
    cgroup v2 (``memory.max``) or v1 (``memory/memory.limit_in_bytes``).

    RETURNS (Optional[int]): None where there is no limit or it cannot be read.
    """
    for folder, limit_file, usage_file, inactive_key in (
        (root, "memory.max", "memory.current", "inactive_file"),
        (root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
    ):
        try:
            limit_text = (folder / limit_file).read_text().strip()
            usage = int((folder / usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if not limit_text.isdigit() or int(limit_text) >= UNLIMITED_CGROUP:
            return None  # "max" (v2), or v1's "no limit" (the largest page-aligned number)
        inactive = 0
        try:
            for line in (folder / "memory.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == inactive_key and value.strip().isdigit():
                    inactive = int(value)
        except OSError:
            pass
        return max(0, int(limit_text) - max(0, usage - inactive))
    return None


@serialize_attr.register(FrozenCache)
def _serialize_cache(_: FrozenCache, value: FrozenCache, name: str, model: Model) -> bytes:
    return serialize_attr(value.bound, value.bound, name, model)


@deserialize_attr.register(FrozenCache)
def _deserialize_cache(_: FrozenCache, value: bytes, name: str, model: Model) -> FrozenCache:
    return FrozenCache(deserialize_attr(0, value, name, model))
